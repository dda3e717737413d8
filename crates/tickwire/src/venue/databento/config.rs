//! `[databento]`, a Databento venue file's own table (`FileRules::table`): what its gateway
//! sessions ask for, read from the raw table the config keeps (`VenueConfig::table`) and checked
//! here (`Protocol::check_table`), with its own errors naming each key.

use crate::config::{read_venue_table, LifecycleConfig, VenueConfig};
use crate::venue::protocol::TableCheck;
use serde::Deserialize;

/// The table's name in the venue file.
pub const TABLE: &str = "databento";

/// DBN schemas a Databento venue can list in `channels`.
pub const DATABENTO_SCHEMAS: [&str; 20] = [
    "mbo",
    "mbp-1",
    "mbp-10",
    "tbbo",
    "trades",
    "bbo-1s",
    "bbo-1m",
    "cbbo-1s",
    "cbbo-1m",
    "cmbp-1",
    "tcbbo",
    "ohlcv-1s",
    "ohlcv-1m",
    "ohlcv-1h",
    "ohlcv-1d",
    "ohlcv-eod",
    "status",
    "imbalance",
    "statistics",
    "definition",
];

/// `[databento]`: what a Databento venue's gateway sessions ask for. The venue's `channels` are
/// DBN schemas (`mbo`, `mbp-1`, `trades`, `ohlcv-1s`, ...), its `symbols` are in `stype_in`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabentoConfig {
    /// The dataset, such as `GLBX.MDP3`.
    pub dataset: String,
    /// The symbology of `symbols`: `raw_symbol` (the default), `parent`, `continuous`,
    /// `instrument_id`.
    #[serde(default = "default_stype_in")]
    pub stype_in: String,
    /// What a reconnect does about the records missed while down.
    #[serde(default)]
    pub recovery: Recovery,
    /// Seconds between the gateway's heartbeats when no data flows (5 to 1800; unset: the
    /// gateway's 30). The read timeout follows it: interval + 5 s.
    pub heartbeat_interval_s: Option<u32>,
    /// What the gateway does when tickwire reads too slowly: `warn` or `skip`.
    pub slow_reader_behavior: Option<super::gateway::SlowReaderBehavior>,
    /// The most orders one MBO (L3) book rests ([`MAX_ORDERS_PER_BOOK_RANGE`]; unset:
    /// [`MAX_ORDERS_PER_BOOK_DEFAULT`]). An add past it drops the book with a gap, and the book is
    /// rebuilt from what follows, so that the venue's order flow cannot grow memory without bound.
    #[serde(default)]
    pub max_orders_per_book: Option<u32>,
    /// The most symbol mappings (DBN instrument ids) one gateway session holds
    /// ([`MAX_INSTRUMENT_MAPPINGS_RANGE`]; unset: [`MAX_INSTRUMENT_MAPPINGS_DEFAULT`]). A mapping
    /// past it is refused and its symbol gets a gap.
    #[serde(default)]
    pub max_instrument_mappings: Option<u32>,
}

/// `databento.max_orders_per_book` unset: far above what a real book rests (a CME E-mini book
/// thousands to tens of thousands of orders), and a book's order table stays at most 2^20 slots
/// of 24 bytes (24 MiB).
pub const MAX_ORDERS_PER_BOOK_DEFAULT: u32 = crate::book::mbo::DEFAULT_MAX_ORDERS as u32;
/// `databento.max_orders_per_book`'s valid values: at the top a table of 2^23 slots (192 MiB).
pub const MAX_ORDERS_PER_BOOK_RANGE: std::ops::RangeInclusive<u32> = 1..=1 << 22;
/// `databento.max_instrument_mappings` unset: far more DBN instrument ids than a session maps for
/// the 1,024 streams a connection carries at most, even under `parent` symbology (a parent maps
/// every one of its contracts and spreads), at some 16 bytes each (1 MiB).
pub const MAX_INSTRUMENT_MAPPINGS_DEFAULT: u32 = 65_536;
/// `databento.max_instrument_mappings`'s valid values.
pub const MAX_INSTRUMENT_MAPPINGS_RANGE: std::ops::RangeInclusive<u32> = 1..=1 << 20;

fn default_stype_in() -> String {
    "raw_symbol".to_owned()
}

impl DatabentoConfig {
    /// The venue's `[databento]` table, typed; `None` for a venue file without one (another
    /// kind's). A file the config accepted has a valid one for a Databento venue.
    pub fn of(venue: &VenueConfig) -> Option<DatabentoConfig> {
        read_venue_table(TABLE, venue.table.as_ref()?).ok()
    }

    /// The read timeout that goes with the heartbeat interval: interval + 5 s (35 s unset).
    pub fn read_timeout_ms(&self) -> u64 {
        (u64::from(self.heartbeat_interval_s.unwrap_or(30)) + 5) * 1_000
    }

