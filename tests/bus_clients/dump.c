/*
 * The C side of tests/bus_clients: reads a bus with clients/c/tickwire_bus.h and prints what it
 * holds in the canonical text format that tests/bus_clients/mod.rs prints from the Rust reader
 * and dump.py from the Python package (every field of every event, by name, plus the payload's
 * raw words), so that the three can be compared line for line.
 *
 *     dump [--from POSITION] [--batch N] BUS           the directory, then every event
 *     dump --request VENUE INSTRUMENT BUS              sends one snapshot request
 *     --owner UID                                      accept only UID's bus (tw_bus_open_owned)
 */
#define _POSIX_C_SOURCE 200809L
#include "tickwire_bus.h"

#include <inttypes.h>
#include <stdlib.h>

static void fixed(const char *key, tw_fixed value) {
    char digits[22];
    tw_fixed_format(value, digits);
    printf(" %s=%s", key, digits);
}

static void unsigned_field(const char *key, uint64_t value) {
    printf(" %s=%" PRIu64, key, value);
}

static void print_event(const tw_bus *bus, uint32_t partition, uint64_t position,
                        const tw_event *e) {
    const tw_event_header *h = &e->header;
    /* A bus of several partitions: each event's position is its partition's. */
    if (bus->partitions > 1) printf("%u:", (unsigned)partition);
    tw_directory_entry entry;
    const char *symbol =
        tw_bus_find_instrument(bus, h->venue_id, h->instrument_id, &entry) == 0 ? entry.symbol
                                                                                : "-";
    printf("%" PRIu64 " %s v=%u i=%u f=%u ex=%" PRIu64 " rx=%" PRIu64 " seq=%" PRIu64
           " sym=%s |",
           position, tw_kind_name(h->kind), (unsigned)h->venue_id, (unsigned)h->instrument_id,
           (unsigned)h->flags, h->exchange_ts_ns, h->recv_ts_ns, h->venue_seq, symbol);
    switch ((tw_kind)h->kind) {
    case TW_KIND_QUOTE:
        fixed("bid_px", e->quote.bid_px);
        fixed("bid_sz", e->quote.bid_sz);
        fixed("ask_px", e->quote.ask_px);
        fixed("ask_sz", e->quote.ask_sz);
        break;
    case TW_KIND_TRADE:
        fixed("price", e->trade.price);
        fixed("size", e->trade.size);
        unsigned_field("trade_id", e->trade.trade_id);
        unsigned_field("aggressor", e->trade.aggressor_side);
        break;
    case TW_KIND_BOOK_LEVEL:
        unsigned_field("side", e->level.side);
        fixed("price", e->level.price);
        fixed("size", e->level.size);
        break;
    case TW_KIND_SNAPSHOT_BEGIN:
    case TW_KIND_SNAPSHOT_END:
        unsigned_field("bid_levels", e->snapshot.bid_levels);
        unsigned_field("ask_levels", e->snapshot.ask_levels);
        unsigned_field("snapshot_id", e->snapshot.snapshot_id);
        break;
    case TW_KIND_GAP:
        unsigned_field("expected", e->gap.expected_seq);
        unsigned_field("received", e->gap.received_seq);
        unsigned_field("reason", e->gap.reason);
        break;
    case TW_KIND_VENUE_STATUS:
        unsigned_field("state", e->status.state);
        unsigned_field("reason_code", e->status.reason_code);
        unsigned_field("detail", e->status.detail);
        break;
    case TW_KIND_REFERENCE:
        fixed("price", e->reference.price);
        unsigned_field("kind", e->reference.kind);
        break;
    case TW_KIND_BAR:
        fixed("open", e->bar.open);
        fixed("high", e->bar.high);
        fixed("low", e->bar.low);
        fixed("close", e->bar.close);
        break;
    case TW_KIND_TRADING_STATUS:
        unsigned_field("action", e->trading_status.action);
        unsigned_field("reason", e->trading_status.reason);
        unsigned_field("trading_event", e->trading_status.trading_event);
        unsigned_field("is_trading", e->trading_status.is_trading);
        unsigned_field("is_quoting", e->trading_status.is_quoting);
        unsigned_field("ssr", e->trading_status.is_short_sell_restricted);
        break;
    case TW_KIND_IMBALANCE:
        fixed("ref_price", e->imbalance.ref_price);
        fixed("cont_book_clr_price", e->imbalance.cont_book_clr_price);
        unsigned_field("paired_qty", e->imbalance.paired_qty);
        unsigned_field("total_imbalance_qty", e->imbalance.total_imbalance_qty);
        unsigned_field("side", e->imbalance.side);
        unsigned_field("auction_type", e->imbalance.auction_type);
        unsigned_field("significant_imbalance", e->imbalance.significant_imbalance);
        unsigned_field("unpaired_side", e->imbalance.unpaired_side);
        unsigned_field("auction_status", e->imbalance.auction_status);
        unsigned_field("freeze_status", e->imbalance.freeze_status);
        unsigned_field("num_extensions", e->imbalance.num_extensions);
        break;
    case TW_KIND_STATISTIC:
        fixed("price", e->statistic.price);
        printf(" quantity=%" PRId64, e->statistic.quantity);
        unsigned_field("ts_ref", e->statistic.ts_ref);
        unsigned_field("stat_type", e->statistic.stat_type);
        unsigned_field("channel_id", e->statistic.channel_id);
        unsigned_field("update_action", e->statistic.update_action);
        unsigned_field("stat_flags", e->statistic.stat_flags);
        break;
    case TW_KIND_LIQUIDATION:
        fixed("price", e->liquidation.price);
        fixed("size", e->liquidation.size);
        unsigned_field("position_side", e->liquidation.position_side);
        break;
    }
    printf(" | raw=%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "\n", e->raw[0],
           e->raw[1], e->raw[2], e->raw[3]);
}

