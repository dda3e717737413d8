//! A reader survives its bus file being truncated under it: an error, never a SIGBUS.
//!
//! A mapped page past the end of a truncated file raises SIGBUS when touched. Readers cannot
//! truncate the file (they open it read-only), but its owner or root can. On a reader's first
//! open this module installs a SIGBUS handler for the process. When the faulting address lies
//! in a registered bus mapping, the handler maps a page of zeros over the faulting page (so the
//! load completes), marks the mapping as truncated, and returns; the reader checks the mark after
//! every read and reports [`ReadError::Truncated`](crate::ReadError::Truncated). A fault anywhere
//! else goes to the handler that was installed before, or, if there was none, to the default
//! action, exactly as if this handler did not exist.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings a process can register at once; a reader past this is simply not protected (it
/// still works).
const SLOTS: usize = 64;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    truncated: AtomicBool,
}

#[allow(
    clippy::declare_interior_mutable_const,
    reason = "the const only initializes the static array below, each element once"
)]
const EMPTY: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    truncated: AtomicBool::new(false),
};

static SLOT_TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();
/// The handler that was installed before ours (a `libc::sigaction` kept as bytes in a static).
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static PREVIOUS_SET: AtomicBool = AtomicBool::new(false);

/// A registered mapping; unregistered on drop.
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
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            let entry = &SLOT_TABLE[slot];
            entry.len.store(0, Ordering::SeqCst);
            entry.truncated.store(false, Ordering::SeqCst);
            entry.start.store(0, Ordering::SeqCst);
        }
    }
}

/// Protects `len` bytes at `start` from here on.
pub(crate) fn register(start: *const u8, len: usize) -> Guard {
    INSTALL.call_once(install);
    for (index, entry) in SLOT_TABLE.iter().enumerate() {
        if entry
            .start
            .compare_exchange(0, start as usize, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            entry.truncated.store(false, Ordering::SeqCst);
            entry.len.store(len, Ordering::SeqCst);
            return Guard { slot: Some(index) };
        }
    }
    Guard { slot: None }
}

fn install() {
    // SAFETY: `sigaction` with a zeroed struct, our handler and SA_SIGINFO; the previous action
    // is written to `PREVIOUS` before any fault can reach our handler that reads it (the handler
    // checks `PREVIOUS_SET`, stored after).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = &raw mut PREVIOUS;
        if libc::sigaction(libc::SIGBUS, &action, (*previous).as_mut_ptr()) == 0 {
            PREVIOUS_SET.store(true, Ordering::SeqCst);
        }
    }
}

extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let address = unsafe { (*info).si_addr() } as usize;
    for entry in &SLOT_TABLE {
        let start = entry.start.load(Ordering::SeqCst);
        let len = entry.len.load(Ordering::SeqCst);
        if start != 0 && address >= start && address < start + len {
            let page = address & !4095;
            // SAFETY: replaces one page of a mapping this process made read-only and still
            // holds (it is registered) with private zeros; the reader that touched it then reads
            // zeros, which its checks reject, and sees the truncation mark. mmap is a plain
            // system call, safe to make from a handler.
            let mapped = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if mapped != libc::MAP_FAILED {
                entry.truncated.store(true, Ordering::SeqCst);
                return;
            }
        }
    }
    // Not ours: what would have happened without this handler.
    // SAFETY: `PREVIOUS` was written before `PREVIOUS_SET` was stored (`install`), and is never
    // written again; calling the previous handler the way the kernel would, or restoring the
    // default action and returning so that the fault repeats under it.
    unsafe {
        if PREVIOUS_SET.load(Ordering::SeqCst) {
            let previous = &*(&raw const PREVIOUS).cast::<libc::sigaction>();
            let handler = previous.sa_sigaction;
            if handler == libc::SIG_IGN || handler == libc::SIG_DFL {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
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
        }
    }
}
