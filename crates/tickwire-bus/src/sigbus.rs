//! A reader survives its bus file being truncated under it: an error, never a SIGBUS; and so does
//! the writer, the appliance.
//!
//! A mapped page past the end of a truncated file raises SIGBUS when touched. Readers cannot
//! truncate the file (they open it read-only and it is not theirs), but its owner or root can. On
//! the first mapping this module installs a SIGBUS handler for the process. When the fault lies
//! in a registered bus mapping, the handler maps a private page of zeros over the faulting page
//! (so that the load or store completes), marks the mapping as truncated and returns; the reader
//! checks the mark after every read and reports
//! [`ReadError::Truncated`](crate::ReadError::Truncated), the writer's control thread reports it
//! in its metrics. Any other SIGBUS goes to the handler
//! that was installed before, or, if there was none, to the default action, exactly as if this
//! handler did not exist.
//!
//! # Why the handler is sound
//!
//! 1. *It only ever replaces a page of a live bus mapping.* A mapping's slot is a small state
//!    machine: `FREE`, `BUSY` (its owner is writing or clearing `start` and `len`), or `LIVE + n`
//!    where `n` is the number of handlers using it right now. The handler *pins* a slot by
//!    raising `LIVE + n` to `LIVE + n + 1` with a compare-and-swap (it skips `FREE` and `BUSY`
//!    slots), reads `start` and `len`, maps its page if the fault lies inside, and unpins. The
//!    owner releases a slot, before it unmaps, only by moving it from exactly `LIVE` (no handler
//!    inside) to `BUSY`, spinning while a handler holds it (a handler holds it for one system
//!    call). So between a handler's pin and unpin the mapping cannot be released, let alone
//!    unmapped, and its `start` and `len` are the ones its owner registered (written while
//!    `BUSY`, published by the Release store of `LIVE` that the pin's Acquire reads). The page
//!    replaced is therefore inside a mapping that is still ours: the `MAP_FIXED` cannot cover an
//!    unrelated page that a concurrent `munmap` and `mmap` put at the same address.
//! 2. *The page is the real page.* The page size is the system's (`sysconf(_SC_PAGESIZE)`), read
//!    before the handler is installed. A mapping starts on a page boundary and covers whole pages,
//!    so the faulting page lies entirely inside it.
//! 3. *Only real faults are handled.* A SIGBUS sent by `kill` or `sigqueue` (`si_code` not
//!    `BUS_ADRERR`) carries no fault address; it is passed on untouched.
//! 4. *Nothing in the handler needs a lock or allocates.* POSIX does not list `mmap` among the
//!    async-signal-safe functions, so the handler does not call the C library's `mmap`: it makes
//!    the system call itself (`syscall(SYS_mmap, ...)`, a trap into the kernel that touches no
//!    user-space state but `errno`, which the handler saves and restores). Everything else it
//!    does is atomic loads, stores and compare-and-swaps on a static table. The signal is also
//!    synchronous: it interrupts the faulting thread inside one of this crate's atomic loads or
//!    stores on the mapping (the ring, the directory, the header), code that holds no lock.
//!
//! A process can protect [`SLOTS`] mappings at once; mapping a bus beyond that fails with an
//! error rather than going unprotected.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings a process can protect at once.
pub(crate) const SLOTS: usize = 1024;

/// No mapping: `register` may claim the slot.
const FREE: u32 = 0;
/// Its owner is setting it up or clearing it: the handler skips it.
const BUSY: u32 = 1;
/// Registered, with no handler inside; `LIVE + n` while `n` handlers use it.
const LIVE: u32 = 2;

struct Slot {
    state: AtomicU32,
    start: AtomicUsize,
    len: AtomicUsize,
    truncated: AtomicBool,
}

#[allow(
    clippy::declare_interior_mutable_const,
    reason = "the const only initializes the static array below, each element once"
)]
const EMPTY: Slot = Slot {
    state: AtomicU32::new(FREE),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    truncated: AtomicBool::new(false),
};

