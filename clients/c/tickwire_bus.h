/*
 * tickwire_bus.h: a header-only C11 reader of tickwire's shared-memory event bus.
 *
 * The appliance writes every normalized event into a file in shared memory (`[bus] path` in
 * tickwire.toml, for example /run/tickwire/tickwire.bus); any number of processes map it read-only and
 * read at their own pace. This header follows the file's layout as
 * crates/tickwire-bus/src/layout.rs gives it byte by byte, and the read protocol of
 * crates/tickwire-bus/src/ring.rs (validate-after-read against the writer's claim word), so that
 * a C reader sees exactly what the Rust reader sees: the same events, the same overrun counts.
 *
 * Partitions (layout version 3): an appliance with several decoder threads writes one ring per
 * decoder, each with its own claim and cursor. tw_bus_read merges them as the Rust reader does:
 * each read takes one partition's next events (batch.partition says which), the partitions in
 * turn from the one after the last read's. Every instrument is in one partition, so its events
 * come in order; a reader lapped on one partition is told how many it lost there
 * (batch.missed, batch.partition) and reads the others on.
 *
 * Use:
 *
 *     #include "tickwire_bus.h"
 *
 *     tw_bus bus;
 *     if (tw_bus_open(&bus, "/run/tickwire/tickwire.bus", TW_START_LATEST) != TW_OK) {
 *         fprintf(stderr, "%s\n", tw_bus_error(&bus));   // says what is wrong, naming the file
 *         return 1;
 *     }
 *     tw_event events[256];
 *     for (;;) {
 *         tw_batch batch;
 *         int status = tw_bus_read(&bus, events, 256, &batch);
 *         if (status != TW_OK) { fprintf(stderr, "%s\n", tw_bus_error(&bus)); break; }
 *         if (batch.missed > 0) {
 *             // Lapped: batch.missed events are gone for good. Every book is invalid: clear them
 *             // and ask for snapshots (tw_request_snapshot).
 *         }
 *         for (size_t i = 0; i < batch.count; i++) {
 *             switch ((tw_kind)events[i].header.kind) { case TW_KIND_QUOTE: ... }
 *         }
 *         if (batch.count == 0 && batch.missed == 0) {
 *             // Idle: sleep or yield, and now and then check tw_bus_is_closed (the appliance
 *             // stopped) and tw_bus_replaced (a restarted appliance made a new bus at the path:
 *             // tw_bus_close, then tw_bus_open again; its epoch differs).
 *         }
 *     }
 *     tw_bus_close(&bus);
 *
 * Every function returns a TW_OK or a negative tw_status; on an error tw_bus_error() gives a
 * sentence naming the file and what would fix it (no bus at the path, not a bus, layout version
 * N where this header reads 3, damaged sizes, truncated...). Nothing here allocates, and
 * tw_bus_read makes no system call. A tw_bus is used by one thread at a time; open one per
 * thread to read from several.
 *
 * Whose file: tw_bus_open reads a bus only from an owner it trusts (checked with fstat on the
 * descriptor it maps): root, this process's user, or the owner of the directory the path names
 * when no one else may write there (/run/tickwire under systemd, owned by the appliance's user).
 * In a directory any user may write (/dev/shm), another user could make the bus's path first
 * and serve a forged feed: name the appliance's user with tw_bus_open_owned(&bus, path, start,
 * uid). A file of anyone else is refused with TW_ERR_UNTRUSTED_OWNER, naming its owner; a FIFO
 * or anything else not a regular file with TW_ERR_NOT_A_BUS (the open does not block on it).
 *
 * Books: keep them by (venue_id, instrument_id) as the bus's rules say (SnapshotBegin clears and
 * starts one, BookLevel sets a level of a book that has seen SnapshotBegin, SnapshotEnd makes it
 * valid, Gap invalidates it, or every book of the venue for instrument 0xFFFFFFFF; after an
 * overrun every book is invalid), and rebuild them with tw_request_snapshot.
 *
 * Truncation and SIGBUS: a mapped page past the end of a file that was truncated under the
 * reader (its owner or root did it; readers cannot) raises SIGBUS when touched, which kills a C
 * program that does not handle it. The Rust reader (tickwire_bus::BusReader) installs a SIGBUS
 * handler that maps a page of zeros over the faulting page of a registered bus mapping and
 * reports ReadError::Truncated instead (crates/tickwire-bus/src/sigbus.rs says why that is sound:
 * a mapping is unmapped only once no handler holds it, and the handler makes the mmap system
 * call itself). This header does not install a signal handler behind the
 * program's back: call tw_bus_check_size() (one fstat) when idle, or before each batch if a
 * truncation must never kill the process outside a tiny window between the check and the copy;
 * a program that must be immune handles SIGBUS itself (sigaction with SA_SIGINFO, checking
 * si_addr against bus->base .. bus->base + bus->len).
 *
 * Memory ordering (ring.rs gives the whole argument): the reader loads the cursor with ACQUIRE,
 * copies slots with RELAXED 8-byte atomic loads, issues an ACQUIRE fence, then loads the claim;
 * any copied position the writer may have begun to overwrite (position + capacity < claim) is
 * thrown away and counted as missed. Little-endian targets only (every target tickwire builds
 * for), checked at compile time.
 */
#ifndef TICKWIRE_BUS_H
#define TICKWIRE_BUS_H

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pwd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tickwire_bus.h: the bus file is little-endian; this target is not"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The file's layout (layout.rs) ---------------------------------------------------------- */

#define TW_MAGIC "TICKWBUS"
/* Version 2 added TW_KIND_LIQUIDATION, version 3 partitions (one ring per decoder); a reader of
 * another version refuses the bus by name. */
#define TW_LAYOUT_VERSION 3u
#define TW_MAX_PARTITIONS 31u
#define TW_EVENT_SIZE 64u
#define TW_HEADER_BYTES 4096u
#define TW_DIRECTORY_ENTRY_BYTES 256u
#define TW_MIN_CAPACITY 1024u
#define TW_MAX_CAPACITY (1ull << 28)
#define TW_MAX_DIRECTORY (1ull << 20)

