//! `BookSync`: keeps one symbol's order book in step with Binance USD-M Futures diffs, sans-IO.
//!
//! It implements "How to manage a local order book correctly" from the Binance USD-M Futures
//! WebSocket market streams documentation:
//!
//! 1. Buffer the `@depth` diff events (here: in a preallocated, bounded buffer).
//! 2. Get a depth snapshot from `/fapi/v1/depth?symbol=X&limit=1000`.
//! 3. Drop any event whose `u` is below the snapshot's `lastUpdateId`.
//! 4. The first processed event must have `U <= lastUpdateId` and `u >= lastUpdateId`.
//! 5. While listening, each event's `pu` must equal the previous event's `u`; otherwise
//!    initialise again from step 3 (here: from step 1, with a fresh snapshot).
//! 6. A quantity of 0 removes the level; removing a level the book does not hold is normal.
//!
//! The machine never does I/O and never reads a clock. The caller (the decoder thread) feeds it
//! diffs with [`BookSync::on_diff`]; a control thread asks [`BookSync::snapshot_request`] whether
//! to fetch a snapshot now (and [`BookSync::next_snapshot_request_at_ns`] when to ask again), fetches
//! it, and hands the answer back with [`BookSync::on_snapshot`] or reports
//! [`BookSync::on_snapshot_failed`]. Every time is a `now_ns` or `recv_ts_ns` the caller passes.
//!
//! # Decisions the documentation leaves open
//!
//! - **A snapshot newer than every buffered diff** (all of them have `u < lastUpdateId`) is
//!   kept, not thrown away: the buffered diffs are dropped as stale and the next diff decides.
//!   If it overlaps (`U <= lastUpdateId <= u`) the book goes live; if it starts after
//!   `lastUpdateId` the snapshot is stale after all and a new one is requested. Refetching at
//!   once would likely return another snapshot ahead of the stream, since REST answers faster
//!   than the stream delivers.
//! - **A snapshot older than the first buffered diff** (its `U > lastUpdateId`) is stale: the
//!   diffs between them are lost, so a new snapshot is requested, after the backoff.
//! - **A `pu` break is checked over the whole session**, whatever the state: every break emits
//!   one `Gap` event and counts once. While live it invalidates the book and restarts the sync;
//!   while buffering it drops the buffered diffs before the break (they can no longer connect
//!   to the diff after it); while a snapshot waits for an overlapping diff it changes nothing,
//!   because the overlap rule alone decides whether that diff continues the snapshot.
//! - **A snapshot is requested only once a diff is buffered**, as the documentation orders the
//!   steps: a snapshot taken before the stream delivers anything is likely stale on arrival.
//! - **Backoff** spaces snapshot requests: the first comes at once, each later one waits
//!   [`SyncConfig::backoff_initial_ns`] after the previous request or failure, doubling up to
//!   [`SyncConfig::backoff_max_ns`]; a successful sync resets the wait to its initial value.
//! - **Buffer overflow** (more diffs or levels than configured arrive before a usable snapshot)
//!   empties the buffer, counts it and buffers again from the diff that did not fit. An
//!   outstanding snapshot request stays outstanding: its answer is judged by the same rules, and
//!   one that falls before the new buffer is stale and requested again.
//! - **A snapshot while live** is ignored and counted; the book is already correct.
//!
//! # Events
//!
//! A successful sync emits `SnapshotBegin`, one `BookLevel` per level (bids then asks, best
//! first, flag `SNAPSHOT`), `SnapshotEnd` (all three with `venue_seq = lastUpdateId`, flag
//! `SNAPSHOT`, and `NO_EXCHANGE_TS`: the call carries no exchange time), then a `Quote` with
//! flag `LAST`. Each applied diff emits one `BookLevel` per level in message order (bids, then
//! asks), then a `Quote` if the best bid or ask price or size changed; the last event of a diff
//! carries `LAST`, and a diff with no levels and no top change emits nothing. A `pu` break emits
//! one `Gap` (`SequenceBreak`, expected = the previous `u`, received = the diff's `pu`, flag
//! `LAST`). Diff events carry `venue_seq = u` and the diff's exchange and receive times.

use crate::book::{BookSide, OrderBook};
use crate::event::{
    flags, Body, BookLevel, Event, EventHeader, EventKind, Gap, GapReason, InstrumentId, Snapshot,
    VenueId,
};
use crate::fixed::Fixed;
use crate::venue::emit::Emitter;