static SLOT_TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();
/// The system's page size, stored before the handler is installed; 0 until then.
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The handler that was installed before ours (a `libc::sigaction` kept as bytes in a static).
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static PREVIOUS_SET: AtomicBool = AtomicBool::new(false);

/// A registered mapping. Release it ([`Guard::release`], or drop it) before unmapping.
pub(crate) struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Whether a page of the mapping was found truncated.
    #[inline]
    pub(crate) fn truncated(&self) -> bool {
        self.slot
            .is_some_and(|slot| SLOT_TABLE[slot].truncated.load(Ordering::Relaxed))
    }

    /// Stops protecting the mapping: when this returns, no handler is inside the slot and none
    /// will touch the mapping again, so it may be unmapped.
    pub(crate) fn release(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let entry = &SLOT_TABLE[slot];
        // From exactly LIVE: a handler that holds the slot (LIVE + n) is inside one system call.
        while entry
            .state
            .compare_exchange_weak(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        entry.start.store(0, Ordering::Relaxed);
        entry.len.store(0, Ordering::Relaxed);
        entry.truncated.store(false, Ordering::Relaxed);
        entry.state.store(FREE, Ordering::Release);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.release();
    }
}

/// Protects `len` bytes at `start` (a fresh mapping, page-aligned, not touched yet) from here
/// on; `None` when every slot is taken.
pub(crate) fn register(start: *const u8, len: usize) -> Option<Guard> {
    INSTALL.call_once(install);
    for (index, entry) in SLOT_TABLE.iter().enumerate() {
        if entry
            .state
            .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            entry.start.store(start as usize, Ordering::Relaxed);
            entry.len.store(len, Ordering::Relaxed);
            entry.truncated.store(false, Ordering::Relaxed);
            // Publishes start and len to the handler's pin (an Acquire compare-and-swap).
            entry.state.store(LIVE, Ordering::Release);
            return Some(Guard { slot: Some(index) });
        }
    }
    None
}

fn install() {
    // SAFETY: sysconf takes no memory.
    let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page_size = usize::try_from(page_size)
        .ok()
        .filter(|size| size.is_power_of_two())
        .unwrap_or(4096);
    PAGE_SIZE.store(page_size, Ordering::Release);
    // SAFETY: `sigaction` with a zeroed struct, our handler and SA_SIGINFO; the previous action
    // is written to `PREVIOUS` before any fault can reach our handler that reads it (the handler
    // checks `PREVIOUS_SET`, stored after).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: on the thread's alternate stack where it has one (Rust's main thread
        // does), as the handler we may pass the signal on to expects.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = &raw mut PREVIOUS;
        if libc::sigaction(libc::SIGBUS, &action, (*previous).as_mut_ptr()) == 0 {
            PREVIOUS_SET.store(true, Ordering::SeqCst);
        }
    }
}

/// Pins `entry` if it is live: the mapping cannot be released until [`unpin`].
fn pin(entry: &Slot) -> bool {
    let mut state = entry.state.load(Ordering::Relaxed);
    loop {
        if state < LIVE {
            return false;
        }
        match entry.state.compare_exchange_weak(
            state,
            state + 1,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(now) => state = now,
        }
    }
}

fn unpin(entry: &Slot) {
    entry.state.fetch_sub(1, Ordering::Release);
}

/// Maps a private page of zeros at `page` with the mmap system call itself (not the C library's
/// wrapper), keeping `errno` as the interrupted code left it.
///
/// # Safety
///
/// `page..page + page_size` lies inside a mapping of this process that no other thread can unmap
/// meanwhile, and whose contents no one relies on any more (the file behind it is gone).
unsafe fn zero_page(page: usize, page_size: usize) -> bool {
    #[cfg(target_pointer_width = "64")]
    const SYS_MMAP: libc::c_long = libc::SYS_mmap;
    #[cfg(not(target_pointer_width = "64"))]
    const SYS_MMAP: libc::c_long = libc::SYS_mmap2;
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life; the
    // system call replaces exactly the page the caller vouches for.
    unsafe {
        let errno = libc::__errno_location();
        let saved = *errno;
        let mapped = libc::syscall(
            SYS_MMAP,
            page as *mut libc::c_void,
            page_size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1 as libc::c_int,
            0 as libc::off_t,
        );
        *errno = saved;
        mapped as usize == page
    }
}

extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler; `si_addr` is the
    // faulting address for a fault (BUS_ADRERR), checked before it is used.
    let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let page_size = PAGE_SIZE.load(Ordering::Acquire);
    if code == libc::BUS_ADRERR && page_size != 0 {
        for entry in &SLOT_TABLE {
            if !pin(entry) {
                continue;
            }
            let start = entry.start.load(Ordering::Relaxed);
            let len = entry.len.load(Ordering::Relaxed);
            let ours = address >= start && address - start < len;
            let repaired = ours && {
                let page = address & !(page_size - 1);
                // SAFETY: the page holds `address`, inside a registered bus mapping (checked)
                // that starts on a page and covers whole pages, and that stays mapped while the
                // slot is pinned (module doc, 1); its file was truncated under it, so what the
                // page held is gone: a reader that touched it reads zeros, which its checks
                // reject, and sees the mark; the writer's stores land where no reader looks.
                unsafe { zero_page(page, page_size) }
            };
            if repaired {
                entry.truncated.store(true, Ordering::Relaxed);
            }
            unpin(entry);
            if repaired {
                return;
            }
            if ours {
                break;
            }
        }
    }
    // Not ours: what would have happened without this handler.
    // SAFETY: `PREVIOUS` was written before `PREVIOUS_SET` was stored (`install`), and is never
    // written again; calling the previous handler the way the kernel would, or restoring the
    // default action and returning so that the fault repeats under it.
    unsafe {
        if PREVIOUS_SET.load(Ordering::SeqCst) {
            let previous: &libc::sigaction = &*(&raw const PREVIOUS).cast::<libc::sigaction>();
            let handler = previous.sa_sigaction;
            if handler == libc::SIG_IGN && code <= 0 {
                // Sent, and ignored before this handler came.
                return;
            }
            if handler == libc::SIG_IGN || handler == libc::SIG_DFL {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
                if code <= 0 {
                    // Sent, not a fault: returning would not repeat it; send it again under
                    // the default action.
                    libc::raise(libc::SIGBUS);
                }
                return;
            }
            if previous.sa_flags & libc::SA_SIGINFO != 0 {
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                handler(signal, info, context);
            } else {
                let handler: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                handler(signal);
            }
        } else {
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            if code <= 0 {
                libc::raise(libc::SIGBUS);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_claimed_released_and_reused() {
        let first = register(0x1000 as *const u8, 4096).expect("a free slot");
        let index = first.slot.unwrap();
        assert_eq!(SLOT_TABLE[index].state.load(Ordering::SeqCst), LIVE);
        assert!(!first.truncated());
        drop(first);
        assert_eq!(SLOT_TABLE[index].state.load(Ordering::SeqCst), FREE);
        assert!(PAGE_SIZE.load(Ordering::SeqCst).is_power_of_two());
    }

    #[test]
    fn a_pinned_slot_holds_off_its_release_until_unpinned() {
        let guard = register(0x2000 as *const u8, 4096).expect("a free slot");
        let entry = &SLOT_TABLE[guard.slot.unwrap()];
        assert!(pin(entry));
        let released = std::sync::Arc::new(AtomicBool::new(false));
        let thread = {
            let released = std::sync::Arc::clone(&released);
            std::thread::spawn(move || {
                let mut guard = guard;
                guard.release();
                released.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !released.load(Ordering::SeqCst),
            "released while a handler held the slot"
        );
        assert_eq!(entry.start.load(Ordering::SeqCst), 0x2000);
        unpin(entry);
        thread.join().unwrap();
        assert!(released.load(Ordering::SeqCst));
    }
}
