//! How a hot thread waits when its rings are empty.
//!
//! - `Spin`: never leaves the CPU; lowest latency, burns a core. Only for an isolated core.
//! - `SpinThenYield`: spins for a while, then `sched_yield`s between polls, so a thread sharing
//!   its core with others still lets them run (the default: safe on a 2-core VM).
//! - `Park`: spins for a while, then sleeps in `park_timeout` until a producer wakes it through a
//!   [`Wakeup`] or the timeout passes. Costs a wake-up (tens of microseconds on a VM) per burst,
//!   spends no CPU while idle.
//!
//! The park protocol is the classic eventcount: the waiter announces it is about to sleep, then
//! re-checks for work, then sleeps; a producer publishes, then looks for the announcement. With a
//! `SeqCst` fence on both sides at least one of them sees the other, so a wake-up is never lost;
//! the timeout bounds the damage of any bug here all the same.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

/// A wait strategy, from the thread's config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStrategy {
    Spin,
    SpinThenYield { spins: u32 },
    Park { spins: u32, timeout: Duration },
}

struct ParkState {
    /// Set by the waiter just before it sleeps; read by producers after they publish.
    sleeping: CachePadded<AtomicBool>,
    thread: Thread,
}

/// Owned by the waiting thread: call [`Waiter::idle`] when a poll found nothing and
/// [`Waiter::reset`] when it found work.
pub struct Waiter {
    strategy: WaitStrategy,
    idle_polls: u32,
    park: Arc<ParkState>,
}

/// Lets a producer wake a parked consumer. Cheap to call when nobody sleeps: one load.
#[derive(Clone)]
pub struct Wakeup {
    park: Arc<ParkState>,
}

impl Waiter {
    /// A waiter for the calling thread.
    pub fn new(strategy: WaitStrategy) -> Waiter {
        Waiter {
            strategy,
            idle_polls: 0,
            park: Arc::new(ParkState {
                sleeping: CachePadded::new(AtomicBool::new(false)),
                thread: std::thread::current(),
            }),
        }
    }

    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// A handle producers use to wake this thread when it parks.
    pub fn wakeup(&self) -> Wakeup {
        Wakeup {
            park: self.park.clone(),
        }
    }

    /// Work was found: the next idle period starts spinning again.
    #[inline]
    pub fn reset(&mut self) {
        self.idle_polls = 0;
    }

    /// A poll found nothing: wait as the strategy says. `has_work` is asked again after the
    /// thread announced it will park, so that work published in between is not slept through.
    #[inline]
    pub fn idle(&mut self, has_work: impl FnOnce() -> bool) {
        match self.strategy {
            WaitStrategy::Spin => std::hint::spin_loop(),
            WaitStrategy::SpinThenYield { spins } => {
                if self.idle_polls < spins {
                    self.idle_polls += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            WaitStrategy::Park { spins, timeout } => {
                if self.idle_polls < spins {
                    self.idle_polls += 1;
                    std::hint::spin_loop();
                    return;
                }
                self.park.sleeping.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if !has_work() {
                    std::thread::park_timeout(timeout);
                }
                self.park.sleeping.store(false, Ordering::Relaxed);
            }
        }
    }
}

impl Wakeup {
    /// Call after publishing to the waiter's ring: unparks it if it is asleep.
    #[inline]
    pub fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.park.sleeping.load(Ordering::Relaxed) {
            self.park.thread.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::ring;
    use std::time::Instant;

    /// A park timeout no delivery can reach unless a wake-up was lost.
    const PARK_TIMEOUT: Duration = Duration::from_secs(120);
    /// How long a delivery may take before the test calls its wake-ups lost. A delivery takes
    /// well under a second even on a loaded 2-core machine; a lost wake-up leaves the consumer
    /// parked for `PARK_TIMEOUT`, four times longer. A liveness bound, not a latency check.
    const DELIVERY_BOUND: Duration = Duration::from_secs(30);

    /// Runs a consumer with `strategy` against a producer that sends `total` items in bursts
    /// and checks they all arrive in order within `DELIVERY_BOUND`: the waiting must never lose
    /// or stall delivery.
    fn deliver_all(strategy: WaitStrategy, total: u64) {
        let started = Instant::now();
        let (mut tx, mut rx) = ring::<u64>(16);
        let (wakeup_tx, wakeup_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let consumer = std::thread::spawn(move || {
            let mut waiter = Waiter::new(strategy);
            wakeup_tx.send(waiter.wakeup()).unwrap();
            let mut expected = 0;
            while expected < total {
                match rx.try_pop() {
                    Some(item) => {
                        assert_eq!(item, expected);
                        expected += 1;
                        waiter.reset();
                    }
                    None => waiter.idle(|| !rx.is_empty()),
                }
            }
            done_tx.send(()).unwrap();
        });
        let wakeup = wakeup_rx.recv().unwrap();
        let mut next = 0;
        while next < total {
            if tx.try_push(next).is_ok() {
                next += 1;
                wakeup.wake();
            } else {
                // The ring is full: the consumer must wake and drain it.
                assert!(
                    started.elapsed() < DELIVERY_BOUND,
                    "{strategy:?}: the consumer stopped draining at item {next}: a lost wake-up"
                );
                std::thread::yield_now();
            }
            if next % 100 == 0 {
                // A pause long enough for the consumer to park.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let left = DELIVERY_BOUND.saturating_sub(started.elapsed());
        assert!(
            done_rx.recv_timeout(left).is_ok(),
            "{strategy:?}: the last items were not delivered within {DELIVERY_BOUND:?}: a lost wake-up"
        );
        consumer.join().unwrap();
    }

    #[test]
    fn every_strategy_delivers_everything() {
        deliver_all(WaitStrategy::SpinThenYield { spins: 100 }, 20_000);
        deliver_all(
            WaitStrategy::Park {
                spins: 10,
                timeout: PARK_TIMEOUT,
            },
            20_000,
        );
    }

    #[test]
    fn a_parked_thread_wakes_on_wakeup_not_on_timeout() {
        let (mut tx, mut rx) = ring::<u64>(4);
        let (wakeup_tx, wakeup_rx) = std::sync::mpsc::channel();
        let consumer = std::thread::spawn(move || {
            let mut waiter = Waiter::new(WaitStrategy::Park {
                spins: 0,
                timeout: Duration::from_secs(60),
            });
            wakeup_tx.send(waiter.wakeup()).unwrap();
            loop {
                if let Some(item) = rx.try_pop() {
                    return item;
                }
                waiter.idle(|| !rx.is_empty());
            }
        });
        let wakeup = wakeup_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let sent = Instant::now();
        tx.try_push(5).unwrap();
        wakeup.wake();
        assert_eq!(consumer.join().unwrap(), 5);
        // Not a timing assertion on latency: only that it did not wait out the 60 s timeout.
        assert!(sent.elapsed() < Duration::from_secs(30));
    }
}