/// The sequence fields and times of one `depthUpdate` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DiffHeader {
    /// `U`: the first update id in this event.
    pub first_update_id: u64,
    /// `u`: the final update id in this event.
    pub final_update_id: u64,
    /// `pu`: the final update id of the previous event on this stream.
    pub prev_final_update_id: u64,
    /// `T` (transaction time) in ns since the Unix epoch; 0 if the venue sent none.
    pub exch_ts_ns: u64,
    /// When our network thread received the bytes, ns since the Unix epoch.
    pub recv_ts_ns: u64,
}

/// Sizes and timings of one [`BookSync`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncConfig {
    /// Levels reserved per side of the book.
    pub expected_levels_per_side: usize,
    /// Diffs the buffer holds while waiting for a snapshot.
    pub max_buffered_diffs: usize,
    /// Levels (bids and asks together) the buffer holds across its diffs.
    pub max_buffered_levels: usize,
    /// The wait after the first snapshot request or failure before another request.
    pub backoff_initial_ns: u64,
    /// The longest wait between snapshot requests.
    pub backoff_max_ns: u64,
    /// The `limit` of the depth request (levels per side).
    pub snapshot_limit: u32,
}

impl Default for SyncConfig {
    /// Sized for BTCUSDT at `@depth@0ms`: about 20 diffs a second averaging 70 levels, so 1,024
    /// diffs cover a snapshot that takes up to ~50 s, far beyond a healthy REST round trip.
    fn default() -> SyncConfig {
        SyncConfig {
            expected_levels_per_side: 2_048,
            max_buffered_diffs: 1_024,
            max_buffered_levels: 131_072,
            backoff_initial_ns: 100_000_000,
            backoff_max_ns: 10_000_000_000,
            snapshot_limit: 1_000,
        }
    }
}

/// "Fetch a depth snapshot now", as [`BookSync::snapshot_request`] says it.
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
        format!("/fapi/v1/depth?symbol={symbol}&limit={}", self.limit)
    }
}

/// Counters a caller reads (for example into metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SyncStats {
    /// Diffs applied to a live book (including buffered ones replayed at sync).
    pub diffs_applied: u64,
    /// Diffs dropped because their `u` was below the snapshot's `lastUpdateId`.
    pub diffs_dropped_stale: u64,
    /// `pu` breaks, each reported by one `Gap` event.
    pub gaps: u64,
    /// Sync restarts: a break while live, or a buffer overflow.
    pub resyncs: u64,
    /// Times the buffer overflowed and was emptied.
    pub buffer_overflows: u64,
    /// Snapshot requests handed out by `snapshot_request`.
    pub snapshots_requested: u64,
    /// Snapshots older than the buffered diffs, requested again.
    pub snapshots_stale: u64,
    /// Failed snapshot fetches reported by the caller.
    pub snapshots_failed: u64,
    /// Snapshots that arrived while the book was live, and were ignored.
    pub snapshots_ignored: u64,
    /// Successful syncs (the book went live).
    pub syncs: u64,
}

/// Where the machine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncState {
    /// Buffering diffs; a snapshot is needed (or on its way).
    Buffering,
    /// A snapshot is loaded but every diff so far was older: waiting for a diff that overlaps it.
    AwaitingOverlap,
    /// The book is valid and follows every diff.
    Live,
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

/// A buffered diff: its header and where its levels sit in [`DiffBuffer::levels`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferedDiff {
    pub(crate) header: DiffHeader,
    pub(crate) levels_start: usize,
    pub(crate) bids_end: usize,
    pub(crate) levels_end: usize,
}

/// The diffs that arrive before a usable snapshot, with all their levels in one `Vec`. Both
/// `Vec`s are allocated once, at their limits. The Spot book (`venue::binance_spot::sync`)
/// buffers with it too.
#[derive(Debug)]
pub(crate) struct DiffBuffer {
    pub(crate) diffs: Vec<BufferedDiff>,
    pub(crate) levels: Vec<(Fixed, Fixed)>,
    max_diffs: usize,
    max_levels: usize,
}

