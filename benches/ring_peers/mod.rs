//! The ring workloads shared by `rings.rs` (Criterion, one ring at a time) and `rings_paired.rs`
//! (all rings alternated round by round): each moves a checked sequence between two pinned
//! threads and returns the elapsed time.

#![allow(dead_code, reason = "each bench target uses a different subset")]

use crossbeam_queue::ArrayQueue;
use std::hint::spin_loop;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickwire::event::{Body, Event, EventHeader, EventKind, Quote};
use tickwire::fixed::Fixed;
use tickwire::ring::{frame_ring, ring};

pub const CAPACITY: usize = 4096;
pub const ITEMS_PER_ITER: u64 = 100_000;
pub const BATCH: usize = 64;

/// The two cores the benchmark threads run on: `TICKWIRE_BENCH_CORES=P,C` (producer, consumer),
/// else the last two cores this process could use at start. Computed once: pinning the main
/// thread narrows its affinity mask, so a later look would see one core.
pub fn bench_cores() -> (usize, usize) {
    static CORES: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();
    *CORES.get_or_init(find_bench_cores)
}

pub fn find_bench_cores() -> (usize, usize) {
    if let Ok(text) = std::env::var("TICKWIRE_BENCH_CORES") {
        let cores: Vec<usize> = text
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        if let [producer, consumer] = cores[..] {
            return (producer, consumer);
        }
        panic!("TICKWIRE_BENCH_CORES must be two cores, e.g. 2,3; got {text:?}");
    }
    let cores = tickwire::thread::allowed_cores();
    match cores[..] {
        [.., producer, consumer] => (producer, consumer),
        [only] => {
            eprintln!("one core only: producer and consumer share core {only}");
            (only, only)
        }
        [] => panic!("no cores to run on"),
    }
}

/// Pins the calling thread: the producer and the consumer each get their own core.
pub fn pin(core: usize) {
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        panic!("cannot pin to core {core}");
    }
}

pub fn producer_core() -> usize {
    bench_cores().0
}

pub fn consumer_core() -> usize {
    bench_cores().1
}

pub fn event(seq: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: seq,
            recv_ts_ns: seq,
            venue_seq: seq,
            instrument_id: 1,
            venue_id: 0,
            kind: EventKind::Quote,
            flags: 0,
        },
        Body::Quote(Quote {
            bid_px: Fixed(seq as i64),
            bid_sz: Fixed(1),
            ask_px: Fixed(seq as i64 + 1),
            ask_sz: Fixed(1),
        }),
    )
}

/// Something that moves a sequence of `T` between two threads.
pub trait Item: Copy + Send + 'static {
    fn make(seq: u64) -> Self;
    fn seq(&self) -> u64;
}

impl Item for u64 {
    fn make(seq: u64) -> u64 {
        seq
    }
    fn seq(&self) -> u64 {
        *self
    }
}

impl Item for Event {
    fn make(seq: u64) -> Event {
        event(seq)
    }
    fn seq(&self) -> u64 {
        self.header.venue_seq
    }
}

/// Shifts the next allocations by a different amount on every call. Per-item SPSC throughput is
/// bimodal on this kind of VM: the same code runs at 25 or 70 M items/s depending on where the
/// ring's buffers and cursors land (cache-set and 4K aliasing between the two threads' lines).
/// With one fixed layout per process, a whole benchmark lands in one mode and two rings compare
/// by luck; moving the layout on every sample makes each median an average over layouts.
pub fn shifted_layout() -> Vec<u8> {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    vec![1u8; 64 + (call * 4_160) % (256 * 1024)]
}

/// Runs `produce` on this thread and `consume` on a pinned thread; returns the time from the
/// start until the consumer has checked the last item.
pub fn timed_transfer(produce: impl FnOnce(), consume: impl FnOnce() + Send + 'static) -> Duration {
    pin(producer_core());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let consumer = std::thread::spawn(move || {
        pin(consumer_core());
        ready_tx.send(()).unwrap();
        consume();
        Instant::now()
    });
    ready_rx.recv().unwrap();
    let start = Instant::now();
    produce();
    let end = consumer.join().unwrap();
    end - start
}

