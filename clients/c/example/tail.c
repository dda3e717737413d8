/*
 * tail: prints every event of a tickwire bus as a JSON line, in the format of `tickwire decode`
 * (crates/tickwire-bus/src/event/json.rs): the type, the venue and symbol named by the bus's
 * directory, prices and sizes as exact decimals from their 1e-9 fixed point.
 *
 *     cc -std=c11 -O2 -I clients/c -o tail clients/c/example/tail.c
 *     ./tail [--oldest] [--until-closed] /run/tickwire/tickwire.bus
 *
 * It follows the appliance across restarts, as `tickwire tail` does: when the appliance stops
 * cleanly (the bus is closed and every event read) it says so and waits; when a restarted
 * appliance makes a new bus at the path, it reads that one from its oldest event (the new
 * epoch). It runs until killed; with --until-closed it ends (status 0) once the bus is closed
 * and read to its end. Overruns, a closed bus and restarts are reported on stderr. An event the directory does not name gets the venue name of another entry
 * of its venue (else "venue-<id>") and the symbol "*" for a connection-wide event (instrument 0
 * or 0xFFFFFFFF), else the instrument id.
 */
#define _POSIX_C_SOURCE 200809L
#include "tickwire_bus.h"

#include <stdlib.h>
#include <time.h>

/* The directory, copied whenever it grows (entries never change once published). */
typedef struct directory {
    tw_directory_entry *entries;
    uint64_t len;
} directory;

static void refresh(directory *dir, const tw_bus *bus) {
    uint64_t len = tw_bus_directory_len(bus);
    if (len == dir->len) return;
    tw_directory_entry *grown = realloc(dir->entries, (size_t)len * sizeof *grown);
    if (grown == NULL) return;
    dir->entries = grown;
    for (uint64_t index = dir->len; index < len; index++)
        tw_bus_directory_entry(bus, index, &dir->entries[index]);
    dir->len = len;
}

static void names(const directory *dir, const tw_event_header *header, const char **venue,
                  const char **symbol, char fallback_venue[32], char fallback_symbol[16]) {
    *venue = NULL;
    *symbol = NULL;
    /* A later entry for the same instrument holds: search from the end. */
    for (uint64_t index = dir->len; index-- > 0;) {
        const tw_directory_entry *entry = &dir->entries[index];
        if (entry->venue_id != header->venue_id) continue;
        if (*venue == NULL) *venue = entry->venue;
        if (entry->instrument_id == header->instrument_id) {
            *venue = entry->venue;
            *symbol = entry->symbol;
            return;
        }
    }
    if (*venue == NULL) {
        snprintf(fallback_venue, 32, "venue-%u", (unsigned)header->venue_id);
        *venue = fallback_venue;
    }
    if (header->instrument_id == 0 || header->instrument_id == TW_ALL_INSTRUMENTS) {
        *symbol = "*";
    } else {
        snprintf(fallback_symbol, 16, "%u", (unsigned)header->instrument_id);
        *symbol = fallback_symbol;
    }
}

static void string(const char *key, const char *value, size_t len) {
    printf(",\"%s\":\"", key);
    for (size_t i = 0; i < len; i++) {
        unsigned char byte = (unsigned char)value[i];
        if (byte == '"')
            fputs("\\\"", stdout);
        else if (byte == '\\')
            fputs("\\\\", stdout);
        else if (byte < 0x20)
            printf("\\u%04x", byte);
        else
            putchar(byte);
    }
    putchar('"');
}

static void text(const char *key, const char *value) { string(key, value, strlen(value)); }

static void character(const char *key, uint8_t value) {
    char byte = (char)value;
    string(key, &byte, 1);
}

static void number(const char *key, uint64_t value) {
    printf(",\"%s\":%llu", key, (unsigned long long)value);
}

static void decimal(const char *key, tw_fixed value) {
    char digits[22];
    tw_fixed_format(value, digits);
    printf(",\"%s\":\"%s\"", key, digits);
}

static void price(const char *key, tw_fixed value) {
    if (value == TW_NO_PRICE)
        printf(",\"%s\":null", key);
    else
        decimal(key, value);
}

static void saturated(uint8_t flags) {
    if (flags & TW_FLAG_SATURATED) fputs(",\"saturated\":true", stdout);
}

static const char *side_name(uint8_t side) {
    return side == TW_SIDE_BID ? "bid" : side == TW_SIDE_ASK ? "ask" : "none";
}