    /// `max_orders_per_book`, or its default.
    pub fn max_orders_per_book(&self) -> u32 {
        self.max_orders_per_book
            .unwrap_or(MAX_ORDERS_PER_BOOK_DEFAULT)
    }

    /// `max_instrument_mappings`, or its default.
    pub fn max_instrument_mappings(&self) -> u32 {
        self.max_instrument_mappings
            .unwrap_or(MAX_INSTRUMENT_MAPPINGS_DEFAULT)
    }
}

/// `databento.recovery`: what a reconnect does about the records missed while down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// Resubscribe and carry on from the live data: the strategy gets a gap (natural refresh).
    #[default]
    Gap,
    /// Resubscribe from the last record received per stream (intraday replay); the records
    /// replayed twice are skipped, so nothing is missed or repeated.
    Replay,
    /// Resubscribe with an MBO snapshot (`snapshot=1`): books are rebuilt from it. Also asked
    /// for at the first connection.
    Snapshot,
}

/// A Databento venue's `[databento]` table, its schemas and its check.lifecycle. Databento sessions
/// have no lifetime limit and two sessions side by side would both deliver every record, so a
/// Databento venue never rotates: the default rotation is turned off and a set one refused.
pub(super) fn check_table(table: Option<&toml::Value>, check: &mut TableCheck<'_>) {
    if check.lifecycle.rotate_after_ms == LifecycleConfig::default().rotate_after_ms {
        check.lifecycle.rotate_after_ms = 0;
    } else if check.lifecycle.rotate_after_ms != 0 {
        check.problem(
            "lifecycle.rotate_after_ms",
            "must be 0 for a databento venue: a gateway session has no lifetime limit, and two \
             sessions side by side would both deliver every record",
        );
    }
    if check.lifecycle.ping_interval_ms.is_some_and(|ms| ms > 0) {
        check.problem(
            "lifecycle.ping_interval_ms",
            "has no effect on a databento venue: the gateway sends heartbeats itself (set \
             databento.heartbeat_interval_s instead)",
        );
    }
    let databento = match table.map(|table| read_venue_table::<DatabentoConfig>(TABLE, table)) {
        Some(Ok(databento)) => databento,
        Some(Err(problem)) => {
            check.problems.push(problem);
            return;
        }
        None => {
            check.problem(
                "databento",
                "is missing: a databento venue needs at least databento.dataset, such as \
             dataset = \"GLBX.MDP3\"",
            );
            return;
        }
    };
    let dataset_ok = databento
        .dataset
        .split_once('.')
        .is_some_and(|(venue, feed)| {
            [venue, feed].iter().all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            })
        });
    if !dataset_ok {
        check.problem(
            "databento.dataset",
            format!(
                "\"{}\" is not a dataset code; use the form VENUE.FEED in capitals, such as \
                 GLBX.MDP3 or XNAS.ITCH",
                databento.dataset
            ),
        );
    }
    if databento.stype_in.parse::<dbn::SType>().is_err() || databento.stype_in == "smart" {
        check.problem(
            "databento.stype_in",
            format!(
                "\"{}\" is not an input symbology; valid: raw_symbol, parent, continuous, \
                 instrument_id",
                databento.stype_in
            ),
        );
    }
    if let Some(seconds) = databento.heartbeat_interval_s {
        if !(5..=1_800).contains(&seconds) {
            check.problem(
                "databento.heartbeat_interval_s",
                format!("{seconds} is out of range; the gateway takes 5 to 1800 seconds"),
            );
        }
    }
    for (key, value, range) in [
        (
            "databento.max_orders_per_book",
            databento.max_orders_per_book,
            MAX_ORDERS_PER_BOOK_RANGE,
        ),
        (
            "databento.max_instrument_mappings",
            databento.max_instrument_mappings,
            MAX_INSTRUMENT_MAPPINGS_RANGE,
        ),
    ] {
        if let Some(value) = value.filter(|value| !range.contains(value)) {
            check.problem(
                key,
                format!(
                    "{value} is out of range; valid values are {} to {}",
                    range.start(),
                    range.end()
                ),
            );
        }
    }
    if databento.recovery == Recovery::Snapshot && !check.channels.iter().any(|c| c == "mbo") {
        check.problem(
            "databento.recovery",
            "is \"snapshot\", but only the mbo schema has snapshots and channels does not list \
             it; use \"gap\" or \"replay\", or add \"mbo\"",
        );
    }
    if let (Some(timeout), Some(seconds)) = (
        check.lifecycle.read_timeout_ms,
        databento.heartbeat_interval_s.or(Some(30)),
    ) {
        if timeout > 0 && timeout <= u64::from(seconds) * 1_000 {
            check.problem(
                "lifecycle.read_timeout_ms",
                format!(
                    "{timeout} is not longer than the gateway's heartbeat interval ({seconds} s): \
                     an idle but healthy session would be recycled"
                ),
            );
        }
    }
    check.read_timeout_default = Some(databento.read_timeout_ms());
}