pub fn tickwire_per_item<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = ring::<T>(CAPACITY);
    timed_transfer(
        move || {
            for seq in 0..total {
                let mut item = T::make(seq);
                while let Err(back) = tx.try_push(item) {
                    item = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                match rx.try_pop() {
                    Some(item) => {
                        assert_eq!(item.seq(), expected);
                        expected += 1;
                    }
                    None => spin_loop(),
                }
            }
        },
    )
}

pub fn tickwire_batched<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = ring::<T>(CAPACITY);
    timed_transfer(
        move || {
            let mut batch = Vec::with_capacity(BATCH);
            let mut seq = 0;
            while seq < total {
                batch.clear();
                let end = (seq + BATCH as u64).min(total);
                batch.extend((seq..end).map(T::make));
                let mut sent = 0;
                while sent < batch.len() {
                    sent += tx.push_slice(&batch[sent..]);
                }
                seq = end;
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                let got = rx.drain(BATCH, |item| {
                    assert_eq!(item.seq(), expected);
                    expected += 1;
                });
                if got == 0 {
                    spin_loop();
                }
            }
        },
    )
}

/// As `tickwire_batched`, with the consumer reading each batch in place (`read_chunk`) instead
/// of moving the items out (`drain`): the strategy stage's way of reading the event ring.
pub fn tickwire_read_chunk<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = ring::<T>(CAPACITY);
    timed_transfer(
        move || {
            let mut batch = Vec::with_capacity(BATCH);
            let mut seq = 0;
            while seq < total {
                batch.clear();
                let end = (seq + BATCH as u64).min(total);
                batch.extend((seq..end).map(T::make));
                let mut sent = 0;
                while sent < batch.len() {
                    sent += tx.push_slice(&batch[sent..]);
                }
                seq = end;
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                let chunk = rx.read_chunk(BATCH);
                if chunk.is_empty() {
                    spin_loop();
                    continue;
                }
                let (first, second) = chunk.as_slices();
                for item in first.iter().chain(second) {
                    assert_eq!(item.seq(), expected);
                    expected += 1;
                }
                chunk.commit_all();
            }
        },
    )
}

pub fn rtrb_per_item<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = rtrb::RingBuffer::<T>::new(CAPACITY);
    timed_transfer(
        move || {
            for seq in 0..total {
                let mut item = T::make(seq);
                while let Err(rtrb::PushError::Full(back)) = tx.push(item) {
                    item = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                match rx.pop() {
                    Ok(item) => {
                        assert_eq!(item.seq(), expected);
                        expected += 1;
                    }
                    Err(_) => spin_loop(),
                }
            }
        },
    )
}

pub fn rtrb_batched<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = rtrb::RingBuffer::<T>::new(CAPACITY);
    timed_transfer(
        move || {
            let mut seq = 0;
            while seq < total {
                let want = (BATCH as u64).min(total - seq) as usize;
                let Ok(chunk) = tx.write_chunk_uninit(want) else {
                    spin_loop();
                    continue;
                };
                let written = chunk.fill_from_iter((seq..).map(T::make));
                seq += written as u64;
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                let available = rx.slots().min(BATCH);
                if available == 0 {
                    spin_loop();
                    continue;
                }
                let Ok(chunk) = rx.read_chunk(available) else {
                    continue;
                };
                for item in chunk {
                    assert_eq!(item.seq(), expected);
                    expected += 1;
                }
            }
        },
    )
}

pub fn crossbeam_per_item<T: Item>(total: u64) -> Duration {
    let _layout = shifted_layout();
    let queue = Arc::new(ArrayQueue::<T>::new(CAPACITY));
    let consumer_queue = queue.clone();
    timed_transfer(
        move || {
            for seq in 0..total {
                let mut item = T::make(seq);
                while let Err(back) = queue.push(item) {
                    item = back;
                    spin_loop();
                }
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                match consumer_queue.pop() {
                    Some(item) => {
                        assert_eq!(item.seq(), expected);
                        expected += 1;
                    }
                    None => spin_loop(),
                }
            }
        },
    )
}