impl DiffBuffer {
    pub(crate) fn new(max_diffs: usize, max_levels: usize) -> DiffBuffer {
        DiffBuffer {
            diffs: Vec::with_capacity(max_diffs),
            levels: Vec::with_capacity(max_levels),
            max_diffs,
            max_levels,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.diffs.clear();
        self.levels.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.diffs.is_empty()
    }

    /// Empties the buffer and gives its pages back to the kernel ([`crate::pages`]): for a book
    /// that has just synced, whose buffer stays empty until its next resync.
    pub(crate) fn release(&mut self) {
        self.clear();
        crate::pages::release_spare(&mut self.diffs);
        crate::pages::release_spare(&mut self.levels);
    }

    /// Appends a diff; `false` (and the buffer unchanged) if it does not fit.
    pub(crate) fn push(
        &mut self,
        header: DiffHeader,
        bids: impl Iterator<Item = (Fixed, Fixed)>,
        asks: impl Iterator<Item = (Fixed, Fixed)>,
    ) -> bool {
        if self.diffs.len() >= self.max_diffs {
            return false;
        }
        let levels_start = self.levels.len();
        if !self.extend_levels(bids) {
            self.levels.truncate(levels_start);
            return false;
        }
        let bids_end = self.levels.len();
        if !self.extend_levels(asks) {
            self.levels.truncate(levels_start);
            return false;
        }
        self.diffs.push(BufferedDiff {
            header,
            levels_start,
            bids_end,
            levels_end: self.levels.len(),
        });
        true
    }

    /// Appends levels up to the limit; `false` if they did not all fit.
    fn extend_levels(&mut self, levels: impl Iterator<Item = (Fixed, Fixed)>) -> bool {
        for level in levels {
            if self.levels.len() >= self.max_levels {
                return false;
            }
            self.levels.push(level);
        }
        true
    }

    /// Drops the leading diffs whose `u` is below `last_update_id`; returns how many.
    pub(crate) fn drop_older_than(&mut self, last_update_id: u64) -> usize {
        let stale = self
            .diffs
            .iter()
            .take_while(|diff| diff.header.final_update_id < last_update_id)
            .count();
        if stale == 0 {
            return 0;
        }
        let levels_kept_from = self
            .diffs
            .get(stale)
            .map_or(self.levels.len(), |diff| diff.levels_start);
        self.diffs.drain(..stale);
        self.levels.drain(..levels_kept_from);
        for diff in &mut self.diffs {
            diff.levels_start -= levels_kept_from;
            diff.bids_end -= levels_kept_from;
            diff.levels_end -= levels_kept_from;
        }
        stale
    }
}

/// The header fields every event of this machine shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    pub(crate) instrument_id: InstrumentId,
    pub(crate) venue_id: VenueId,
}

impl Stamp {
    pub(crate) fn header(
        self,
        venue_seq: u64,
        exchange_ts_ns: u64,
        recv_ts_ns: u64,
        flag_bits: u8,
    ) -> EventHeader {
        let no_exchange_ts = if exchange_ts_ns == 0 {
            flags::NO_EXCHANGE_TS
        } else {
            0
        };
        EventHeader {
            exchange_ts_ns,
            recv_ts_ns,
            venue_seq,
            instrument_id: self.instrument_id,
            venue_id: self.venue_id,
            // `Event::new` sets the kind from the body.
            kind: EventKind::BookLevel,
            flags: flag_bits | no_exchange_ts,
        }
    }
}

/// Applies one diff to a live book and emits its events.
pub(crate) fn apply_diff<F: FnMut(Event)>(
    book: &mut OrderBook,
    stamp: Stamp,
    diff: &DiffHeader,
    bids: impl Iterator<Item = (Fixed, Fixed)>,
    asks: impl Iterator<Item = (Fixed, Fixed)>,
    emitter: &mut Emitter<'_, F>,
) {
    let header = stamp.header(diff.final_update_id, diff.exch_ts_ns, diff.recv_ts_ns, 0);
    let top_before = book.top();
    let sides = bids
        .map(|level| (BookSide::Bid, level))
        .chain(asks.map(|level| (BookSide::Ask, level)));
    for (side, (price, qty)) in sides {
        book.set(side, price, qty);
        let level = BookLevel::new(side.into(), price, qty);
        emitter.push(Event::new(header, Body::BookLevel(level)));
    }
    let top_after = book.top();
    if top_after != top_before {
        let mut quote_header = header;
        quote_header.flags |= flags::DERIVED;
        emitter.push(Event::new(quote_header, Body::Quote(top_after)));
    }
    emitter.finish(true);
}

