//! The one clock every system's stamps come from, and core pinning.
//!
//! On x86-64 the stamp is the TSC (`lfence; rdtsc`): one instruction, the same counter on every
//! core of a host whose CPU flags say `constant_tsc nonstop_tsc` (the kernel uses it as its
//! clocksource only when the cores agree). Elsewhere it is CLOCK_MONOTONIC through the vDSO.
//! Ticks become nanoseconds with a rate the parent measures once against CLOCK_MONOTONIC and
//! hands to every child, so all three systems are converted alike.

use std::time::Duration;

/// The clock's name, for the report.
pub fn source() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "TSC (lfence; rdtsc), the same counter read by writer and reader"
    } else {
        "CLOCK_MONOTONIC"
    }
}

/// Now, in ticks of the clock `source` names.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `lfence` and `rdtsc` are baseline x86-64 instructions with no memory operands;
        // the fence keeps the counter read from being hoisted above the loads before it.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Ticks per nanosecond, measured against CLOCK_MONOTONIC over `span`.
pub fn calibrate(span: Duration) -> f64 {
    let (ticks0, ns0) = (ticks(), monotonic_ns());
    std::thread::sleep(span);
    let (ticks1, ns1) = (ticks(), monotonic_ns());
    (ticks1 - ticks0) as f64 / (ns1 - ns0) as f64
}

/// Pins the calling thread to `core`; the error says which core could not be had.
pub fn pin(core: usize) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it for any core below
    // CPU_SETSIZE, checked first; sched_setaffinity reads `size_of` bytes of the set.
    unsafe {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(format!("core {core} is past CPU_SETSIZE"));
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "cannot pin to core {core}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