int main(int argc, char **argv) {
    long long from = -1;
    size_t batch_size = 256;
    int request = 0;
    uid_t owner = TW_OWNER_TRUSTED;
    unsigned long request_venue = 0, request_instrument = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            from = atoll(argv[++i]);
        } else if (strcmp(argv[i], "--owner") == 0 && i + 1 < argc) {
            owner = (uid_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            batch_size = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--request") == 0 && i + 2 < argc) {
            request = 1;
            request_venue = strtoul(argv[++i], NULL, 10);
            request_instrument = strtoul(argv[++i], NULL, 10);
        } else {
            path = argv[i];
        }
    }
    if (path == NULL || batch_size == 0 || batch_size > 4096) {
        fprintf(stderr,
                "usage: dump [--from N] [--batch 1..4096] [--request V I] [--owner UID] BUS\n");
        return 2;
    }
    tw_bus bus;
    if (tw_bus_open_owned(&bus, path, TW_START_OLDEST, owner) != TW_OK) {
        fprintf(stderr, "dump: %s\n", tw_bus_error(&bus));
        return 1;
    }
    if (request) {
        int status = tw_request_snapshot(&bus, (uint16_t)request_venue,
                                         (uint32_t)request_instrument);
        if (status != TW_OK) fprintf(stderr, "dump: %s\n", tw_bus_error(&bus));
        tw_bus_close(&bus);
        return status == TW_OK ? 0 : 1;
    }
    if (from >= 0) bus.next[0] = (uint64_t)from;
    printf("open capacity=%" PRIu64 " epoch=%" PRIu64 " cursor=%" PRIu64 " closed=%d\n",
           bus.capacity, bus.epoch, tw_bus_cursor(&bus), tw_bus_is_closed(&bus));
    uint64_t entries = tw_bus_directory_len(&bus);
    for (uint64_t index = 0; index < entries; index++) {
        tw_directory_entry entry;
        tw_bus_directory_entry(&bus, index, &entry);
        printf("dir %" PRIu64 " v=%u i=%u venue=%s symbol=%s venue_symbol=%s\n", index,
               (unsigned)entry.venue_id, (unsigned)entry.instrument_id, entry.venue,
               entry.symbol, entry.venue_symbol);
    }
    tw_event *events = aligned_alloc(64, batch_size * sizeof(tw_event));
    if (events == NULL) return 1;
    for (;;) {
        if (tw_bus_check_size(&bus) != TW_OK) {
            fprintf(stderr, "dump: %s\n", tw_bus_error(&bus));
            return 1;
        }
        tw_batch batch;
        if (tw_bus_read(&bus, events, batch_size, &batch) != TW_OK) {
            fprintf(stderr, "dump: %s\n", tw_bus_error(&bus));
            return 1;
        }
        if (batch.missed > 0 && bus.partitions > 1)
            printf("missed %" PRIu64 " partition=%u\n", batch.missed, (unsigned)batch.partition);
        else if (batch.missed > 0)
            printf("missed %" PRIu64 "\n", batch.missed);
        if (batch.count == 0 && batch.missed == 0) break;
        uint64_t first = bus.next[batch.partition] - batch.count;
        for (size_t i = 0; i < batch.count; i++)
            print_event(&bus, batch.partition, first + i, &events[i]);
    }
    printf("end position=%" PRIu64, bus.next[0]);
    for (uint32_t k = 1; k < bus.partitions; k++) printf(",%" PRIu64, bus.next[k]);
    printf("\n");
    free(events);
    tw_bus_close(&bus);
    return 0;
}