/* Byte offsets of the header's fields. */
#define TW_OFF_MAGIC 0
#define TW_OFF_LAYOUT_VERSION 8
#define TW_OFF_EVENT_SIZE 12
#define TW_OFF_CAPACITY 16
#define TW_OFF_EPOCH 24
#define TW_OFF_RING_OFFSET 32
#define TW_OFF_DIRECTORY_OFFSET 40
#define TW_OFF_DIRECTORY_CAPACITY 48
#define TW_OFF_DIRECTORY_ENTRY_SIZE 56
#define TW_OFF_CREATED_NS 64
#define TW_OFF_WRITER_PID 72
#define TW_OFF_PARTITIONS 80
/* Partition k's claim and cursor: TW_OFF_CLAIM + TW_PARTITION_STRIDE * k, and the same for the
 * cursor. */
#define TW_OFF_CLAIM 128
#define TW_OFF_CURSOR 136
#define TW_PARTITION_STRIDE 128
#define TW_OFF_DIRECTORY_COUNT 192
#define TW_OFF_STATE 200

/* The header's state word. */
#define TW_BUS_LIVE 1u
#define TW_BUS_CLOSED 2u

/* A directory entry's fields and their lengths. */
#define TW_ENTRY_INSTRUMENT_ID 0
#define TW_ENTRY_VENUE_ID 4
#define TW_ENTRY_VENUE 16
#define TW_ENTRY_VENUE_LEN 32
#define TW_ENTRY_SYMBOL 48
#define TW_ENTRY_SYMBOL_LEN 104
#define TW_ENTRY_VENUE_SYMBOL 152
#define TW_ENTRY_VENUE_SYMBOL_LEN 104

#define TW_REQUEST_SOCKET_SUFFIX ".requests"
/* A snapshot request's venue: every venue. */
#define TW_ALL_VENUES 0xFFFFu
/* A snapshot request's or a gap's instrument: every instrument of the venue. */
#define TW_ALL_INSTRUMENTS 0xFFFFFFFFu

/* ---- Events (crates/tickwire-bus/src/event.rs) ---------------------------------------------- */

/* Prices and sizes: signed counts of 1e-9 (tw_fixed_format writes them as exact decimals). */
typedef int64_t tw_fixed;
#define TW_FIXED_SCALE 1000000000ll
/* An optional price the venue left empty (DBN's UNDEF_PRICE). */
#define TW_NO_PRICE INT64_MAX
/* A statistic that is not a quantity. */
#define TW_NO_QUANTITY INT64_MAX

typedef enum tw_kind {
    TW_KIND_QUOTE = 1,
    TW_KIND_TRADE = 2,
    TW_KIND_BOOK_LEVEL = 3,
    TW_KIND_SNAPSHOT_BEGIN = 4,
    TW_KIND_SNAPSHOT_END = 5,
    TW_KIND_GAP = 6,
    TW_KIND_VENUE_STATUS = 7,
    TW_KIND_REFERENCE = 8,
    TW_KIND_BAR = 9,
    TW_KIND_TRADING_STATUS = 10,
    TW_KIND_IMBALANCE = 11,
    TW_KIND_STATISTIC = 12,
    TW_KIND_LIQUIDATION = 13, /* layout version 2 */
} tw_kind;

/* Sides (a level's side, a trade's aggressor: Bid = the buyer took liquidity). */
#define TW_SIDE_NONE 0
#define TW_SIDE_BID 1
#define TW_SIDE_ASK 2

/* Header flag bits. */
#define TW_FLAG_LAST (1u << 0)
#define TW_FLAG_SNAPSHOT (1u << 1)
#define TW_FLAG_NO_EXCHANGE_TS (1u << 2)
#define TW_FLAG_DERIVED (1u << 3)
#define TW_FLAG_BAR_INTERVAL_MASK 0x70u
#define TW_FLAG_BAR_INTERVAL_SHIFT 4
#define TW_FLAG_SATURATED (1u << 7)

/* Gap reasons, venue states, reference kinds, bar intervals (event.rs's enums). */
#define TW_GAP_UNKNOWN 0
#define TW_GAP_SEQUENCE_BREAK 1
#define TW_GAP_RECONNECT 2
#define TW_GAP_RING_OVERFLOW 3
#define TW_GAP_STALE 4
#define TW_GAP_BRIDGE_DROP 5
#define TW_GAP_BUS_OVERRUN 6
#define TW_GAP_LIMIT 7
#define TW_VENUE_UNKNOWN 0
#define TW_VENUE_CONNECTING 1
#define TW_VENUE_LIVE 2
#define TW_VENUE_STALE 3
#define TW_VENUE_RECOVERED 4
#define TW_VENUE_DISCONNECTED 5
#define TW_REFERENCE_UNKNOWN 0
#define TW_REFERENCE_MARK 1
#define TW_REFERENCE_INDEX 2
#define TW_BAR_UNKNOWN 0
#define TW_BAR_SECOND 1
#define TW_BAR_MINUTE 2
#define TW_BAR_HOUR 3
#define TW_BAR_DAY 4
#define TW_BAR_END_OF_DAY 5

typedef struct tw_event_header {
    uint64_t exchange_ts_ns; /* when the venue says it happened, ns since the Unix epoch; 0 if unknown */
    uint64_t recv_ts_ns;     /* when the appliance's network thread received it */
    uint64_t venue_seq;      /* the venue's sequence (a bar's volume), 0 if none */
    uint32_t instrument_id;
    uint16_t venue_id;
    uint8_t kind;            /* a tw_kind */
    uint8_t flags;           /* TW_FLAG_* */
} tw_event_header;

typedef struct tw_quote {
    tw_fixed bid_px, bid_sz, ask_px, ask_sz; /* an empty side has price and size 0 */
} tw_quote;

typedef struct tw_trade {
    tw_fixed price, size;
    uint64_t trade_id;
    uint8_t aggressor_side; /* TW_SIDE_* */
    uint8_t _reserved[7];
} tw_trade;

