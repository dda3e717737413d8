//! `SpotBookSync`: keeps one symbol's order book in step with Binance Spot diffs, sans-IO.
//!
//! It implements "How to manage a local order book correctly" from Binance Spot's WebSocket
//! Streams documentation (`web-socket-streams.md`, binance-spot-api-docs commit a5e0bc3,
//! 2026-07-21; the steps were corrected on 2025-11-12, CHANGELOG):
//!
//! 1. Open the `@depth` (or `@depth@100ms`) stream.
//! 2. Buffer the events received; note the `U` of the first one (here: a preallocated, bounded
//!    buffer, the USD-M book's `DiffBuffer`).
//! 3. Get a depth snapshot from `/api/v3/depth?symbol=X&limit=N`.
//! 4. If the snapshot's `lastUpdateId` is below that first `U`, go back to step 3.
//! 5. Discard the buffered events whose `u <= lastUpdateId`; the first one left should have
//!    `lastUpdateId` within its `[U; u]`.
//! 6. Set the book to the snapshot; its update id is `lastUpdateId`.
//! 7. Apply the buffered events, then every later one, by the update procedure: an event whose
//!    `u` is below the book's update id is ignored; one whose `U` is above the book's update
//!    id plus one means events were missed: discard the book and start again; normally `U` is
//!    the previous `u` plus one. A quantity of 0 removes the level. The book's update id
//!    becomes `u`.
//!
//! There is no `pu` on Spot: the chain is `U` against the previous `u`, which is this module's
//! own rule (the USD-M book, `venue::binance::sync`, checks `pu`). The book, the buffer and the
//! events it emits are shared with the USD-M book, so a Spot book's events are exactly the
//! USD-M book's.
//!
//! # Decisions the documentation leaves open
//!
//! - **The first event after a snapshot**: steps 4 and 5 ask for `U <= lastUpdateId <= u`, the
//!   update procedure for `U <= lastUpdateId + 1`. A snapshot that ends exactly where the first
//!   buffered event starts (`lastUpdateId = U - 1`) misses nothing, so it is used: the rule here
//!   is `U <= lastUpdateId + 1 <= u`.
//! - **A repeated event** (`u` at or below the previous event's `u`, the update procedure's
//!   "ignore") is dropped and counted with the stale ones, in every state; it breaks nothing.
//! - **A break** (`U` above the previous `u` + 1) is checked over the whole session, whatever
//!   the state: each emits one `Gap` (`SequenceBreak`, expected = previous `u` + 1, received =
//!   `U`) and counts once. While live it invalidates the book and starts again from step 2;
//!   while buffering it empties the buffer (those events can no longer lead to the ones after
//!   it); while a snapshot waits for an overlapping event it changes nothing, since the overlap
//!   rule alone decides.
//! - **A snapshot newer than every buffered event** is kept until an event overlaps it, and a
//!   snapshot **older than the first buffered event** is stale and fetched again after the
//!   backoff; a snapshot is requested only once an event is buffered; requests back off
//!   exponentially; a full buffer is emptied and counted; a snapshot while live is ignored. All
//!   as the USD-M book decides, for the same reasons (see `venue::binance::sync`).
//!
//! # Events
//!
//! As the USD-M book: `SnapshotBegin`, the levels (flag `SNAPSHOT`), `SnapshotEnd` and a
//! derived `Quote` when it goes live (`venue_seq = lastUpdateId`); per applied diff one
//! `BookLevel` per level and a derived `Quote` when the top changed, `venue_seq = u`; the last
//! event of each carries `LAST`.

use crate::book::{BookSide, OrderBook};
use crate::event::{flags, Body, Event, Gap, GapReason, InstrumentId, VenueId};
use crate::fixed::Fixed;
use crate::venue::binance::sync::{
    self as usdm, apply_diff, publish_snapshot, DiffBuffer, Stamp, SyncConfig, SyncState, SyncStats,
};
use crate::venue::emit::Emitter;

/// `/api/v3/depth`'s valid `limit`s: 1 to 5000 (`rest-api.md`, "Order book"; a larger limit
/// is answered with 5000 levels). Its weight grows with it: 5 up to 100, 25 up to 500, 50 up to
/// 1000, 250 up to 5000. The venue's own default is 100; tickwire always sends `book_depth`
/// (1000 unless the venue file says otherwise).
pub const SNAPSHOT_LIMITS: std::ops::RangeInclusive<u32> = 1..=5000;

