//! SIGINT and SIGTERM for the commands that run until stopped.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Blocks SIGINT and SIGTERM (before any other thread starts, so that every thread inherits the
/// mask) and sets the returned flag when one comes, from a thread of its own; `None`, said on
/// stderr as `tickwire COMMAND: ...`, when the signals cannot be blocked.
pub fn stop_flag(command: &str) -> Option<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    match StopSignals::block() {
        Ok(signals) => {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || loop {
                match signals.wait(Duration::from_secs(1)) {
                    Ok(Some(_)) => {
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(None) => {}
                    Err(_) => return,
                }
            });
        }
        Err(error) => {
            eprintln!("tickwire {command}: {error}");
            return None;
        }
    }
    Some(stop)
}

/// SIGINT and SIGTERM, blocked for the whole process and taken synchronously: with
/// [`StopSignals::wait`], or through a signalfd ([`StopSignals::fd`]) that the control thread
/// sleeps on beside its own wake-ups (`Session::wait`).
pub struct StopSignals {
    set: libc::sigset_t,
    /// Readable while a stop signal is pending; non-blocking.
    fd: Option<OwnedFd>,
}

impl StopSignals {
    pub fn block() -> anyhow::Result<StopSignals> {
        // SAFETY: a zeroed sigset_t is a valid argument to sigemptyset, which initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t; the signal numbers are valid; the old mask pointer
        // may be null.
        let result = unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
        };
        if result != 0 {
            anyhow::bail!(
                "blocking SIGINT/SIGTERM failed: {}",
                std::io::Error::from_raw_os_error(result)
            );
        }
        // SAFETY: `set` is an initialised sigset_t; -1 asks for a new descriptor.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            anyhow::bail!("signalfd failed: {}", std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by signalfd and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(StopSignals { set, fd: Some(fd) })
    }

    /// A descriptor that becomes readable when a stop signal is pending; then
    /// [`StopSignals::take`] says which.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// The pending stop signal, if one is pending (without waiting).
    pub fn take(&self) -> anyhow::Result<Option<i32>> {
        self.wait(Duration::ZERO)
    }

    /// From now on, another stop signal ends the process at once (exit 128 + signal), while
    /// the first one's clean stop is under way.
    pub fn exit_on_next(&self) {
        let waiter = StopSignals {
            set: self.set,
            fd: None,
        };
        std::thread::spawn(move || loop {
            match waiter.wait(Duration::from_secs(1)) {
                Ok(Some(signal)) => {
                    eprintln!("tickwire: second signal ({signal}): exiting at once");
                    std::process::exit(128 + signal);
                }
                Ok(None) => {}
                Err(_) => return,
            }
        });
    }

    /// Waits up to `timeout` for a stop signal; `Some(signal)` when one came.
    pub fn wait(&self, timeout: Duration) -> anyhow::Result<Option<i32>> {
        let timeout = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `set` was initialised in `block`; the info pointer may be null; `timeout` is a
        // valid timespec.
        let signal = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &timeout) };
        if signal > 0 {
            return Ok(Some(signal));
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(anyhow::anyhow!("waiting for signals failed: {error}")),
        }
    }
}