typedef struct tw_book_level {
    tw_fixed price, size; /* size 0 removes the level */
    uint8_t side;         /* TW_SIDE_BID or TW_SIDE_ASK */
    uint8_t _reserved[15];
} tw_book_level;

typedef struct tw_snapshot {
    uint32_t bid_levels, ask_levels;
    uint64_t snapshot_id;
    uint64_t _reserved[2];
} tw_snapshot;

typedef struct tw_gap {
    uint64_t expected_seq, received_seq;
    uint8_t reason; /* TW_GAP_* */
    uint8_t _reserved[15];
} tw_gap;

typedef struct tw_venue_status {
    uint8_t state; /* TW_VENUE_* */
    uint8_t _reserved[7];
    uint32_t reason_code;
    uint32_t _reserved2;
    uint64_t detail;
    uint64_t _reserved3;
} tw_venue_status;

typedef struct tw_reference {
    tw_fixed price;
    uint8_t kind; /* TW_REFERENCE_* */
    uint8_t _reserved[7];
    uint64_t _reserved2[2];
} tw_reference;

typedef struct tw_bar {
    tw_fixed open, high, low, close; /* volume: header.venue_seq; interval: header.flags */
} tw_bar;

typedef struct tw_trading_status {
    uint16_t action, reason, trading_event;
    uint8_t is_trading, is_quoting, is_short_sell_restricted; /* 'Y', 'N' or '~' */
    uint8_t _reserved[23];
} tw_trading_status;

typedef struct tw_imbalance {
    tw_fixed ref_price, cont_book_clr_price; /* TW_NO_PRICE when unused */
    uint32_t paired_qty, total_imbalance_qty;
    uint8_t side, auction_type, significant_imbalance, unpaired_side;
    uint8_t auction_status, freeze_status, num_extensions, _reserved;
} tw_imbalance;

typedef struct tw_statistic {
    tw_fixed price;    /* TW_NO_PRICE when not a price */
    int64_t quantity;  /* TW_NO_QUANTITY when not a quantity */
    uint64_t ts_ref;
    uint16_t stat_type, channel_id;
    uint8_t update_action, stat_flags;
    uint8_t _reserved[2];
} tw_statistic;

typedef struct tw_liquidation {
    tw_fixed price, size;  /* the price the position was closed at (Bybit: bankruptcy price) */
    uint8_t position_side; /* the liquidated position: TW_SIDE_BID a long, TW_SIDE_ASK a short */
    uint8_t _reserved[15]; /* the venue's time is header.exchange_ts_ns */
} tw_liquidation;

/* One event: one 64-byte cache line. Read the payload member that header.kind names. */
typedef struct tw_event {
    _Alignas(64) tw_event_header header;
    union {
        tw_quote quote;
        tw_trade trade;
        tw_book_level level;
        tw_snapshot snapshot; /* SnapshotBegin and SnapshotEnd */
        tw_gap gap;
        tw_venue_status status;
        tw_reference reference;
        tw_bar bar;
        tw_trading_status trading_status;
        tw_imbalance imbalance;
        tw_statistic statistic;
        tw_liquidation liquidation;
        uint64_t raw[4];
    };
} tw_event;

/* The layout event.rs pins (its layout_tests), pinned here too: a change fails to compile. */
_Static_assert(sizeof(tw_event_header) == 32, "event header is 32 bytes");
_Static_assert(sizeof(tw_event) == 64, "an event is 64 bytes");
_Static_assert(_Alignof(tw_event) == 64, "an event is one cache line");
_Static_assert(offsetof(tw_event_header, recv_ts_ns) == 8, "recv_ts_ns at 8");
_Static_assert(offsetof(tw_event_header, venue_seq) == 16, "venue_seq at 16");
_Static_assert(offsetof(tw_event_header, instrument_id) == 24, "instrument_id at 24");
_Static_assert(offsetof(tw_event_header, venue_id) == 28, "venue_id at 28");
_Static_assert(offsetof(tw_event_header, kind) == 30, "kind at 30");
_Static_assert(offsetof(tw_event_header, flags) == 31, "flags at 31");
_Static_assert(offsetof(tw_event, quote) == 32, "payload at 32");
_Static_assert(sizeof(tw_quote) == 32 && sizeof(tw_trade) == 32 && sizeof(tw_book_level) == 32 &&
                   sizeof(tw_snapshot) == 32 && sizeof(tw_gap) == 32 &&
                   sizeof(tw_venue_status) == 32 && sizeof(tw_reference) == 32 &&
                   sizeof(tw_bar) == 32 && sizeof(tw_trading_status) == 32 &&
                   sizeof(tw_imbalance) == 32 && sizeof(tw_statistic) == 32 &&
                   sizeof(tw_liquidation) == 32,
               "every payload is 32 bytes");
_Static_assert(offsetof(tw_trade, aggressor_side) == 24, "trade aggressor at 24");
_Static_assert(offsetof(tw_book_level, side) == 16, "level side at 16");
_Static_assert(offsetof(tw_snapshot, snapshot_id) == 8, "snapshot id at 8");
_Static_assert(offsetof(tw_gap, reason) == 16, "gap reason at 16");
_Static_assert(offsetof(tw_venue_status, reason_code) == 8, "status reason at 8");
_Static_assert(offsetof(tw_venue_status, detail) == 16, "status detail at 16");
_Static_assert(offsetof(tw_reference, kind) == 8, "reference kind at 8");
_Static_assert(offsetof(tw_bar, close) == 24, "bar close at 24");
_Static_assert(offsetof(tw_trading_status, trading_event) == 4, "trading_event at 4");
_Static_assert(offsetof(tw_trading_status, is_short_sell_restricted) == 8, "ssr at 8");
_Static_assert(offsetof(tw_imbalance, paired_qty) == 16, "paired_qty at 16");
_Static_assert(offsetof(tw_imbalance, side) == 24, "imbalance side at 24");
_Static_assert(offsetof(tw_imbalance, num_extensions) == 30, "num_extensions at 30");
_Static_assert(offsetof(tw_statistic, ts_ref) == 16, "ts_ref at 16");
_Static_assert(offsetof(tw_statistic, stat_type) == 24, "stat_type at 24");
_Static_assert(offsetof(tw_statistic, update_action) == 28, "update_action at 28");
_Static_assert(offsetof(tw_liquidation, size) == 8, "liquidation size at 8");
_Static_assert(offsetof(tw_liquidation, position_side) == 16, "position side at 16");

