//! The `tickwire` binary: see `cli` for the subcommands.

mod cli;

/// mimalloc: fast thread-local free lists for the control thread's allocations; the hot path
/// allocates nothing in steady state, so this matters for start-up, reconnects and reports.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