/// The sequence fields and times of one Spot `depthUpdate` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DiffHeader {
    /// `U`: the first update id in this event.
    pub first_update_id: u64,
    /// `u`: the final update id in this event.
    pub final_update_id: u64,
    /// The exchange time in ns (Spot's `E`, its only time); 0 if none.
    pub exch_ts_ns: u64,
    /// When our network thread received the bytes.
    pub recv_ts_ns: u64,
}

impl DiffHeader {
    /// The shared book code's header; Spot has no `pu`.
    fn shared(self) -> usdm::DiffHeader {
        usdm::DiffHeader {
            first_update_id: self.first_update_id,
            final_update_id: self.final_update_id,
            prev_final_update_id: 0,
            exch_ts_ns: self.exch_ts_ns,
            recv_ts_ns: self.recv_ts_ns,
        }
    }
}

/// "Fetch a depth snapshot now".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub instrument_id: InstrumentId,
    /// Levels per side to ask for.
    pub limit: u32,
}

impl SnapshotRequest {
    /// The REST path and query for `symbol` (as Binance spells it, e.g. `BTCUSDT`). Allocates:
    /// for the control thread.
    pub fn path(&self, symbol: &str) -> String {
        format!("/api/v3/depth?symbol={symbol}&limit={}", self.limit)
    }
}

#[derive(Clone, Copy, Debug)]
enum State {
    Buffering,
    /// The book holds the snapshot, not yet published.
    AwaitingOverlap {
        last_update_id: u64,
        recv_ts_ns: u64,
    },
    Live,
}

/// The book synchronisation state machine of one Binance Spot symbol. See the module docs.
#[derive(Debug)]
pub struct SpotBookSync {
    stamp: Stamp,
    config: SyncConfig,
    book: OrderBook,
    state: State,
    buffer: DiffBuffer,
    /// `u` of the last event received, in any state: the next one's `U` must be at most one
    /// above it.
    last_final_update_id: Option<u64>,
    snapshot_outstanding: bool,
    backoff_from_ns: Option<u64>,
    backoff_wait_ns: u64,
    stats: SyncStats,
}

impl SpotBookSync {
    /// A machine for one symbol; every buffer is allocated here.
    pub fn new(instrument_id: InstrumentId, venue_id: VenueId, config: SyncConfig) -> Self {
        SpotBookSync {
            stamp: Stamp {
                instrument_id,
                venue_id,
            },
            config,
            book: OrderBook::with_capacity(config.expected_levels_per_side),
            state: State::Buffering,
            buffer: DiffBuffer::new(config.max_buffered_diffs, config.max_buffered_levels),
            last_final_update_id: None,
            snapshot_outstanding: false,
            backoff_from_ns: None,
            backoff_wait_ns: config.backoff_initial_ns,
            stats: SyncStats::default(),
        }
    }

    /// The `u` of the last event received (the book's update id while live).
    pub fn last_update_id(&self) -> Option<u64> {
        self.last_final_update_id
    }

    /// The book. Valid only while [`SpotBookSync::state`] is `Live`.
    pub fn book(&self) -> &OrderBook {
        &self.book
    }

    pub fn state(&self) -> SyncState {
        match self.state {
            State::Buffering => SyncState::Buffering,
            State::AwaitingOverlap { .. } => SyncState::AwaitingOverlap,
            State::Live => SyncState::Live,
        }
    }

    pub fn is_live(&self) -> bool {
        matches!(self.state, State::Live)
    }

    pub fn stats(&self) -> SyncStats {
        self.stats
    }

    /// Events waiting in the buffer for a snapshot.
    pub fn buffered_diffs(&self) -> usize {
        self.buffer.diffs.len()
    }

    /// Levels across the buffered events.
    pub fn buffered_levels(&self) -> usize {
        self.buffer.levels.len()
    }

    /// Whether a snapshot request was handed out and not yet answered.
    pub fn snapshot_outstanding(&self) -> bool {
        self.snapshot_outstanding
    }

    fn wants_snapshot(&self) -> bool {
        matches!(self.state, State::Buffering)
            && !self.buffer.is_empty()
            && !self.snapshot_outstanding
    }