/* The kind's name, as event.rs's EventKind::name (the JSON lines' "type"); NULL for no kind. */
static inline const char *tw_kind_name(uint8_t kind) {
    switch (kind) {
    case TW_KIND_QUOTE: return "quote";
    case TW_KIND_TRADE: return "trade";
    case TW_KIND_BOOK_LEVEL: return "level";
    case TW_KIND_SNAPSHOT_BEGIN: return "snapshot_begin";
    case TW_KIND_SNAPSHOT_END: return "snapshot_end";
    case TW_KIND_GAP: return "gap";
    case TW_KIND_VENUE_STATUS: return "status";
    case TW_KIND_REFERENCE: return "reference";
    case TW_KIND_BAR: return "bar";
    case TW_KIND_TRADING_STATUS: return "trading_status";
    case TW_KIND_IMBALANCE: return "imbalance";
    case TW_KIND_STATISTIC: return "statistic";
    case TW_KIND_LIQUIDATION: return "liquidation";
    default: return NULL;
    }
}

/*
 * Writes the shortest exact decimal form of a fixed-point value (61234.5, -0.001, 0) into out,
 * NUL-terminated, as Fixed::write_to does; returns its length. 22 bytes always suffice.
 */
static inline size_t tw_fixed_format(tw_fixed value, char out[22]) {
    char digits[22];
    size_t cursor = sizeof digits;
    int negative = value < 0;
    /* The magnitude of INT64_MIN does not fit an int64_t; it does fit a uint64_t. */
    uint64_t magnitude = negative ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    uint64_t integer = magnitude / (uint64_t)TW_FIXED_SCALE;
    uint64_t fraction = magnitude % (uint64_t)TW_FIXED_SCALE;
    int fraction_digits = 9;
    while (fraction_digits > 0 && fraction % 10 == 0) {
        fraction /= 10;
        fraction_digits--;
    }
    for (int i = 0; i < fraction_digits; i++) {
        digits[--cursor] = (char)('0' + fraction % 10);
        fraction /= 10;
    }
    if (fraction_digits > 0) digits[--cursor] = '.';
    do {
        digits[--cursor] = (char)('0' + integer % 10);
        integer /= 10;
    } while (integer != 0);
    if (negative) digits[--cursor] = '-';
    size_t len = sizeof digits - cursor;
    memcpy(out, digits + cursor, len);
    out[len] = '\0';
    return len;
}

/* The nearest double, for display and strategies that work in floats. */
static inline double tw_fixed_to_double(tw_fixed value) {
    return (double)value / (double)TW_FIXED_SCALE;
}

/* ---- The reader ----------------------------------------------------------------------------- */

typedef enum tw_status {
    TW_OK = 0,
    TW_ERR_NOT_FOUND = -1,      /* no file at the path: no appliance made a bus there */
    TW_ERR_PERMISSION = -2,     /* not in the bus's group */
    TW_ERR_IO = -3,             /* open, fstat or mmap failed otherwise (errno in the message) */
    TW_ERR_NOT_A_BUS = -4,      /* no TICKWBUS magic */
    TW_ERR_LAYOUT_VERSION = -5, /* a bus of another layout version */
    TW_ERR_MALFORMED = -6,      /* the header's sizes do not fit the file */
    TW_ERR_CURSOR_WENT_BACK = -7, /* the cursor fell below this reader: the file was rewritten */
    TW_ERR_BAD_KIND = -8,       /* an intact slot holds no event kind: the file is damaged */
    TW_ERR_TRUNCATED = -9,      /* the file is shorter than the mapping (tw_bus_check_size) */
    TW_ERR_REQUEST = -10,       /* a snapshot request could not be sent */
    TW_ERR_UNTRUSTED_OWNER = -11, /* the file belongs to a user this reader does not trust */
} tw_status;

/*
 * Whose bus files tw_bus_open_owned accepts: TW_OWNER_TRUSTED (what tw_bus_open uses) is root,
 * this process's user, or the owner of the directory the path names when no one else may write
 * it (/run/tickwire under systemd); any other value is exactly that uid (the appliance's user,
 * for a bus in a directory others may write too, such as /dev/shm).
 */
#define TW_OWNER_TRUSTED ((uid_t)-1)

/* Where a new reader starts. */
typedef enum tw_start {
    TW_START_LATEST = 0, /* at the write cursor: only what is published from now on */
    TW_START_OLDEST = 1, /* at the oldest event the ring still holds */
} tw_start;

/* One instrument as the directory names it (names NUL-terminated, cut where the file cut them). */
typedef struct tw_directory_entry {
    uint32_t instrument_id;
    uint16_t venue_id;
    char venue[TW_ENTRY_VENUE_LEN + 1];               /* the appliance's name for the venue */
    char symbol[TW_ENTRY_SYMBOL_LEN + 1];             /* as the venue file lists it */
    char venue_symbol[TW_ENTRY_VENUE_SYMBOL_LEN + 1]; /* as the venue calls it on the wire */
} tw_directory_entry;

/* What one read returned: `missed` events of partition `partition` lost to its writer, then
 * `count` events of that partition copied. */
typedef struct tw_batch {
    uint64_t missed;
    size_t count;
    uint32_t partition;
} tw_batch;

/* An open bus. Read the fields, do not change them (except `next[k]`, to seek partition k: see
 * tw_bus_read). */
typedef struct tw_bus {
    int fd;
    const uint8_t *base; /* the read-only mapping */
    size_t len;
    uint64_t capacity;
    uint64_t epoch; /* a new value each time an appliance makes the bus */
    uint64_t directory_capacity;
    uint32_t partitions; /* one ring per decoder of the appliance */
    uint32_t turn;       /* the partition the next read looks at first */
    /* Per partition: the position of the next event this reader will read. */
    uint64_t next[TW_MAX_PARTITIONS];
    dev_t dev;      /* the file's identity, to tell when the path names another one */
    ino_t ino;
    char path[4096];
    char error[4096 + 256];
} tw_bus;