static const char *gap_reason(uint8_t reason) {
    switch (reason) {
    case TW_GAP_SEQUENCE_BREAK: return "SequenceBreak";
    case TW_GAP_RECONNECT: return "Reconnect";
    case TW_GAP_RING_OVERFLOW: return "RingOverflow";
    case TW_GAP_STALE: return "Stale";
    case TW_GAP_BRIDGE_DROP: return "BridgeDrop";
    case TW_GAP_BUS_OVERRUN: return "BusOverrun";
    case TW_GAP_LIMIT: return "Limit";
    default: return "Unknown";
    }
}

static const char *venue_state(uint8_t state) {
    switch (state) {
    case TW_VENUE_CONNECTING: return "Connecting";
    case TW_VENUE_LIVE: return "Live";
    case TW_VENUE_STALE: return "Stale";
    case TW_VENUE_RECOVERED: return "Recovered";
    case TW_VENUE_DISCONNECTED: return "Disconnected";
    default: return "Unknown";
    }
}

static const char *reference_kind(uint8_t kind) {
    return kind == TW_REFERENCE_MARK ? "mark" : kind == TW_REFERENCE_INDEX ? "index" : "unknown";
}

static const char *bar_interval(uint8_t flags) {
    switch ((flags & TW_FLAG_BAR_INTERVAL_MASK) >> TW_FLAG_BAR_INTERVAL_SHIFT) {
    case TW_BAR_SECOND: return "1s";
    case TW_BAR_MINUTE: return "1m";
    case TW_BAR_HOUR: return "1h";
    case TW_BAR_DAY: return "1d";
    case TW_BAR_END_OF_DAY: return "eod";
    default: return "unknown";
    }
}

static void print_event(const directory *dir, const tw_event *event) {
    const tw_event_header *h = &event->header;
    const char *venue, *symbol;
    char fallback_venue[32], fallback_symbol[16];
    names(dir, h, &venue, &symbol, fallback_venue, fallback_symbol);
    const char *type = h->kind == TW_KIND_REFERENCE ? reference_kind(event->reference.kind)
                                                    : tw_kind_name(h->kind);
    printf("{\"type\":\"%s\"", type);
    text("venue", venue);
    text("symbol", symbol);
    /* Every kind has its case; tw_bus_read refuses an event of no kind. */
    switch ((tw_kind)h->kind) {
    case TW_KIND_QUOTE:
        number("seq", h->venue_seq);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        decimal("bid_px", event->quote.bid_px);
        decimal("bid_qty", event->quote.bid_sz);
        decimal("ask_px", event->quote.ask_px);
        decimal("ask_qty", event->quote.ask_sz);
        if (h->flags & TW_FLAG_DERIVED) text("source", "book");
        saturated(h->flags);
        break;
    case TW_KIND_TRADE: {
        uint8_t side = event->trade.aggressor_side;
        number("trade_id", event->trade.trade_id);
        decimal("px", event->trade.price);
        decimal("qty", event->trade.size);
        text("aggressor",
             side == TW_SIDE_BID ? "buy" : side == TW_SIDE_ASK ? "sell" : "unknown");
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    }
    case TW_KIND_BOOK_LEVEL:
        text("side", side_name(event->level.side));
        decimal("px", event->level.price);
        decimal("qty", event->level.size);
        number("seq", h->venue_seq);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        saturated(h->flags);
        break;
    case TW_KIND_SNAPSHOT_BEGIN:
    case TW_KIND_SNAPSHOT_END:
        number("seq", h->venue_seq);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_GAP:
        text("reason", gap_reason(event->gap.reason));
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_VENUE_STATUS:
        text("state", venue_state(event->status.state));
        number("reason_code", event->status.reason_code);
        number("detail", event->status.detail);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_REFERENCE:
        decimal("px", event->reference.price);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_BAR:
        text("interval", bar_interval(h->flags));
        decimal("open", event->bar.open);
        decimal("high", event->bar.high);
        decimal("low", event->bar.low);
        decimal("close", event->bar.close);
        number("volume", h->venue_seq);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_TRADING_STATUS:
        number("action", event->trading_status.action);
        number("reason", event->trading_status.reason);
        number("trading_event", event->trading_status.trading_event);
        character("is_trading", event->trading_status.is_trading);
        character("is_quoting", event->trading_status.is_quoting);
        character("is_short_sell_restricted", event->trading_status.is_short_sell_restricted);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    case TW_KIND_IMBALANCE: {
        const tw_imbalance *im = &event->imbalance;
        price("ref_px", im->ref_price);
        price("cont_book_clr_px", im->cont_book_clr_price);
        number("paired_qty", im->paired_qty);
        number("total_imbalance_qty", im->total_imbalance_qty);
        text("side", side_name(im->side));
        character("auction_type", im->auction_type);
        character("significant_imbalance", im->significant_imbalance);
        text("unpaired_side", side_name(im->unpaired_side));
        number("auction_status", im->auction_status);
        number("freeze_status", im->freeze_status);
        number("num_extensions", im->num_extensions);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    }
    case TW_KIND_STATISTIC: {
        const tw_statistic *st = &event->statistic;
        number("stat_type", st->stat_type);
        price("px", st->price);
        if (st->quantity == TW_NO_QUANTITY)
            fputs(",\"qty\":null", stdout);
        else
            printf(",\"qty\":%lld", (long long)st->quantity);
        number("ts_ref_ns", st->ts_ref);
        number("update_action", st->update_action);
        number("stat_flags", st->stat_flags);
        number("channel_id", st->channel_id);
        number("seq", h->venue_seq);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    }
    case TW_KIND_LIQUIDATION: {
        uint8_t side = event->liquidation.position_side;
        text("position",
             side == TW_SIDE_BID ? "long" : side == TW_SIDE_ASK ? "short" : "unknown");
        decimal("px", event->liquidation.price);
        decimal("qty", event->liquidation.size);
        number("exch_ts_ns", h->exchange_ts_ns);
        number("recv_ts_ns", h->recv_ts_ns);
        break;
    }
    }
    fputs("}\n", stdout);
}