    /// When a snapshot request will be due, if one is wanted; `Some(0)` means at once.
    pub fn next_snapshot_request_at_ns(&self) -> Option<u64> {
        if !self.wants_snapshot() {
            return None;
        }
        Some(
            self.backoff_from_ns
                .map_or(0, |from_ns| from_ns.saturating_add(self.backoff_wait_ns)),
        )
    }

    /// `Some` when the caller should fetch a snapshot now; it is then outstanding until
    /// [`SpotBookSync::on_snapshot`] or [`SpotBookSync::on_snapshot_failed`].
    pub fn snapshot_request(&mut self, now_ns: u64) -> Option<SnapshotRequest> {
        let due_ns = self.next_snapshot_request_at_ns()?;
        if now_ns < due_ns {
            return None;
        }
        if self.backoff_from_ns.is_some() {
            self.backoff_wait_ns = self
                .backoff_wait_ns
                .saturating_mul(2)
                .min(self.config.backoff_max_ns);
        }
        self.backoff_from_ns = Some(now_ns);
        self.snapshot_outstanding = true;
        self.stats.snapshots_requested += 1;
        Some(SnapshotRequest {
            instrument_id: self.stamp.instrument_id,
            limit: self.config.snapshot_limit,
        })
    }

    /// The outstanding snapshot fetch failed at `now_ns`.
    pub fn on_snapshot_failed(&mut self, now_ns: u64) {
        self.snapshot_outstanding = false;
        self.stats.snapshots_failed += 1;
        self.backoff_from_ns = Some(now_ns);
    }

    /// A depth snapshot arrived: `lastUpdateId` and its levels (quantity 0 skipped).
    pub fn on_snapshot<B, A, F>(
        &mut self,
        last_update_id: u64,
        bids: B,
        asks: A,
        recv_ts_ns: u64,
        out: &mut F,
    ) where
        B: Iterator<Item = (Fixed, Fixed)> + Clone,
        A: Iterator<Item = (Fixed, Fixed)> + Clone,
        F: FnMut(Event),
    {
        self.snapshot_outstanding = false;
        match self.state {
            State::Live => {
                self.stats.snapshots_ignored += 1;
                return;
            }
            State::AwaitingOverlap { .. } => {
                self.book.clear();
                self.state = State::Buffering;
            }
            State::Buffering => {}
        }
        // Step 5: discard the events with `u <= lastUpdateId`.
        let dropped = self
            .buffer
            .drop_older_than(last_update_id.saturating_add(1));
        self.stats.diffs_dropped_stale += dropped as u64;
        let first_update_id = self
            .buffer
            .diffs
            .first()
            .map(|diff| diff.header.first_update_id);
        match first_update_id {
            None => {
                self.book.load_side(BookSide::Bid, bids);
                self.book.load_side(BookSide::Ask, asks);
                self.state = State::AwaitingOverlap {
                    last_update_id,
                    recv_ts_ns,
                };
            }
            // The first event left has `u > lastUpdateId`; it continues the snapshot when it
            // starts at most one past it.
            Some(first) if first <= last_update_id.saturating_add(1) => {
                self.book.load_side(BookSide::Bid, bids);
                self.book.load_side(BookSide::Ask, asks);
                self.go_live(last_update_id, recv_ts_ns, out);
            }
            Some(_) => {
                // Step 4: the snapshot ends before the buffered events begin.
                self.stats.snapshots_stale += 1;
                self.backoff_from_ns = Some(recv_ts_ns);
            }
        }
    }

    fn go_live<F: FnMut(Event)>(&mut self, last_update_id: u64, recv_ts_ns: u64, out: &mut F) {
        let mut emitter = Emitter::new(out);
        publish_snapshot(
            &self.book,
            self.stamp,
            last_update_id,
            recv_ts_ns,
            &mut emitter,
        );
        for diff in &self.buffer.diffs {
            let bids = self
                .buffer
                .levels
                .get(diff.levels_start..diff.bids_end)
                .unwrap_or_default();
            let asks = self
                .buffer
                .levels
                .get(diff.bids_end..diff.levels_end)
                .unwrap_or_default();
            apply_diff(
                &mut self.book,
                self.stamp,
                &diff.header,
                bids.iter().copied(),
                asks.iter().copied(),
                &mut emitter,
            );
            self.stats.diffs_applied += 1;
        }
        self.buffer.release();
        self.state = State::Live;
        self.stats.syncs += 1;
        self.backoff_wait_ns = self.config.backoff_initial_ns;
    }