/* The message of the last error, a sentence naming the file. */
static inline const char *tw_bus_error(const tw_bus *bus) {
    return bus->error;
}

static inline int tw__fail(tw_bus *bus, int status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static inline int tw__fail(tw_bus *bus, int status, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(bus->error, sizeof bus->error, format, args);
    va_end(args);
    return status;
}

/* An 8-byte header word, loaded atomically (the header is page-aligned, so every word is). */
static inline uint64_t tw__word(const tw_bus *bus, size_t offset, int order) {
    return __atomic_load_n((const uint64_t *)(const void *)(bus->base + offset), order);
}

static inline void tw_bus_close(tw_bus *bus) {
    if (bus->base != NULL) munmap((void *)bus->base, bus->len);
    if (bus->fd >= 0) close(bus->fd);
    bus->base = NULL;
    bus->fd = -1;
}

/* "user NAME (uid N)", or "uid N" for an id with no name here. */
static inline void tw__describe_user(uid_t uid, char *out, size_t size) {
    struct passwd entry, *found = NULL;
    char buffer[4096];
    if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found != NULL &&
        entry.pw_name != NULL)
        snprintf(out, size, "user %s (uid %lu)", entry.pw_name, (unsigned long)uid);
    else
        snprintf(out, size, "uid %lu", (unsigned long)uid);
}

/*
 * Whether a bus file of `uid` at `path` is one this reader accepts (TW_OWNER_TRUSTED: see its
 * definition); the same rule as the Rust reader's Owner. On refusal, the error names the owner.
 */
static inline int tw__check_owner(tw_bus *bus, const char *path, uid_t uid, uid_t expected) {
    char owner[320], trusted[4096 + 400];
    if (expected != TW_OWNER_TRUSTED) {
        if (uid == expected) return TW_OK;
        char wanted[320];
        tw__describe_user(expected, wanted, sizeof wanted);
        snprintf(trusted, sizeof trusted, "%s only, as asked", wanted);
    } else {
        uid_t me = geteuid();
        if (uid == 0 || uid == me) return TW_OK;
        /* The directory the path names: up to its last slash. */
        char directory[4096];
        const char *slash = strrchr(path, '/');
        if (slash == NULL) {
            snprintf(directory, sizeof directory, ".");
        } else if (slash == path) {
            snprintf(directory, sizeof directory, "/");
        } else {
            snprintf(directory, sizeof directory, "%.*s", (int)(slash - path), path);
        }
        struct stat info;
        if (stat(directory, &info) == 0 && info.st_uid == uid && (info.st_mode & 022) == 0)
            return TW_OK;
        char mine[320];
        tw__describe_user(me, mine, sizeof mine);
        snprintf(trusted, sizeof trusted,
                 "root, its own %s and the owner of %s when no one else may write there", mine,
                 directory);
    }
    tw__describe_user(uid, owner, sizeof owner);
    return tw__fail(bus, TW_ERR_UNTRUSTED_OWNER,
                    "bus %s belongs to %s, whom this reader does not trust (it trusts %s): a file "
                    "another user made at the path could be a forged feed, so it is not read; if "
                    "that user runs the appliance, name it as the bus's owner (tw_bus_open_owned)",
                    path, owner, trusted);
}

/*
 * Opens and maps the bus at `path` read-only and checks its owner and its header, as the Rust
 * reader does; the file must belong to `owner` (TW_OWNER_TRUSTED or a uid: see its definition).
 * On an error the bus holds nothing to close and tw_bus_error says what is wrong.
 */