/// Emits the loaded book as a snapshot: `SnapshotBegin`, its levels, `SnapshotEnd`, `Quote`.
pub(crate) fn publish_snapshot<F: FnMut(Event)>(
    book: &OrderBook,
    stamp: Stamp,
    last_update_id: u64,
    recv_ts_ns: u64,
    emitter: &mut Emitter<'_, F>,
) {
    let header = stamp.header(last_update_id, 0, recv_ts_ns, flags::SNAPSHOT);
    let snapshot = Snapshot {
        bid_levels: u32::try_from(book.len(BookSide::Bid)).unwrap_or(u32::MAX),
        ask_levels: u32::try_from(book.len(BookSide::Ask)).unwrap_or(u32::MAX),
        snapshot_id: last_update_id,
        _reserved: [0; 2],
    };
    emitter.push(Event::new(header, Body::SnapshotBegin(snapshot)));
    for side in [BookSide::Bid, BookSide::Ask] {
        for (price, qty) in book.levels(side) {
            let level = BookLevel::new(side.into(), price, qty);
            emitter.push(Event::new(header, Body::BookLevel(level)));
        }
    }
    emitter.push(Event::new(header, Body::SnapshotEnd(snapshot)));
    let quote_header = stamp.header(last_update_id, 0, recv_ts_ns, flags::DERIVED);
    emitter.push(Event::new(quote_header, Body::Quote(book.top())));
    emitter.finish(true);
}

/// The book synchronisation state machine of one Binance USD-M symbol. See the module docs.
#[derive(Debug)]
pub struct BookSync {
    stamp: Stamp,
    config: SyncConfig,
    book: OrderBook,
    state: State,
    buffer: DiffBuffer,
    /// `u` of the last diff received, in any state: the next diff's `pu` must equal it.
    last_final_update_id: Option<u64>,
    snapshot_outstanding: bool,
    /// When the backoff wait started: the last snapshot request or failure.
    backoff_from_ns: Option<u64>,
    /// How long to wait after `backoff_from_ns` before the next request.
    backoff_wait_ns: u64,
    stats: SyncStats,
}

impl BookSync {
    /// A machine for one symbol; every buffer is allocated here.
    pub fn new(instrument_id: InstrumentId, venue_id: VenueId, config: SyncConfig) -> BookSync {
        BookSync {
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

    /// The book. Valid only while [`BookSync::state`] is `Live`.
    /// The `u` of the last diff applied (or the snapshot's `lastUpdateId`), once in sync.
    pub fn last_update_id(&self) -> Option<u64> {
        self.last_final_update_id
    }

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

    /// Diffs waiting in the buffer for a snapshot.
    pub fn buffered_diffs(&self) -> usize {
        self.buffer.diffs.len()
    }

    /// Levels (bids and asks together) across the buffered diffs.
    pub fn buffered_levels(&self) -> usize {
        self.buffer.levels.len()
    }

    /// Whether a snapshot request was handed out and not yet answered.
    pub fn snapshot_outstanding(&self) -> bool {
        self.snapshot_outstanding
    }

    /// Whether the machine wants a snapshot: buffering, at least one diff buffered (see the
    /// module docs), and no request outstanding.
    fn wants_snapshot(&self) -> bool {
        matches!(self.state, State::Buffering)
            && !self.buffer.is_empty()
            && !self.snapshot_outstanding
    }

    /// When a snapshot request will be due, if one is wanted: a control thread sleeps until then
    /// instead of polling. `Some(0)` means at once.
    pub fn next_snapshot_request_at_ns(&self) -> Option<u64> {
        if !self.wants_snapshot() {
            return None;
        }
        Some(
            self.backoff_from_ns
                .map_or(0, |from_ns| from_ns.saturating_add(self.backoff_wait_ns)),
        )
    }

    /// `Some` when the caller should fetch a snapshot now. The request is then outstanding
    /// until [`BookSync::on_snapshot`] or [`BookSync::on_snapshot_failed`]; a caller that gives
    /// up on a fetch (a timeout) must report it as failed.
    pub fn snapshot_request(&mut self, now_ns: u64) -> Option<SnapshotRequest> {
        let due_ns = self.next_snapshot_request_at_ns()?;
        if now_ns < due_ns {
            return None;
        }
        // The first request ever goes out at once; each later one has waited the current
        // backoff, which doubles for the next.
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

    /// The outstanding snapshot fetch failed at `now_ns`; the next request waits the backoff
    /// from then.
    pub fn on_snapshot_failed(&mut self, now_ns: u64) {
        self.snapshot_outstanding = false;
        self.stats.snapshots_failed += 1;
        self.backoff_from_ns = Some(now_ns);
    }

    /// A successful sync: the next request (after a future break) waits only the initial
    /// backoff.
    fn reset_backoff(&mut self) {
        self.backoff_wait_ns = self.config.backoff_initial_ns;
    }

    /// A depth snapshot arrived: `lastUpdateId` and its levels (any order; quantity 0 skipped).
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
                // A newer snapshot replaces the held one; the buffer is empty in this state.
                self.book.clear();
                self.state = State::Buffering;
            }
            State::Buffering => {}
        }
        let dropped = self.buffer.drop_older_than(last_update_id);
        self.stats.diffs_dropped_stale += dropped as u64;
        let first_update_id = self
            .buffer
            .diffs
            .first()
            .map(|diff| diff.header.first_update_id);
        match first_update_id {
            None => {
                // Every buffered diff was older: keep the snapshot until a diff overlaps it.
                self.book.load_side(BookSide::Bid, bids);
                self.book.load_side(BookSide::Ask, asks);
                self.state = State::AwaitingOverlap {
                    last_update_id,
                    recv_ts_ns,
                };
            }
            Some(first_update_id) if first_update_id <= last_update_id => {
                // The first buffered diff overlaps (its `u >= lastUpdateId` after the drop).
                self.book.load_side(BookSide::Bid, bids);
                self.book.load_side(BookSide::Ask, asks);
                self.go_live(last_update_id, recv_ts_ns, out);
            }
            Some(_) => {
                // The snapshot ends before the first buffered diff begins: the diffs between
                // them are lost to us, so this snapshot cannot be used.
                self.stats.snapshots_stale += 1;
                self.backoff_from_ns = Some(recv_ts_ns);
            }
        }
    }

