//! Receive timestamps: nanoseconds since the Unix epoch, read from the invariant TSC.
//!
//! `clock_gettime` through the vDSO costs tens of nanoseconds and, on some VMs, a trap into the
//! hypervisor; `rdtsc` costs a few. At start [`Clock::calibrate`] measures the TSC rate against
//! `CLOCK_REALTIME` and stores it as a multiply-and-shift, so [`Clock::now_ns`] is one `rdtsc`,
//! one 128-bit multiply and an add: no division, no syscall, no shared state.
//!
//! When the CPU does not promise an invariant TSC (CPUID leaf 0x8000_0007, EDX bit 8: the TSC runs
//! at a constant rate in every P-, C- and T-state), or on other architectures, the clock falls
//! back to `CLOCK_MONOTONIC` plus the offset to `CLOCK_REALTIME` measured at start. Both sources
//! are therefore monotonic (an NTP step after start does not move them) and epoch-based.

use std::time::Duration;

/// Where a [`Clock`] reads time from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The invariant TSC, scaled to ns.
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC)` plus the realtime offset taken at calibration.
    Monotonic,
}

/// A calibrated, copyable clock; every thread keeps its own copy (no shared cache line).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    source: ClockSource,
    /// Realtime ns at `base_ticks` (TSC) or the realtime-minus-monotonic offset (Monotonic).
    base_ns: i128,
    base_ticks: u64,
    /// ns = ticks * mult >> SHIFT.
    mult: u64,
    /// The measured TSC frequency in Hz, for reports (0 for `Monotonic`).
    tsc_hz: u64,
}

/// Fraction bits of the ticks-to-ns multiplier. At a 3 GHz TSC the multiplier is about 1.4e9, so
/// its rounding error is under 1e-9 relative; `delta * mult` fits in u128 for any 63-bit delta.
const SHIFT: u32 = 32;

/// How long calibration watches both clocks. Longer is more accurate: the error of one read is
/// about a microsecond on a busy VM, so 50 ms bounds the rate error near 20 ppm before the
/// refinement below, which uses the best of several bracketed reads.
const CALIBRATION: Duration = Duration::from_millis(50);

impl Clock {
    /// Measures the TSC against the system clock (about 50 ms) if the CPU has an invariant TSC,
    /// otherwise sets up the monotonic fallback. Call once at start, off the hot path.
    pub fn calibrate() -> Clock {
        if tsc::invariant() {
            Clock::calibrate_tsc()
        } else {
            Clock::monotonic()
        }
    }

    /// The `CLOCK_MONOTONIC` clock, offset to the epoch; also what `calibrate` falls back to.
    pub fn monotonic() -> Clock {
        // The offset is taken between two monotonic reads; the tightest pair of a few tries wins.
        let mut best: Option<(i128, i128)> = None;
        for _ in 0..16 {
            let before = monotonic_ns();
            let real = realtime_ns();
            let after = monotonic_ns();
            let width = after - before;
            let offset = real - (before + width / 2);
            if best.is_none_or(|(best_width, _)| width < best_width) {
                best = Some((width, offset));
            }
        }
        let (_, offset) = best.unwrap_or((0, realtime_ns() - monotonic_ns()));
        Clock {
            source: ClockSource::Monotonic,
            base_ns: offset,
            base_ticks: 0,
            mult: 0,
            tsc_hz: 0,
        }
    }

    fn calibrate_tsc() -> Clock {
        let (start_ticks, start_ns) = bracketed_pair();
        std::thread::sleep(CALIBRATION);
        let (end_ticks, end_ns) = bracketed_pair();
        let ticks = end_ticks.wrapping_sub(start_ticks);
        let elapsed_ns = end_ns - start_ns;
        if ticks == 0 || elapsed_ns <= 0 {
            // A TSC that does not advance, or a clock stepped backwards mid-calibration: do not
            // trust either; the monotonic clock is always correct.
            return Clock::monotonic();
        }
        let mult = ((elapsed_ns as u128) << SHIFT) / ticks as u128;
        let tsc_hz = (ticks as u128 * 1_000_000_000 / elapsed_ns as u128) as u64;
        Clock {
            source: ClockSource::Tsc,
            base_ns: end_ns,
            base_ticks: end_ticks,
            mult: mult as u64,
            tsc_hz,
        }
    }

    /// Which source this clock reads.
    pub fn source(&self) -> ClockSource {
        self.source
    }

    /// The calibrated TSC frequency, or `None` on the monotonic fallback.
    pub fn tsc_hz(&self) -> Option<u64> {
        (self.source == ClockSource::Tsc).then_some(self.tsc_hz)
    }

    /// Now, in ns since the Unix epoch.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self.source {
            ClockSource::Tsc => self.ticks_to_ns(tsc::read()),
            ClockSource::Monotonic => (monotonic_ns() + self.base_ns) as u64,
        }
    }

    /// The raw counter (TSC ticks, or monotonic ns on the fallback): the cheapest read, for
    /// stamping now and converting later with [`Clock::ticks_to_ns`].
    #[inline]
    pub fn now_ticks(&self) -> u64 {
        match self.source {
            ClockSource::Tsc => tsc::read(),
            ClockSource::Monotonic => monotonic_ns() as u64,
        }
    }

    /// Converts a value of [`Clock::now_ticks`] to ns since the epoch.
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.source {
            ClockSource::Tsc => {
                // Ticks before the base (another core's slightly earlier read) give a negative
                // delta; handle both directions without overflow.
                let delta = ticks.wrapping_sub(self.base_ticks) as i64;
                let scaled = ((delta.unsigned_abs() as u128 * self.mult as u128) >> SHIFT) as i128;
                let ns = if delta >= 0 {
                    self.base_ns + scaled
                } else {
                    self.base_ns - scaled
                };
                ns as u64
            }
            ClockSource::Monotonic => (ticks as i128 + self.base_ns) as u64,
        }
    }
}

/// Reads the TSC and the realtime clock as close together as this host allows: the TSC is read
/// before and after the realtime read, and the pair with the narrowest bracket of a few tries
/// wins (a preemption or a VM exit widens the bracket, so it is discarded).
fn bracketed_pair() -> (u64, i128) {
    let mut best: Option<(u64, u64, i128)> = None;
    for _ in 0..32 {
        let before = tsc::read();
        let real = realtime_ns();
        let after = tsc::read();
        let width = after.wrapping_sub(before);
        if best.is_none_or(|(best_width, _, _)| width < best_width) {
            best = Some((width, before + width / 2, real));
        }
    }
    match best {
        Some((_, ticks, real)) => (ticks, real),
        None => (tsc::read(), realtime_ns()),
    }
}

fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used are always supported on
    // Linux, and on failure the zeroed value stays (which only makes a timestamp wrong, never
    // memory unsafe).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

fn realtime_ns() -> i128 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn monotonic_ns() -> i128 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The system's realtime clock in ns since the epoch, for comparisons and reports.
pub fn system_realtime_ns() -> u64 {
    realtime_ns() as u64
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    /// Whether CPUID reports an invariant TSC.
    #[allow(
        unused_unsafe,
        reason = "__cpuid is safe from Rust 1.94 on and unsafe before; this builds on both"
    )]
    pub fn invariant() -> bool {
        // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x8000_0000 reports the highest
        // extended leaf, checked before leaf 0x8000_0007 is asked for.
        unsafe {
            let max_extended = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            if max_extended < 0x8000_0007 {
                return false;
            }
            core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
    }

    #[inline]
    pub fn read() -> u64 {
        // SAFETY: RDTSC is available on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc {
    pub fn invariant() -> bool {
        false
    }

    #[inline]
    pub fn read() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far the calibrated clock may sit from the system clock. Calibration error (tens of ppm
    /// over a test's few seconds) and one read's jitter stay well inside it; a wrong scale or
    /// base would be off by seconds.
    const AGREEMENT_NS: i128 = 2_000_000;

    fn check_agrees_with_system(clock: &Clock) {
        for _ in 0..1_000 {
            let before = realtime_ns();
            let ours = clock.now_ns() as i128;
            let after = realtime_ns();
            assert!(
                ours >= before - AGREEMENT_NS && ours <= after + AGREEMENT_NS,
                "{:?} clock read {ours}, system clock bracket [{before}, {after}]",
                clock.source()
            );
        }
    }

    fn check_monotonic(clock: &Clock) {
        let mut last = clock.now_ns();
        for _ in 0..1_000_000 {
            let now = clock.now_ns();
            assert!(
                now >= last,
                "{:?} clock went back: {last} -> {now}",
                clock.source()
            );
            last = now;
        }
    }

    #[test]
    fn calibrated_clock_is_monotonic_and_agrees_with_system_clock() {
        let clock = Clock::calibrate();
        if tsc::invariant() {
            assert_eq!(clock.source(), ClockSource::Tsc);
            let hz = clock.tsc_hz().unwrap_or(0);
            assert!(hz > 100_000_000, "implausible TSC rate {hz} Hz");
        } else {
            println!("no invariant TSC on this CPU: testing the monotonic fallback only");
        }
        check_monotonic(&clock);
        check_agrees_with_system(&clock);
        // Still in agreement after time has passed (a wrong rate would drift).
        std::thread::sleep(Duration::from_millis(300));
        check_agrees_with_system(&clock);
    }

    #[test]
    fn monotonic_fallback_is_monotonic_and_agrees_with_system_clock() {
        let clock = Clock::monotonic();
        assert_eq!(clock.source(), ClockSource::Monotonic);
        assert_eq!(clock.tsc_hz(), None);
        check_monotonic(&clock);
        check_agrees_with_system(&clock);
    }

    #[test]
    fn ticks_convert_like_now() {
        let clock = Clock::calibrate();
        let ticks = clock.now_ticks();
        let direct = clock.now_ns() as i128;
        let converted = clock.ticks_to_ns(ticks) as i128;
        assert!(converted <= direct && direct - converted < AGREEMENT_NS);
        if clock.source() == ClockSource::Tsc {
            // A read from before the calibration base converts to an earlier time, not a wrap.
            let earlier = clock.ticks_to_ns(clock.base_ticks - 1_000_000) as i128;
            assert!(earlier < clock.base_ns && clock.base_ns - earlier < 10_000_000);
        }
    }
}