    fn buffer_diff<B, A>(&mut self, diff: DiffHeader, bids: B, asks: A)
    where
        B: Iterator<Item = (Fixed, Fixed)> + Clone,
        A: Iterator<Item = (Fixed, Fixed)> + Clone,
    {
        if self.buffer.push(diff.shared(), bids.clone(), asks.clone()) {
            return;
        }
        self.buffer.clear();
        self.stats.buffer_overflows += 1;
        self.stats.resyncs += 1;
        let _ = self.buffer.push(diff.shared(), bids, asks);
    }

    /// One `depthUpdate` event: `bids` and `asks` in message order.
    pub fn on_diff<B, A, F>(&mut self, diff: DiffHeader, bids: B, asks: A, out: &mut F)
    where
        B: Iterator<Item = (Fixed, Fixed)> + Clone,
        A: Iterator<Item = (Fixed, Fixed)> + Clone,
        F: FnMut(Event),
    {
        let previous = self.last_final_update_id;
        if previous.is_some_and(|previous| diff.final_update_id <= previous) {
            self.stats.diffs_dropped_stale += 1;
            return;
        }
        self.last_final_update_id = Some(diff.final_update_id);
        let expected = previous.map(|previous| previous.saturating_add(1));
        let broken = expected.is_some_and(|expected| diff.first_update_id > expected);
        if broken {
            self.stats.gaps += 1;
            let header = self.stamp.header(
                diff.final_update_id,
                diff.exch_ts_ns,
                diff.recv_ts_ns,
                flags::LAST,
            );
            let gap = Gap::new(
                GapReason::SequenceBreak,
                expected.unwrap_or(0),
                diff.first_update_id,
            );
            out(Event::new(header, Body::Gap(gap)));
        }
        match self.state {
            State::Live if broken => {
                self.book.clear();
                self.buffer.clear();
                self.state = State::Buffering;
                self.stats.resyncs += 1;
                self.buffer_diff(diff, bids, asks);
            }
            State::Live => {
                let mut emitter = Emitter::new(out);
                apply_diff(
                    &mut self.book,
                    self.stamp,
                    &diff.shared(),
                    bids,
                    asks,
                    &mut emitter,
                );
                self.stats.diffs_applied += 1;
            }
            State::Buffering => {
                if broken {
                    self.buffer.clear();
                }
                self.buffer_diff(diff, bids, asks);
            }
            State::AwaitingOverlap {
                last_update_id,
                recv_ts_ns,
            } => {
                if diff.final_update_id <= last_update_id {
                    self.stats.diffs_dropped_stale += 1;
                } else if diff.first_update_id <= last_update_id.saturating_add(1) {
                    let mut emitter = Emitter::new(out);
                    publish_snapshot(
                        &self.book,
                        self.stamp,
                        last_update_id,
                        recv_ts_ns,
                        &mut emitter,
                    );
                    apply_diff(
                        &mut self.book,
                        self.stamp,
                        &diff.shared(),
                        bids,
                        asks,
                        &mut emitter,
                    );
                    self.stats.diffs_applied += 1;
                    self.state = State::Live;
                    self.stats.syncs += 1;
                    self.backoff_wait_ns = self.config.backoff_initial_ns;
                } else {
                    self.stats.snapshots_stale += 1;
                    self.backoff_from_ns = Some(diff.recv_ts_ns);
                    self.book.clear();
                    self.state = State::Buffering;
                    self.buffer_diff(diff, bids, asks);
                }
            }
        }
    }

    /// The stream's connection dropped: a `Gap` (`Reconnect`) when it had delivered anything,
    /// the book invalidated, and the next connection's events buffered until a snapshot.
    pub fn on_disconnect<F: FnMut(Event)>(&mut self, now_ns: u64, out: &mut F) {
        let Some(last) = self.last_final_update_id.take() else {
            return;
        };
        self.stats.gaps += 1;
        if matches!(self.state, State::Live) {
            self.stats.resyncs += 1;
        }
        let header = self.stamp.header(last, 0, now_ns, flags::LAST);
        out(Event::new(
            header,
            Body::Gap(Gap::new(GapReason::Reconnect, last, 0)),
        ));
        self.book.clear();
        self.buffer.clear();
        self.state = State::Buffering;
    }
}