    /// Publishes the loaded snapshot, replays the buffered diffs and goes live.
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
        self.reset_backoff();
    }

    /// Buffers a diff, emptying the buffer first if it is full (see the module docs).
    fn buffer_diff<B, A>(&mut self, diff: DiffHeader, bids: B, asks: A)
    where
        B: Iterator<Item = (Fixed, Fixed)> + Clone,
        A: Iterator<Item = (Fixed, Fixed)> + Clone,
    {
        if self.buffer.push(diff, bids.clone(), asks.clone()) {
            return;
        }
        self.buffer.clear();
        self.stats.buffer_overflows += 1;
        self.stats.resyncs += 1;
        // A diff larger than the whole buffer cannot be kept; the buffer stays empty and the
        // next diff starts it.
        let _ = self.buffer.push(diff, bids, asks);
    }

    /// One `depthUpdate` event: `bids` and `asks` in message order.
    pub fn on_diff<B, A, F>(&mut self, diff: DiffHeader, bids: B, asks: A, out: &mut F)
    where
        B: Iterator<Item = (Fixed, Fixed)> + Clone,
        A: Iterator<Item = (Fixed, Fixed)> + Clone,
        F: FnMut(Event),
    {
        let expected_prev = self.last_final_update_id;
        self.last_final_update_id = Some(diff.final_update_id);
        let broken = expected_prev.is_some_and(|prev| prev != diff.prev_final_update_id);
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
                expected_prev.unwrap_or(0),
                diff.prev_final_update_id,
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
                apply_diff(&mut self.book, self.stamp, &diff, bids, asks, &mut emitter);
                self.stats.diffs_applied += 1;
            }
            State::Buffering => {
                // The buffered diffs before a break cannot lead to the diffs after it.
                if broken {
                    self.buffer.clear();
                }
                self.buffer_diff(diff, bids, asks);
            }
            State::AwaitingOverlap {
                last_update_id,
                recv_ts_ns,
            } => {
                if diff.final_update_id < last_update_id {
                    self.stats.diffs_dropped_stale += 1;
                } else if diff.first_update_id <= last_update_id {
                    let mut emitter = Emitter::new(out);
                    publish_snapshot(
                        &self.book,
                        self.stamp,
                        last_update_id,
                        recv_ts_ns,
                        &mut emitter,
                    );
                    apply_diff(&mut self.book, self.stamp, &diff, bids, asks, &mut emitter);
                    self.stats.diffs_applied += 1;
                    self.state = State::Live;
                    self.stats.syncs += 1;
                    self.reset_backoff();
                } else {
                    // The stream has moved past the snapshot without overlapping it.
                    self.stats.snapshots_stale += 1;
                    self.backoff_from_ns = Some(diff.recv_ts_ns);
                    self.book.clear();
                    self.state = State::Buffering;
                    self.buffer_diff(diff, bids, asks);
                }
            }
        }
    }

    /// The stream's connection dropped: the diffs it would have carried are lost. Emits a `Gap`
    /// (`Reconnect`) when this stream had delivered anything, invalidates the book and starts
    /// over: the next connection's diffs are buffered until a snapshot overlaps them.
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
