//! Performance counters of a process through `perf_event_open(2)`: hardware counters
//! (instructions, cycles, cache misses) where the host exposes them, software counters (task
//! clock, context switches) everywhere. A counter the kernel refuses is reported as unsupported
//! with the reason, never as a failure: most VMs expose no hardware counters.

use std::io;

/// One counter: its name and either its file descriptor or why it is unsupported.
struct Counter {
    name: &'static str,
    fd: Result<i32, String>,
}

/// Counters attached to one process (its main thread and the threads started after they are
/// opened: open them right after spawning it), or to one thread given its thread id.
pub struct ProcessCounters {
    counters: Vec<Counter>,
}

/// A counter's value, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub name: &'static str,
    pub value: Result<u64, String>,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
/// `perf_event_attr` flag bits: `inherit` (bit 1) and `exclude_kernel` is left off so that the
/// kernel's share of the network path counts too.
const ATTR_FLAG_INHERIT: u64 = 1 << 1;

/// `struct perf_event_attr` up to `config2` (PERF_ATTR_SIZE_VER1, 72 bytes), which every kernel
/// since 2.6.32 accepts.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
}

impl ProcessCounters {
    /// Opens every counter for process `pid`, each alone (not as a group, so one refusal does
    /// not take the others with it).
    pub fn open(pid: libc::pid_t) -> ProcessCounters {
        let specs = [
            (
                "instructions",
                PERF_TYPE_HARDWARE,
                PERF_COUNT_HW_INSTRUCTIONS,
            ),
            ("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
            (
                "cache_misses",
                PERF_TYPE_HARDWARE,
                PERF_COUNT_HW_CACHE_MISSES,
            ),
            (
                "task_clock_ns",
                PERF_TYPE_SOFTWARE,
                PERF_COUNT_SW_TASK_CLOCK,
            ),
            (
                "context_switches",
                PERF_TYPE_SOFTWARE,
                PERF_COUNT_SW_CONTEXT_SWITCHES,
            ),
        ];
        let counters = specs
            .iter()
            .map(|&(name, kind, config)| Counter {
                name,
                fd: open_counter(pid, kind, config).map_err(|error| {
                    format!(
                        "unsupported ({})",
                        error.raw_os_error().map_or_else(
                            || error.to_string(),
                            |code| match code {
                                libc::ENOENT | libc::EOPNOTSUPP => {
                                    "the host exposes no such counter".to_owned()
                                }
                                libc::EACCES | libc::EPERM => {
                                    "not permitted: see kernel.perf_event_paranoid".to_owned()
                                }
                                _ => error.to_string(),
                            }
                        )
                    )
                }),
            })
            .collect();
        ProcessCounters { counters }
    }

    /// Every counter's value now.
    pub fn read(&self) -> Vec<Reading> {
        self.counters
            .iter()
            .map(|counter| Reading {
                name: counter.name,
                value: match &counter.fd {
                    Ok(fd) => read_counter(*fd).map_err(|error| error.to_string()),
                    Err(why) => Err(why.clone()),
                },
            })
            .collect()
    }
}

impl Drop for ProcessCounters {
    fn drop(&mut self) {
        for counter in &self.counters {
            if let Ok(fd) = counter.fd {
                // SAFETY: fd came from perf_event_open and is closed once, here.
                unsafe { libc::close(fd) };
            }
        }
    }
}

fn open_counter(pid: libc::pid_t, kind: u32, config: u64) -> io::Result<i32> {
    let attr = PerfEventAttr {
        kind,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        flags: ATTR_FLAG_INHERIT,
        ..PerfEventAttr::default()
    };
    // SAFETY: attr is a valid, fully initialised perf_event_attr of the size it states; the
    // other arguments are plain integers (any CPU, no group, no flags).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid,
            -1,
            -1,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd as i32)
}

fn read_counter(fd: i32) -> io::Result<u64> {
    let mut value = 0u64;
    // SAFETY: reads 8 bytes into a u64 we own; fd is an open perf event.
    let read = unsafe { libc::read(fd, (&mut value as *mut u64).cast(), 8) };
    if read != 8 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_counters_count_and_hardware_ones_say_why_not() {
        // This thread, not the process: a test runs on a worker thread, and a counter on the
        // process id follows only the main thread (and threads started after it was opened).
        // SAFETY: gettid cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        let counters = ProcessCounters::open(tid);
        let mut sum = 0u64;
        for i in 0..2_000_000u64 {
            sum = sum.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(sum);
        for reading in counters.read() {
            match &reading.value {
                Ok(value) => {
                    if reading.name == "task_clock_ns" || reading.name == "instructions" {
                        assert!(*value > 0, "{reading:?}");
                    }
                }
                // A counter may be missing (a VM, a strict perf_event_paranoid): then it says so.
                Err(why) => assert!(why.starts_with("unsupported"), "{reading:?}"),
            }
        }
    }
}
