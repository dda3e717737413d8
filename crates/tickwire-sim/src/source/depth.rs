//! Depth books behind the REST snapshot: the JSON shape of `GET /fapi/v1/depth`, and the book a
//! capture replay builds from the recorded diffs.
//!
//! Neither is on a hot path: a book changes once per depth message and a snapshot is written once
//! per REST request, so plain `BTreeMap`s keyed by price are clear and fast enough.

use std::collections::BTreeMap;

use super::text::push_u64;
use tickwire::fixed::Fixed;

/// Writes a REST depth snapshot body, `{"lastUpdateId":..,"E":..,"T":..,"bids":[..],"asks":[..]}`,
/// in the field order Binance USD-M uses ("Order Book" in the USD-M REST market data docs).
/// `write_bids` and `write_asks` append their levels through [`SnapshotSide::level`], best first.
pub(crate) fn write_snapshot(
    last_update_id: u64,
    event_time_ms: u64,
    transaction_time_ms: u64,
    write_bids: impl FnOnce(&mut SnapshotSide<'_>),
    write_asks: impl FnOnce(&mut SnapshotSide<'_>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"lastUpdateId\":");
    push_u64(&mut out, last_update_id);
    out.extend_from_slice(b",\"E\":");
    push_u64(&mut out, event_time_ms);
    out.extend_from_slice(b",\"T\":");
    push_u64(&mut out, transaction_time_ms);
    out.extend_from_slice(b",\"bids\":[");
    write_bids(&mut SnapshotSide {
        out: &mut out,
        levels: 0,
    });
    out.extend_from_slice(b"],\"asks\":[");
    write_asks(&mut SnapshotSide {
        out: &mut out,
        levels: 0,
    });
    out.extend_from_slice(b"]}");
    out
}

/// One side of a snapshot being written: the levels go in as `["price","quantity"]` pairs.
pub(crate) struct SnapshotSide<'a> {
    out: &'a mut Vec<u8>,
    levels: usize,
}

impl SnapshotSide<'_> {
    /// Appends one level; `write_price` and `write_quantity` append the bare decimal digits (the
    /// quotes are written here).
    pub(crate) fn level(
        &mut self,
        write_price: impl FnOnce(&mut Vec<u8>),
        write_quantity: impl FnOnce(&mut Vec<u8>),
    ) {
        if self.levels > 0 {
            self.out.push(b',');
        }
        self.out.extend_from_slice(b"[\"");
        write_price(self.out);
        self.out.extend_from_slice(b"\",\"");
        write_quantity(self.out);
        self.out.extend_from_slice(b"\"]");
        self.levels += 1;
    }
}

/// A price level as the capture wrote it: the strings are kept so a snapshot repeats the venue's
/// own formatting ("58710.20", "0.014") instead of a normalised one.
#[derive(Clone, Debug)]
struct RecordedLevel {
    price: Box<str>,
    quantity: Box<str>,
}

/// One level change of a recorded depth diff, parsed.
#[derive(Clone, Debug)]
pub(crate) struct LevelChange {
    pub(crate) price: Fixed,
    pub(crate) price_text: Box<str>,
    pub(crate) quantity: Fixed,
    pub(crate) quantity_text: Box<str>,
}

/// A recorded depth diff (`depthUpdate`), parsed and checked before its message is handed out, so
/// the book only ever sees diffs the client also saw.
#[derive(Clone, Debug)]
pub(crate) struct RecordedDiff {
    pub(crate) symbol: String,
    pub(crate) event_time_ms: u64,
    pub(crate) transaction_time_ms: u64,
    pub(crate) final_update_id: u64,
    pub(crate) bids: Vec<LevelChange>,
    pub(crate) asks: Vec<LevelChange>,
}

/// The book of one symbol as the replayed diffs describe it.
///
/// The replay does not seed it from a REST snapshot, so this book is built from diffs alone: levels
/// that never
/// changed during the capture are missing, and a level the venue dropped before recording began
/// but never re-sent can linger. It is exactly "every diff replayed so far, applied in order",
/// which is what a client that applied the same diffs holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecordedBook {
    bids: BTreeMap<Fixed, RecordedLevel>,
    asks: BTreeMap<Fixed, RecordedLevel>,
    last_update_id: u64,
    event_time_ms: u64,
    transaction_time_ms: u64,
}

impl RecordedBook {
    /// Applies a diff: absolute quantities, and a zero quantity removes the level (Binance USD-M
    /// "How to manage a local order book correctly", step 6).
    pub(crate) fn apply(&mut self, diff: RecordedDiff) {
        apply_side(&mut self.bids, diff.bids);
        apply_side(&mut self.asks, diff.asks);
        self.last_update_id = diff.final_update_id;
        self.event_time_ms = diff.event_time_ms;
        self.transaction_time_ms = diff.transaction_time_ms;
    }

    /// The snapshot body: bids highest first, asks lowest first, at most `limit` per side.
    pub(crate) fn snapshot(&self, limit: usize) -> Vec<u8> {
        write_snapshot(
            self.last_update_id,
            self.event_time_ms,
            self.transaction_time_ms,
            |side| {
                for level in self.bids.values().rev().take(limit) {
                    write_recorded(side, level);
                }
            },
            |side| {
                for level in self.asks.values().take(limit) {
                    write_recorded(side, level);
                }
            },
        )
    }
}

fn apply_side(side: &mut BTreeMap<Fixed, RecordedLevel>, changes: Vec<LevelChange>) {
    for change in changes {
        if change.quantity == Fixed::ZERO {
            side.remove(&change.price);
        } else {
            side.insert(
                change.price,
                RecordedLevel {
                    price: change.price_text,
                    quantity: change.quantity_text,
                },
            );
        }
    }
}

fn write_recorded(side: &mut SnapshotSide<'_>, level: &RecordedLevel) {
    side.level(
        |out| out.extend_from_slice(level.price.as_bytes()),
        |out| out.extend_from_slice(level.quantity.as_bytes()),
    );
}