static inline int tw_bus_open_owned(tw_bus *bus, const char *path, tw_start start,
                                    uid_t owner) {
    memset(bus, 0, offsetof(tw_bus, path));
    bus->fd = -1;
    bus->error[0] = '\0';
    snprintf(bus->path, sizeof bus->path, "%s", path);
    /* O_NONBLOCK: a FIFO planted at the path must not hang the reader. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int error = errno;
        if (error == ENOENT)
            return tw__fail(bus, TW_ERR_NOT_FOUND,
                            "no bus at %s: no appliance has made one there (is it running, with "
                            "[bus] in its tickwire.toml naming this path?)",
                            path);
        if (error == EACCES || error == EPERM)
            return tw__fail(bus, TW_ERR_PERMISSION,
                            "bus %s: permission denied (%s); readers need to be in the group that "
                            "[bus] group names",
                            path, strerror(error));
        return tw__fail(bus, TW_ERR_IO, "bus %s: opening: %s", path, strerror(error));
    }
    struct stat info;
    if (fstat(fd, &info) != 0) {
        int error = errno;
        close(fd);
        return tw__fail(bus, TW_ERR_IO, "bus %s: reading its size: %s", path, strerror(error));
    }
    if (!S_ISREG(info.st_mode)) {
        close(fd);
        const char *kind = S_ISDIR(info.st_mode)    ? "a directory"
                           : S_ISFIFO(info.st_mode) ? "a FIFO"
                           : S_ISSOCK(info.st_mode) ? "a socket"
                                                    : "a device";
        return tw__fail(bus, TW_ERR_NOT_A_BUS,
                        "%s is not a tickwire bus: it is %s, not a regular file", path, kind);
    }
    /* The owner of the file opened (fstat), so the file checked is the file read. */
    if (tw__check_owner(bus, path, info.st_uid, owner) != TW_OK) {
        close(fd);
        return TW_ERR_UNTRUSTED_OWNER;
    }
    uint64_t bytes = (uint64_t)info.st_size;
    if (bytes < TW_HEADER_BYTES) {
        /* Too short for a header; say what it is when it can be told. */
        char start_bytes[8];
        ssize_t got = pread(fd, start_bytes, 8, 0);
        close(fd);
        if (got < 8 || memcmp(start_bytes, TW_MAGIC, 8) != 0)
            return tw__fail(bus, TW_ERR_NOT_A_BUS, "%s is not a tickwire bus (no TICKWBUS magic)",
                            path);
        return tw__fail(bus, TW_ERR_MALFORMED,
                        "bus %s is damaged: %llu bytes, shorter than its %u-byte header", path,
                        (unsigned long long)bytes, TW_HEADER_BYTES);
    }
    void *base = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int error = errno;
        close(fd);
        return tw__fail(bus, TW_ERR_IO, "bus %s: mapping the bus file: %s", path, strerror(error));
    }
    bus->fd = fd;
    bus->base = (const uint8_t *)base;
    bus->len = (size_t)bytes;
    bus->dev = info.st_dev;
    bus->ino = info.st_ino;
    int status = TW_OK;
    /* The identity fields are written once, before the file is renamed into place. */
    uint64_t magic = tw__word(bus, TW_OFF_MAGIC, __ATOMIC_RELAXED);
    uint64_t version_and_size = tw__word(bus, TW_OFF_LAYOUT_VERSION, __ATOMIC_RELAXED);
    uint32_t version = (uint32_t)version_and_size;
    uint32_t event_size = (uint32_t)(version_and_size >> 32);
    uint64_t capacity = tw__word(bus, TW_OFF_CAPACITY, __ATOMIC_RELAXED);
    uint64_t directory_capacity = tw__word(bus, TW_OFF_DIRECTORY_CAPACITY, __ATOMIC_RELAXED);
    uint64_t partitions = tw__word(bus, TW_OFF_PARTITIONS, __ATOMIC_RELAXED);
    uint64_t rings = partitions >= 1 && partitions <= TW_MAX_PARTITIONS ? partitions : 1;
    uint64_t directory_offset = TW_HEADER_BYTES + rings * capacity * TW_EVENT_SIZE;
    uint64_t file_bytes = directory_offset + directory_capacity * TW_DIRECTORY_ENTRY_BYTES;
    if (memcmp(&magic, TW_MAGIC, 8) != 0) {
        status = tw__fail(bus, TW_ERR_NOT_A_BUS, "%s is not a tickwire bus (no TICKWBUS magic)",
                          path);
    } else if (version != TW_LAYOUT_VERSION) {
        status = tw__fail(bus, TW_ERR_LAYOUT_VERSION,
                          "bus %s has layout version %u; this reader reads version %u (update the "
                          "reader or the appliance so that they match)",
                          path, version, TW_LAYOUT_VERSION);
    } else if (event_size != TW_EVENT_SIZE) {
        status = tw__fail(bus, TW_ERR_MALFORMED, "bus %s is damaged: event size %u, not 64", path,
                          event_size);
    } else if (capacity < TW_MIN_CAPACITY || capacity > TW_MAX_CAPACITY ||
               (capacity & (capacity - 1)) != 0) {
        status = tw__fail(bus, TW_ERR_MALFORMED,
                          "bus %s is damaged: capacity %llu: the ring holds a power of two of "
                          "events, from %u to %llu",
                          path, (unsigned long long)capacity, TW_MIN_CAPACITY,
                          (unsigned long long)TW_MAX_CAPACITY);
    } else if (partitions < 1 || partitions > TW_MAX_PARTITIONS) {
        status = tw__fail(bus, TW_ERR_MALFORMED,
                          "bus %s is damaged: %llu partitions: a bus has from 1 to %u (one per "
                          "decoder)",
                          path, (unsigned long long)partitions, TW_MAX_PARTITIONS);
    } else if (directory_capacity < 1 || directory_capacity > TW_MAX_DIRECTORY) {
        status = tw__fail(bus, TW_ERR_MALFORMED,
                          "bus %s is damaged: directory capacity %llu: from 1 to %llu entries",
                          path, (unsigned long long)directory_capacity,
                          (unsigned long long)TW_MAX_DIRECTORY);
    } else if (tw__word(bus, TW_OFF_RING_OFFSET, __ATOMIC_RELAXED) != TW_HEADER_BYTES ||
               tw__word(bus, TW_OFF_DIRECTORY_OFFSET, __ATOMIC_RELAXED) != directory_offset ||
               tw__word(bus, TW_OFF_DIRECTORY_ENTRY_SIZE, __ATOMIC_RELAXED) !=
                   TW_DIRECTORY_ENTRY_BYTES) {
        status = tw__fail(bus, TW_ERR_MALFORMED,
                          "bus %s is damaged: its region offsets do not follow from its capacity",
                          path);
    } else if (bytes < file_bytes) {
        status = tw__fail(bus, TW_ERR_MALFORMED,
                          "bus %s is damaged: %llu bytes, shorter than the %llu its header "
                          "describes",
                          path, (unsigned long long)bytes, (unsigned long long)file_bytes);
    }
    if (status != TW_OK) {
        tw_bus_close(bus);
        return status;
    }
    bus->capacity = capacity;
    bus->directory_capacity = directory_capacity;
    bus->epoch = tw__word(bus, TW_OFF_EPOCH, __ATOMIC_RELAXED);
    bus->partitions = (uint32_t)partitions;
    bus->turn = 0;
    for (uint32_t k = 0; k < TW_MAX_PARTITIONS; k++) bus->next[k] = 0;
    for (uint32_t k = 0; k < bus->partitions; k++) {
        uint64_t cursor =
            tw__word(bus, TW_OFF_CURSOR + TW_PARTITION_STRIDE * k, __ATOMIC_ACQUIRE);
        /* Oldest: the oldest slot the writer has not claimed for reuse (the claim runs a little
         * ahead of the cursor), as the Rust reader starts. */
        uint64_t claim = tw__word(bus, TW_OFF_CLAIM + TW_PARTITION_STRIDE * k, __ATOMIC_ACQUIRE);
        uint64_t oldest = claim > capacity ? claim - capacity : 0;
        if (cursor > capacity && cursor - capacity > oldest) {
            oldest = cursor - capacity;
        }
        bus->next[k] = start == TW_START_OLDEST ? oldest : cursor;
    }
    return TW_OK;
}

/*
 * Opens and maps the bus at `path` read-only and checks its owner (TW_OWNER_TRUSTED) and its
 * header, as the Rust reader does. On an error the bus holds nothing to close and tw_bus_error
 * says what is wrong.
 */
