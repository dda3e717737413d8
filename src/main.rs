//! The `tickwire` binary: see `cli` for the subcommands.
//!
//! The system allocator serves it: the hot path allocates nothing in steady state, and mimalloc,
//! tried here, committed whole segments up front (about 22 MiB of resident memory the appliance
//! never used, measured with `bench e2e`) for no gain the benchmarks could show.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
