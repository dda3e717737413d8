//! The `tickwire` binary: see `cli` for the subcommands.
//!
//! The system allocator serves it: the hot path allocates nothing in steady state, and mimalloc,
//! tried here, committed whole segments up front (about 22 MiB of resident memory the appliance
//! never used, measured with `bench e2e`) for no gain the benchmarks could show.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

/// `log2` for a binary linked with `-Wl,--wrap=log2` (the lean build, `build.rs`): the only
/// function the binary takes from libm is `log2` (hdrhistogram sizes its buckets with it when a
/// histogram is made, never when it records), and libm loaded for that one function keeps
/// about 480 KiB of its pages resident. Wrapped, the call comes here, to the pure-Rust port of
/// musl's `log2` (the `libm` crate), and the linker (`--as-needed`) leaves libm out. Unused, and
/// kept only by `KEEP_WRAP_LOG2`, in every other build.
#[unsafe(no_mangle)]
extern "C" fn __wrap_log2(x: f64) -> f64 {
    libm::log2(x)
}

/// Keeps `__wrap_log2` through link-time optimization, which sees no caller: the call the
/// linker redirects to it is made only at link time.
#[used]
static KEEP_WRAP_LOG2: extern "C" fn(f64) -> f64 = __wrap_log2;

#[cfg(test)]
mod tests {
    #[test]
    fn wrapped_log2_agrees_with_the_system_log2() {
        // Exact at every power of two, which is what hdrhistogram's bucket sizes depend on.
        for exponent in -1074..=1023 {
            // From the bits: `powi` rounds the smallest subnormals to zero.
            let x = if exponent >= -1022 {
                f64::from_bits(((exponent + 1023) as u64) << 52)
            } else {
                f64::from_bits(1 << (exponent + 1074))
            };
            assert_eq!(super::__wrap_log2(x), f64::from(exponent), "2^{exponent}");
        }
        let mut x = 1e-300;
        while x < 1e300 {
            let (ours, system) = (super::__wrap_log2(x), x.log2());
            assert!(
                (ours - system).abs() <= system.abs() * 4.0 * f64::EPSILON,
                "{x}: {ours} {system}"
            );
            x *= 1.37;
        }
        for (x, expected) in [(0.0, f64::NEG_INFINITY), (f64::INFINITY, f64::INFINITY)] {
            assert_eq!(super::__wrap_log2(x), expected);
        }
        assert!(super::__wrap_log2(-1.0).is_nan() && super::__wrap_log2(f64::NAN).is_nan());
    }
}