static inline int tw_bus_open(tw_bus *bus, const char *path, tw_start start) {
    return tw_bus_open_owned(bus, path, start, TW_OWNER_TRUSTED);
}

/* Partition k's write cursor: events published there since the bus was made. */
static inline uint64_t tw_bus_partition_cursor(const tw_bus *bus, uint32_t k) {
    if (k >= bus->partitions) return 0;
    return tw__word(bus, TW_OFF_CURSOR + TW_PARTITION_STRIDE * k, __ATOMIC_ACQUIRE);
}

/* The write cursors together: events published since the bus was made. */
static inline uint64_t tw_bus_cursor(const tw_bus *bus) {
    uint64_t sum = 0;
    for (uint32_t k = 0; k < bus->partitions; k++) sum += tw_bus_partition_cursor(bus, k);
    return sum;
}

/* Events published that this reader has not read, every partition together (above the
 * capacity: it is lapped). */
static inline uint64_t tw_bus_lag(const tw_bus *bus) {
    uint64_t lag = 0;
    for (uint32_t k = 0; k < bus->partitions; k++) {
        uint64_t cursor = tw_bus_partition_cursor(bus, k);
        lag += cursor > bus->next[k] ? cursor - bus->next[k] : 0;
    }
    return lag;
}

/* One partition's read: ring.rs's RingReader::read, step for step. */
static inline int tw__read_partition(tw_bus *bus, uint32_t k, tw_event *out, size_t max,
                                     tw_batch *batch) {
    batch->missed = 0;
    batch->count = 0;
    batch->partition = k;
    uint64_t next = bus->next[k];
    uint64_t cursor = tw_bus_partition_cursor(bus, k);
    if (cursor == next || max == 0) return TW_OK;
    if (cursor < next)
        return tw__fail(bus, TW_ERR_CURSOR_WENT_BACK,
                        "bus %s is damaged: the cursor %llu of partition %u is below this "
                        "reader's position %llu (the file was replaced or rewritten)",
                        bus->path, (unsigned long long)cursor, k, (unsigned long long)next);
    uint64_t capacity = bus->capacity;
    /* Positions more than a ring behind the cursor are gone already. */
    uint64_t oldest_kept = cursor > capacity ? cursor - capacity : 0;
    uint64_t start = next > oldest_kept ? next : oldest_kept;
    uint64_t available = cursor - start;
    size_t copied = available < (uint64_t)max ? (size_t)available : max;
    const uint64_t *ring = (const uint64_t *)(const void *)(bus->base + TW_HEADER_BYTES +
                                                            k * capacity * TW_EVENT_SIZE);
    for (size_t i = 0; i < copied; i++) {
        const uint64_t *slot = ring + ((start + i) & (capacity - 1)) * 8;
        uint64_t *words = (uint64_t *)(void *)&out[i];
        for (int w = 0; w < 8; w++) words[w] = __atomic_load_n(&slot[w], __ATOMIC_RELAXED);
    }
    /* Orders the slot loads before the claim load (argument 2 in ring.rs's module doc). */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t claim = tw__word(bus, TW_OFF_CLAIM + TW_PARTITION_STRIDE * k, __ATOMIC_RELAXED);
    /* The oldest position whose slot the writer has not started to reuse. */
    uint64_t oldest_intact = claim > capacity ? claim - capacity : 0;
    uint64_t end = start + copied;
    if (oldest_intact >= end) {
        /* Everything copied may be torn: skip to what is intact and report the loss. */
        batch->missed = oldest_intact - next;
        bus->next[k] = oldest_intact;
        return TW_OK;
    }
    uint64_t first = oldest_intact > start ? oldest_intact : start;
    size_t skip = (size_t)(first - start);
    size_t kept = copied - skip;
    if (skip > 0) memmove(out, out + skip, kept * sizeof *out);
    for (size_t i = 0; i < kept; i++) {
        if (tw_kind_name(out[i].header.kind) == NULL)
            return tw__fail(bus, TW_ERR_BAD_KIND,
                            "bus %s is damaged: the event at position %llu of partition %u has "
                            "kind byte %u, which no writer writes",
                            bus->path, (unsigned long long)(first + i), k, out[i].header.kind);
    }
    batch->missed = first - next;
    batch->count = kept;
    bus->next[k] = end;
    return TW_OK;
}

/*
 * Copies up to `max` events of one partition into `out`, oldest first, after reporting in
 * batch->missed any that partition's writer lapped this reader by (batch->partition says which
 * partition); never blocks, makes no system call. Takes the partitions in turn, from the one
 * after the last read's, and returns the first that has something: the merge of BusReader::read.
 * Set bus->next[k] before a read to start partition k elsewhere (a position that is gone is
 * then reported as missed).
 */
static inline int tw_bus_read(tw_bus *bus, tw_event *out, size_t max, tw_batch *batch) {
    batch->missed = 0;
    batch->count = 0;
    batch->partition = 0;
    for (uint32_t step = 0; step < bus->partitions; step++) {
        uint32_t k = (bus->turn + step) % bus->partitions;
        int status = tw__read_partition(bus, k, out, max, batch);
        if (status != TW_OK || batch->count > 0 || batch->missed > 0) {
            bus->turn = (k + 1) % bus->partitions;
            return status;
        }
    }
    batch->partition = 0;
    return TW_OK;
}

/* Whether the appliance stopped cleanly: nothing more will be written to this file. */
static inline int tw_bus_is_closed(const tw_bus *bus) {
    return tw__word(bus, TW_OFF_STATE, __ATOMIC_ACQUIRE) == TW_BUS_CLOSED;
}

/*
 * Whether the path now names another file (a restarted appliance made a new bus: open it again)
 * or none (it was removed). A stat: call it when idle, not per read.
 */
static inline int tw_bus_replaced(const tw_bus *bus) {
    struct stat info;
    if (stat(bus->path, &info) != 0) return 1;
    return info.st_dev != bus->dev || info.st_ino != bus->ino;
}