/// A ping-pong between this thread and an echo thread over two rings of one kind. The echo
/// thread returns every value it receives; this thread checks each reply.
pub trait PingPong: Send + 'static {
    fn send(&mut self, value: u64);
    fn recv(&mut self) -> u64;
}

pub struct TickwireEnd {
    pub tx: tickwire::ring::Producer<u64>,
    pub rx: tickwire::ring::Consumer<u64>,
}

impl PingPong for TickwireEnd {
    fn send(&mut self, value: u64) {
        while self.tx.try_push(value).is_err() {
            spin_loop();
        }
    }
    fn recv(&mut self) -> u64 {
        loop {
            if let Some(value) = self.rx.try_pop() {
                return value;
            }
            spin_loop();
        }
    }
}

pub struct RtrbEnd {
    pub tx: rtrb::Producer<u64>,
    pub rx: rtrb::Consumer<u64>,
}

impl PingPong for RtrbEnd {
    fn send(&mut self, value: u64) {
        while self.tx.push(value).is_err() {
            spin_loop();
        }
    }
    fn recv(&mut self) -> u64 {
        loop {
            if let Ok(value) = self.rx.pop() {
                return value;
            }
            spin_loop();
        }
    }
}

pub struct CrossbeamEnd {
    pub tx: Arc<ArrayQueue<u64>>,
    pub rx: Arc<ArrayQueue<u64>>,
}

impl PingPong for CrossbeamEnd {
    fn send(&mut self, value: u64) {
        while self.tx.push(value).is_err() {
            spin_loop();
        }
    }
    fn recv(&mut self) -> u64 {
        loop {
            if let Some(value) = self.rx.pop() {
                return value;
            }
            spin_loop();
        }
    }
}

/// Returns the time for `iters` round trips.
pub fn round_trips<E: PingPong>(mut near: E, mut far: E, iters: u64) -> Duration {
    pin(producer_core());
    let echo = std::thread::spawn(move || {
        pin(consumer_core());
        // u64::MAX ends the echo loop.
        loop {
            let value = far.recv();
            far.send(value);
            if value == u64::MAX {
                return;
            }
        }
    });
    // Warm the path once before timing.
    near.send(0);
    assert_eq!(near.recv(), 0);
    let start = Instant::now();
    for seq in 1..=iters {
        near.send(seq);
        assert_eq!(near.recv(), seq);
    }
    let elapsed = start.elapsed();
    near.send(u64::MAX);
    assert_eq!(near.recv(), u64::MAX);
    echo.join().unwrap();
    elapsed
}

pub const FRAME_RING_BYTES: usize = 1 << 20;
pub const FRAMES_PER_ITER: u64 = 50_000;

/// Frame `seq` is 64 + (seq % 257) bytes long, every byte `seq as u8`.
pub fn frame_len(seq: u64) -> usize {
    64 + (seq % 257) as usize
}

pub fn check_frame(seq: u64, bytes: &[u8]) {
    assert_eq!(bytes.len(), frame_len(seq));
    assert!(bytes.first() == Some(&(seq as u8)) && bytes.last() == Some(&(seq as u8)));
}

pub fn tickwire_frames(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = frame_ring(FRAME_RING_BYTES);
    timed_transfer(
        move || {
            for seq in 0..total {
                let len = frame_len(seq);
                loop {
                    if let Ok(mut grant) = tx.reserve(len) {
                        grant.buf().fill(seq as u8);
                        grant.commit(len, 0);
                        break;
                    }
                    spin_loop();
                }
            }
        },
        move || {
            let mut expected = 0;
            while expected < total {
                let got = rx.drain(BATCH, |_tag, bytes| {
                    check_frame(expected, bytes);
                    expected += 1;
                });
                if got == 0 {
                    spin_loop();
                }
            }
        },
    )
}

