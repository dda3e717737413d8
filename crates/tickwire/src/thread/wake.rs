//! How the control thread sleeps between its duties and who wakes it.
//!
//! The control thread used to wake every 20 ms tick and find what had happened since, so each
//! step of a reconnect (the close seen, the next attempt, TCP up, TLS done, the upgrade, the
//! acknowledgement) waited for a tick: 35-40 ms to recover from a clean close on loopback, of
//! which the set-up itself took 2 (issue 24). Now it sleeps in `poll(2)` on an eventfd, and
//! whoever hands it work writes to the eventfd: the network thread after a status, the decoder
//! after a venue's reply or a snapshot request, the resolver and snapshot workers after a reply.
//! The tick remains, for timers and routine work.
//!
//! A hot thread must not make a syscall per message, so [`ControlWakeup::wake`] follows the
//! eventcount protocol of `thread::wait`: the control thread announces it is about to sleep,
//! checks its rings once more, then sleeps; a producer publishes, then writes to the eventfd only
//! if it sees the announcement. With a `SeqCst` fence on both sides at least one of them sees the
//! other, so no wake-up is lost, and while the control thread is busy producers pay one load.
//! The workers, off the hot path, use [`ControlWakeup::notify`], which always writes: their
//! replies travel on channels the control thread cannot peek at, and the eventfd's counter keeps
//! a write made while the control thread was busy until it next sleeps.

use crossbeam_utils::CachePadded;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Shared {
    /// Set by the control thread just before it sleeps; read by hot producers after they
    /// publish.
    sleeping: CachePadded<AtomicBool>,
    /// Non-blocking, close-on-exec.
    eventfd: OwnedFd,
}

/// The control thread's end: it sleeps in [`ControlWait::wait`].
pub struct ControlWait {
    shared: Arc<Shared>,
}

/// A producer's end: wakes the control thread.
#[derive(Clone)]
pub struct ControlWakeup {
    shared: Arc<Shared>,
}

/// What ended a [`ControlWait::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// A producer woke it, or work was already waiting.
    Work,
    /// The extra file descriptor became readable.
    Extra,
    /// The timeout passed.
    Timeout,
}

impl ControlWait {
    pub fn new() -> std::io::Result<ControlWait> {
        // SAFETY: eventfd takes no pointers; a negative result is an error, checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ControlWait {
            shared: Arc::new(Shared {
                sleeping: CachePadded::new(AtomicBool::new(false)),
                eventfd,
            }),
        })
    }

    /// A handle for a producer.
    pub fn wakeup(&self) -> ControlWakeup {
        ControlWakeup {
            shared: self.shared.clone(),
        }
    }

    /// Sleeps until a producer wakes this thread, `extra` (a signalfd, say) becomes readable, or
    /// `timeout` passes. `has_work` is asked after the thread announced it will sleep, so that
    /// work a hot producer published meanwhile (without writing to the eventfd) is not slept
    /// through.
    pub fn wait(
        &self,
        timeout: Duration,
        extra: Option<BorrowedFd<'_>>,
        has_work: impl FnOnce() -> bool,
    ) -> std::io::Result<Woken> {
        let shared = &*self.shared;
        shared.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let woken = if has_work() {
            Ok(Woken::Work)
        } else {
            self.poll(timeout, extra)
        };
        shared.sleeping.store(false, Ordering::Relaxed);
        self.drain();
        woken
    }

    fn poll(&self, timeout: Duration, extra: Option<BorrowedFd<'_>>) -> std::io::Result<Woken> {
        let mut fds = [
            libc::pollfd {
                fd: self.shared.eventfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: extra.map_or(-1, |fd| fd.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // Round up, so that a timer due in 0.3 ms is not polled for with 0 ms again and again.
        let timeout_ms = timeout.as_micros().div_ceil(1_000).min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call; a negative
        // fd is ignored by poll.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            return if error.kind() == std::io::ErrorKind::Interrupted {
                Ok(Woken::Work)
            } else {
                Err(error)
            };
        }
        Ok(if fds[1].revents != 0 {
            Woken::Extra
        } else if fds[0].revents != 0 {
            Woken::Work
        } else {
            Woken::Timeout
        })
    }

    /// Resets the eventfd's counter, so the next wait sleeps until a new write.
    fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: `count` is 8 writable bytes, what an eventfd read takes; the fd is non-blocking,
        // so an empty counter returns EAGAIN at once, which is ignored.
        let _ = unsafe {
            libc::read(
                self.shared.eventfd.as_raw_fd(),
                count.as_mut_ptr().cast(),
                count.len(),
            )
        };
    }
}