/*
 * TW_OK while the file still holds the whole mapping, TW_ERR_TRUNCATED (with a message) once it
 * was cut short, after which touching the mapping may raise SIGBUS. One fstat.
 */
static inline int tw_bus_check_size(tw_bus *bus) {
    struct stat info;
    if (fstat(bus->fd, &info) != 0)
        return tw__fail(bus, TW_ERR_IO, "bus %s: reading its size: %s", bus->path,
                        strerror(errno));
    if ((uint64_t)info.st_size < (uint64_t)bus->len)
        return tw__fail(bus, TW_ERR_TRUNCATED,
                        "bus %s was truncated under this reader (%llu bytes, %llu mapped); open it "
                        "again once an appliance has made a new one",
                        bus->path, (unsigned long long)info.st_size, (unsigned long long)bus->len);
    return TW_OK;
}

/* Directory entries published so far. */
static inline uint64_t tw_bus_directory_len(const tw_bus *bus) {
    uint64_t count = tw__word(bus, TW_OFF_DIRECTORY_COUNT, __ATOMIC_ACQUIRE);
    return count < bus->directory_capacity ? count : bus->directory_capacity;
}

/* Copies a NUL-padded field up to its first NUL and terminates it. */
static inline void tw__text(char *out, const uint8_t *field, size_t len) {
    size_t end = 0;
    while (end < len && field[end] != 0) end++;
    memcpy(out, field, end);
    out[end] = '\0';
}

/*
 * Entry `index` (below tw_bus_directory_len: entries below the count never change). Returns 0,
 * or -1 for an index not published yet.
 */
static inline int tw_bus_directory_entry(const tw_bus *bus, uint64_t index,
                                         tw_directory_entry *out) {
    if (index >= tw_bus_directory_len(bus)) return -1;
    const uint64_t *words =
        (const uint64_t *)(const void *)(bus->base + TW_HEADER_BYTES +
                                         bus->partitions * bus->capacity * TW_EVENT_SIZE +
                                         index * TW_DIRECTORY_ENTRY_BYTES);
    uint8_t bytes[TW_DIRECTORY_ENTRY_BYTES];
    for (int w = 0; w < (int)(TW_DIRECTORY_ENTRY_BYTES / 8); w++) {
        uint64_t value = __atomic_load_n(&words[w], __ATOMIC_RELAXED);
        memcpy(bytes + 8 * w, &value, 8);
    }
    memcpy(&out->instrument_id, bytes + TW_ENTRY_INSTRUMENT_ID, 4);
    memcpy(&out->venue_id, bytes + TW_ENTRY_VENUE_ID, 2);
    tw__text(out->venue, bytes + TW_ENTRY_VENUE, TW_ENTRY_VENUE_LEN);
    tw__text(out->symbol, bytes + TW_ENTRY_SYMBOL, TW_ENTRY_SYMBOL_LEN);
    tw__text(out->venue_symbol, bytes + TW_ENTRY_VENUE_SYMBOL, TW_ENTRY_VENUE_SYMBOL_LEN);
    return 0;
}

/*
 * The entry that names (venue_id, instrument_id): the latest one, as a later entry holds.
 * Returns 0, or -1 when the directory does not name it. A scan: cache what it finds.
 */
static inline int tw_bus_find_instrument(const tw_bus *bus, uint16_t venue_id,
                                         uint32_t instrument_id, tw_directory_entry *out) {
    for (uint64_t index = tw_bus_directory_len(bus); index-- > 0;) {
        tw_directory_entry entry;
        if (tw_bus_directory_entry(bus, index, &entry) != 0) continue;
        if (entry.venue_id == venue_id && entry.instrument_id == instrument_id) {
            *out = entry;
            return 0;
        }
    }
    return -1;
}

/* The 16 bytes of a snapshot request (layout.rs's SnapshotRequest). */
static inline void tw_snapshot_request_bytes(uint16_t venue_id, uint32_t instrument_id,
                                             uint8_t out[16]) {
    uint16_t version = (uint16_t)TW_LAYOUT_VERSION, kind = 1, reserved = 0;
    memcpy(out, "TWRQ", 4);
    memcpy(out + 4, &version, 2);
    memcpy(out + 6, &kind, 2);
    memcpy(out + 8, &venue_id, 2);
    memcpy(out + 10, &reserved, 2);
    memcpy(out + 12, &instrument_id, 4);
}

/*
 * Asks the appliance for book snapshots of (venue_id, instrument_id) (TW_ALL_VENUES,
 * TW_ALL_INSTRUMENTS for every one): a datagram to the Unix socket at the bus path plus
 * ".requests". The books come back in the stream, for every reader; an instrument gets at most one
 * snapshot per the appliance's snapshot interval (extra requests are dropped and counted).
 */
static inline int tw_request_snapshot(tw_bus *bus, uint16_t venue_id, uint32_t instrument_id) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    int written = snprintf(address.sun_path, sizeof address.sun_path, "%s%s", bus->path,
                           TW_REQUEST_SOCKET_SUFFIX);
    if (written < 0 || (size_t)written >= sizeof address.sun_path)
        return tw__fail(bus, TW_ERR_REQUEST,
                        "bus %s: the request socket's path is longer than a Unix socket's %zu "
                        "bytes",
                        bus->path, sizeof address.sun_path - 1);
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return tw__fail(bus, TW_ERR_REQUEST, "bus %s: making a socket: %s", bus->path,
                        strerror(errno));
    uint8_t request[16];
    tw_snapshot_request_bytes(venue_id, instrument_id, request);
    ssize_t sent = sendto(sock, request, sizeof request, MSG_DONTWAIT,
                          (const struct sockaddr *)&address, sizeof address);
    int error = errno;
    close(sock);
    if (sent != (ssize_t)sizeof request)
        return tw__fail(bus, TW_ERR_REQUEST,
                        "bus %s: sending a snapshot request to %s: %s (is the appliance running "
                        "with this bus?)",
                        bus->path, address.sun_path, sent < 0 ? strerror(error) : "short write");
    return TW_OK;
}

#ifdef __cplusplus
}
#endif

#endif /* TICKWIRE_BUS_H */