/// rtrb as a byte ring: a 4-byte length, then the bytes. A frame that wraps arrives in two
/// slices and is copied together, as a decoder that needs contiguous input must do.
pub fn rtrb_frames(total: u64) -> Duration {
    let _layout = shifted_layout();
    let (mut tx, mut rx) = rtrb::RingBuffer::<u8>::new(FRAME_RING_BYTES);
    timed_transfer(
        move || {
            for seq in 0..total {
                let len = frame_len(seq);
                let mut chunk = loop {
                    if let Ok(chunk) = tx.write_chunk(4 + len) {
                        break chunk;
                    }
                    spin_loop();
                };
                // The prefix, then the bytes, across the two slices a wrap may split them into.
                let prefix = (len as u32).to_le_bytes();
                let (first, second) = chunk.as_mut_slices();
                let first_len = first.len();
                for (index, byte) in first
                    .iter_mut()
                    .chain(second.iter_mut())
                    .take(4)
                    .enumerate()
                {
                    *byte = prefix[index];
                }
                if first_len >= 4 {
                    first[4..].fill(seq as u8);
                    second.fill(seq as u8);
                } else {
                    second[4 - first_len..].fill(seq as u8);
                }
                chunk.commit_all();
            }
        },
        move || {
            let mut expected = 0;
            let mut contiguous = vec![0u8; 4096];
            while expected < total {
                if rx.slots() < 4 {
                    spin_loop();
                    continue;
                }
                let mut prefix = [0u8; 4];
                {
                    let Ok(chunk) = rx.read_chunk(4) else {
                        continue;
                    };
                    let (first, second) = chunk.as_slices();
                    prefix[..first.len()].copy_from_slice(first);
                    prefix[first.len()..].copy_from_slice(second);
                    chunk.commit_all();
                }
                let len = u32::from_le_bytes(prefix) as usize;
                // The producer wrote the prefix and the bytes in one commit.
                let Ok(chunk) = rx.read_chunk(len) else {
                    panic!("frame body missing after its prefix");
                };
                let (first, second) = chunk.as_slices();
                if second.is_empty() {
                    check_frame(expected, first);
                } else {
                    contiguous[..first.len()].copy_from_slice(first);
                    contiguous[first.len()..len].copy_from_slice(second);
                    check_frame(expected, &contiguous[..len]);
                }
                chunk.commit_all();
                expected += 1;
            }
        },
    )
}

/// `iters` round trips over two rings of the named kind.
pub fn round_trip_run(ring_name: &str, iters: u64) -> Duration {
    let _layout = shifted_layout();
    match ring_name {
        "tickwire" => {
            let (a_tx, a_rx) = tickwire::ring::ring::<u64>(CAPACITY);
            let (b_tx, b_rx) = tickwire::ring::ring::<u64>(CAPACITY);
            round_trips(
                TickwireEnd { tx: a_tx, rx: b_rx },
                TickwireEnd { tx: b_tx, rx: a_rx },
                iters,
            )
        }
        "rtrb" => {
            let (a_tx, a_rx) = rtrb::RingBuffer::<u64>::new(CAPACITY);
            let (b_tx, b_rx) = rtrb::RingBuffer::<u64>::new(CAPACITY);
            round_trips(
                RtrbEnd { tx: a_tx, rx: b_rx },
                RtrbEnd { tx: b_tx, rx: a_rx },
                iters,
            )
        }
        _ => {
            let a = Arc::new(ArrayQueue::<u64>::new(CAPACITY));
            let z = Arc::new(ArrayQueue::<u64>::new(CAPACITY));
            round_trips(
                CrossbeamEnd {
                    tx: a.clone(),
                    rx: z.clone(),
                },
                CrossbeamEnd { tx: z, rx: a },
                iters,
            )
        }
    }
}

pub fn tickwire_rt(iters: u64) -> Duration {
    round_trip_run("tickwire", iters)
}
pub fn rtrb_rt(iters: u64) -> Duration {
    round_trip_run("rtrb", iters)
}
pub fn crossbeam_rt(iters: u64) -> Duration {
    round_trip_run("crossbeam", iters)
}