impl ControlWakeup {
    /// For a hot producer, after it published to one of the control thread's rings: writes to
    /// the eventfd only if the control thread sleeps (one load otherwise).
    #[inline]
    pub fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.shared.sleeping.load(Ordering::Relaxed) {
            self.write();
        }
    }

    /// For a worker off the hot path, after it sent a reply: always writes, so the control
    /// thread wakes now or does not sleep at its next wait.
    pub fn notify(&self) {
        self.write();
    }

    fn write(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is the 8 bytes an eventfd write takes; the fd is non-blocking, so a
        // counter at its maximum returns EAGAIN at once, and a wake-up is pending anyway.
        let _ = unsafe {
            libc::write(
                self.shared.eventfd.as_fd().as_raw_fd(),
                one.as_ptr().cast(),
                one.len(),
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A timeout no wake-up can reach unless it was lost. A liveness bound, not a latency check.
    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn a_wakeup_ends_the_wait_before_its_timeout() {
        let wait = ControlWait::new().unwrap();
        let wakeup = wait.wakeup();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            wakeup.notify();
        });
        let started = Instant::now();
        assert_eq!(wait.wait(LONG, None, || false).unwrap(), Woken::Work);
        assert!(started.elapsed() < LONG / 2);
        waker.join().unwrap();
    }

    #[test]
    fn a_notify_made_while_busy_is_kept_for_the_next_wait() {
        let wait = ControlWait::new().unwrap();
        wait.wakeup().notify();
        assert_eq!(wait.wait(LONG, None, || false).unwrap(), Woken::Work);
        // Drained: the next wait sleeps until its timeout.
        assert_eq!(
            wait.wait(Duration::from_millis(1), None, || false).unwrap(),
            Woken::Timeout
        );
    }

    #[test]
    fn work_found_after_the_announcement_is_not_slept_through() {
        let wait = ControlWait::new().unwrap();
        // `wake` from a hot producer while nobody sleeps writes nothing ...
        wait.wakeup().wake();
        assert_eq!(
            wait.wait(Duration::from_millis(1), None, || false).unwrap(),
            Woken::Timeout
        );
        // ... which is sound because the waiter checks its rings after announcing its sleep.
        assert_eq!(wait.wait(LONG, None, || true).unwrap(), Woken::Work);
    }

    #[test]
    fn a_hot_producer_wakes_a_sleeping_waiter() {
        let wait = ControlWait::new().unwrap();
        let wakeup = wait.wakeup();
        let published = Arc::new(AtomicBool::new(false));
        let flag = published.clone();
        let producer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            flag.store(true, Ordering::Relaxed);
            wakeup.wake();
        });
        let started = Instant::now();
        while !published.load(Ordering::Relaxed) {
            wait.wait(LONG, None, || published.load(Ordering::Relaxed))
                .unwrap();
            assert!(started.elapsed() < LONG / 2, "a lost wake-up");
        }
        producer.join().unwrap();
    }

    #[test]
    fn an_extra_descriptor_ends_the_wait() {
        let wait = ControlWait::new().unwrap();
        let other = ControlWait::new().unwrap();
        other.wakeup().notify();
        assert_eq!(
            wait.wait(LONG, Some(other.shared.eventfd.as_fd()), || false)
                .unwrap(),
            Woken::Extra
        );
    }
}