int main(int argc, char **argv) {
    tw_start start = TW_START_LATEST;
    const char *path = NULL;
    int until_closed = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--oldest") == 0)
            start = TW_START_OLDEST;
        else if (strcmp(argv[i], "--until-closed") == 0)
            until_closed = 1;
        else
            path = argv[i];
    }
    if (path == NULL) {
        fprintf(stderr, "usage: tail [--oldest] [--until-closed] BUS_PATH\n");
        return 2;
    }
    tw_bus bus;
    if (tw_bus_open(&bus, path, start) != TW_OK) {
        fprintf(stderr, "tail: %s\n", tw_bus_error(&bus));
        return 1;
    }
    directory dir = {NULL, 0};
    static tw_event events[256];
    /* The closed bus was reported: said once, then waited out until a new bus replaces it. */
    int said_closed = 0;
    for (;;) {
        tw_batch batch;
        if (tw_bus_read(&bus, events, 256, &batch) != TW_OK) {
            fprintf(stderr, "tail: %s\n", tw_bus_error(&bus));
            return 1;
        }
        if (batch.missed > 0)
            fprintf(stderr, "tail: overrun: %llu events missed (partition %u)\n",
                    (unsigned long long)batch.missed, (unsigned)batch.partition);
        if (batch.count > 0) {
            refresh(&dir, &bus);
            for (size_t i = 0; i < batch.count; i++) print_event(&dir, &events[i]);
            continue;
        }
        if (batch.missed > 0) continue;
        /* Idle: has the appliance stopped, or been replaced? */
        fflush(stdout);
        if (tw_bus_replaced(&bus)) {
            tw_bus_close(&bus);
            dir.len = 0;
            /* Wait for the new file (bounded by nothing: tail follows until killed). */
            while (tw_bus_open(&bus, path, TW_START_OLDEST) != TW_OK) {
                struct timespec pause = {0, 100 * 1000 * 1000};
                nanosleep(&pause, NULL);
            }
            fprintf(stderr, "tail: a new bus at %s (epoch %llu)\n", path,
                    (unsigned long long)bus.epoch);
            said_closed = 0;
            continue;
        }
        if (tw_bus_is_closed(&bus) && tw_bus_lag(&bus) == 0) {
            if (until_closed) {
                fprintf(stderr, "tail: the appliance closed the bus\n");
                break;
            }
            if (!said_closed) {
                fprintf(stderr, "tail: the appliance closed the bus; waiting for its next one\n");
                said_closed = 1;
            }
            /* A clean stop: nothing more comes from this file; poll for its replacement. */
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        if (tw_bus_check_size(&bus) != TW_OK) {
            fprintf(stderr, "tail: %s\n", tw_bus_error(&bus));
            return 1;
        }
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    tw_bus_close(&bus);
    free(dir.entries);
    return 0;
}
