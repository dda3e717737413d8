//! Hot threads: which stages run on which thread, pinned to which core, waiting how.
//!
//! [`plan`] turns the `[threads.*]` config into the threads to start: one per unfused stage, with
//! fused stages riding on the thread they are fused into (decode inline on the network thread,
//! strategy on the decoder's thread), so one binary runs on a 2-core VM and on a host with many
//! isolated cores. [`spawn`] starts such a thread: named, pinned with `core_affinity`, optionally
//! `SCHED_FIFO`, and reports back whether that setup worked before the thread's work begins, so
//! that a missing capability is an error at start, not a silent slowdown. [`lock_memory`] is the
//! process-wide `mlockall`. [`wake`] is how the control thread sleeps until a stage or a worker
//! hands it work.
//!
//! **Invariant:** nothing here runs on the hot path: it is all start-up, on the control thread.

pub mod wait;
pub mod wake;

pub use wait::{WaitStrategy, Waiter, Wakeup};
pub use wake::{ControlWait, ControlWakeup, Woken};

use crate::config::{PrivilegeErrorPolicy, Stage, ThreadConfig, ThreadsConfig, WaitKind};
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

/// A start-up failure of a hot thread or of the process's memory locking.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    #[error("thread `{thread}`: core {core} does not exist or is not allowed for this process (allowed cores: {allowed})")]
    NoSuchCore {
        thread: String,
        core: usize,
        allowed: String,
    },
    #[error("thread `{thread}`: pinning to core {core} failed")]
    PinFailed { thread: String, core: usize },
    #[error("thread `{thread}`: SCHED_FIFO priority {priority} refused: {source}. This needs CAP_SYS_NICE (systemd: AmbientCapabilities=CAP_SYS_NICE) or an RLIMIT_RTPRIO of at least {priority} (LimitRTPRIO=); or remove `sched_fifo_priority`, or set process.on_privilege_error = \"warn\" to run without it")]
    SchedFifo {
        thread: String,
        priority: u8,
        source: io::Error,
    },
    #[error("mlockall refused: {source}. This needs CAP_IPC_LOCK (systemd: AmbientCapabilities=CAP_IPC_LOCK) or a memlock limit above the process size (LimitMEMLOCK=infinity, `ulimit -l unlimited`); or set process.mlockall = false, or process.on_privilege_error = \"warn\"")]
    Mlockall { source: io::Error },
    #[error("thread `{thread}` could not be started: {source}")]
    Spawn { thread: String, source: io::Error },
    #[error("thread `{thread}` ended during its set-up")]
    SetupLost { thread: String },
    #[error("the housekeeping cores {cores:?} could not be set as the control thread's affinity: {source}. Each must be a core this process may run on (see `taskset -p`, the cgroup's cpuset); or change process.housekeeping_cores")]
    Housekeeping {
        cores: Vec<usize>,
        source: io::Error,
    },
}

/// What a hot thread is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSpec {
    /// Thread name as the OS shows it (15 bytes at most on Linux; longer names are cut).
    pub name: String,
    pub core: Option<usize>,
    pub wait: WaitStrategy,
    pub sched_fifo_priority: Option<u8>,
    pub on_privilege_error: PrivilegeErrorPolicy,
}

/// One stage instance a thread runs: the network stage, decoder `N`, or the strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Task {
    Net,
    Decoder(usize),
    Strategy,
}

impl Task {
    pub fn stage(self) -> Stage {
        match self {
            Task::Net => Stage::Net,
            Task::Decoder(_) => Stage::Decoder,
            Task::Strategy => Stage::Strategy,
        }
    }
}

/// One thread to start and the stages it runs, in pipeline order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPlan {
    pub spec: ThreadSpec,
    pub stages: Vec<Task>,
}

/// A decoder thread's name: `tw-decoder` when there is one decoder (as before several
/// existed), `tw-decoder-N` when there are several.
pub fn decoder_thread_name(index: usize, count: usize) -> String {
    if count == 1 {
        "tw-decoder".to_owned()
    } else {
        format!("tw-decoder-{index}")
    }
}

fn wait_strategy(config: &ThreadConfig) -> WaitStrategy {
    match config.wait {
        WaitKind::Spin => WaitStrategy::Spin,
        WaitKind::SpinThenYield => WaitStrategy::SpinThenYield {
            spins: config.spin_iterations,
        },
        WaitKind::Park => WaitStrategy::Park {
            spins: config.spin_iterations,
            timeout: Duration::from_micros(config.park_timeout_us),
        },
    }
}

/// The threads a (validated) config asks for, in pipeline order: net, the decoders by index,
/// strategy. A fused stage joins the thread of the stage it is fused into; fusing follows chains
/// (strategy into decoder 0 into net gives one thread). Each decoder fused into net runs on the
/// network thread; the strategy fused into "decoder" runs on decoder 0's thread.
pub fn plan(threads: &ThreadsConfig, on_privilege_error: PrivilegeErrorPolicy) -> Vec<ThreadPlan> {
    let count = threads.decoder_count();
    let spec = |name: String, config: &ThreadConfig| ThreadSpec {
        name,
        core: config.core,
        wait: wait_strategy(config),
        sched_fifo_priority: config.sched_fifo_priority,
        on_privilege_error,
    };
    let mut plans: Vec<ThreadPlan> = vec![ThreadPlan {
        spec: spec("tw-net".to_owned(), &threads.net),
        stages: vec![Task::Net],
    }];
    for (index, config) in threads.decoders.iter().enumerate() {
        if config.fuse_into == Some(Stage::Net) {
            plans[0].stages.push(Task::Decoder(index));
        } else {
            plans.push(ThreadPlan {
                spec: spec(decoder_thread_name(index, count), config),
                stages: vec![Task::Decoder(index)],
            });
        }
    }
    let strategy_host = match threads.runs_on(Stage::Strategy) {
        Stage::Strategy => None,
        Stage::Net => Some(Task::Net),
        Stage::Decoder => Some(Task::Decoder(0)),
    };
    match strategy_host.and_then(|host| plans.iter_mut().find(|plan| plan.stages.contains(&host))) {
        Some(host) => host.stages.push(Task::Strategy),
        None => plans.push(ThreadPlan {
            spec: spec("tw-strategy".to_owned(), &threads.strategy),
            stages: vec![Task::Strategy],
        }),
    }
    plans
}

/// A started hot thread.
pub struct HotThread<R> {
    pub name: String,
    /// The core it is pinned to, if pinning was asked for and worked.
    pub pinned_core: Option<usize>,
    /// Whether it runs under SCHED_FIFO.
    pub realtime: bool,
    /// Wakes the thread when its wait strategy parks it; producers feeding it call this.
    pub wakeup: Wakeup,
    /// `None` only when set-up failed, which `spawn` reports before handing out the thread.
    handle: JoinHandle<Option<R>>,
}

impl<R> HotThread<R> {
    /// Waits for the thread; `Err` carries its panic payload.
    pub fn join(self) -> std::thread::Result<R> {
        match self.handle.join()? {
            Some(result) => Ok(result),
            None => Err(Box::new("thread set-up failed")),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

struct SetupReport {
    pinned_core: Option<usize>,
    realtime: bool,
    wakeup: Option<Wakeup>,
}

/// Starts a thread as `spec` says and runs `work` on it with a [`Waiter`] for its strategy.
/// Returns once the thread is pinned and scheduled (or has failed to be, which is an error, or
/// a logged warning under `PrivilegeErrorPolicy::Warn`).
pub fn spawn<R, F>(spec: &ThreadSpec, work: F) -> Result<HotThread<R>, ThreadError>
where
    F: FnOnce(&mut Waiter) -> R + Send + 'static,
    R: Send + 'static,
{
    if let Some(core) = spec.core {
        let allowed = allowed_cores();
        if !allowed.contains(&core) {
            return Err(ThreadError::NoSuchCore {
                thread: spec.name.clone(),
                core,
                allowed: format_cores(&allowed),
            });
        }
    }
    let (report_tx, report_rx) = std::sync::mpsc::sync_channel(1);
    let thread_spec = spec.clone();
    let handle = std::thread::Builder::new()
        .name(spec.name.clone())
        .spawn(move || {
            let mut waiter = Waiter::new(thread_spec.wait);
            let report = set_up_current_thread(&thread_spec).map(|mut report| {
                report.wakeup = Some(waiter.wakeup());
                report
            });
            let ok = report.is_ok();
            if report_tx.send(report).is_err() || !ok {
                return None;
            }
            Some(work(&mut waiter))
        })
        .map_err(|source| ThreadError::Spawn {
            thread: spec.name.clone(),
            source,
        })?;
    let report = report_rx.recv().map_err(|_| ThreadError::SetupLost {
        thread: spec.name.clone(),
    })?;
    let setup = match report {
        Ok(setup) => setup,
        Err(error) => {
            // The thread returns at once after a failed set-up.
            let _ = handle.join();
            return Err(error);
        }
    };
    let Some(wakeup) = setup.wakeup else {
        return Err(ThreadError::SetupLost {
            thread: spec.name.clone(),
        });
    };
    Ok(HotThread {
        name: spec.name.clone(),
        pinned_core: setup.pinned_core,
        realtime: setup.realtime,
        wakeup,
        handle,
    })
}

fn set_up_current_thread(spec: &ThreadSpec) -> Result<SetupReport, ThreadError> {
    let mut report = SetupReport {
        pinned_core: None,
        realtime: false,
        wakeup: None,
    };
    if let Some(core) = spec.core {
        if core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            report.pinned_core = Some(core);
        } else {
            let error = ThreadError::PinFailed {
                thread: spec.name.clone(),
                core,
            };
            downgrade_or_fail(spec.on_privilege_error, error)?;
        }
    }
    if let Some(priority) = spec.sched_fifo_priority {
        match set_sched_fifo(priority) {
            Ok(()) => report.realtime = true,
            Err(source) => downgrade_or_fail(
                spec.on_privilege_error,
                ThreadError::SchedFifo {
                    thread: spec.name.clone(),
                    priority,
                    source,
                },
            )?,
        }
    }
    Ok(report)
}

fn downgrade_or_fail(policy: PrivilegeErrorPolicy, error: ThreadError) -> Result<(), ThreadError> {
    match policy {
        PrivilegeErrorPolicy::Fail => Err(error),
        PrivilegeErrorPolicy::Warn => {
            tracing::warn!(
                "{error}; continuing without it (process.on_privilege_error = \"warn\")"
            );
            Ok(())
        }
    }
}

fn set_sched_fifo(priority: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pins the calling side thread (the recorder, the serving thread: never a hot one) to `core`
/// when the config names one. It widens or moves the thread's own mask, so a process started
/// under `taskset` on the hot cores still runs this thread where the config says. A failure is
/// logged and the thread runs unpinned: a side thread's placement is never worth stopping for.
pub fn pin_side_thread(core: Option<usize>, thread: &str) {
    if let Some(core) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
            tracing::warn!(
                core,
                "the {thread} thread could not be pinned; it runs unpinned"
            );
        }
    }
}

/// The cores the process could run on before [`pin_housekeeping`] narrowed the control
/// thread's mask.
static PROCESS_CORES: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

/// Moves the calling thread (the control thread, before it starts any other) onto `cores`, so
/// that every thread it starts afterwards inherits them: the hot threads then pin themselves
/// to their own cores, and nothing else runs there. Nothing to do when `cores` is empty.
pub fn pin_housekeeping(cores: &[usize]) -> Result<(), ThreadError> {
    if cores.is_empty() {
        return Ok(());
    }
    let allowed = allowed_cores();
    if let Some(&core) = cores.iter().find(|core| !allowed.contains(core)) {
        return Err(ThreadError::Housekeeping {
            cores: cores.to_vec(),
            source: io::Error::other(format!(
                "core {core} is not one this process may run on ({})",
                format_cores(&allowed)
            )),
        });
    }
    // The hot threads are checked against, and pin themselves within, the process's cores.
    let _ = PROCESS_CORES.set(allowed);
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it for a core
    // below CPU_SETSIZE (checked); sched_setaffinity reads `set` for its size.
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &core in cores {
            if core >= libc::CPU_SETSIZE as usize {
                return Err(ThreadError::Housekeeping {
                    cores: cores.to_vec(),
                    source: io::Error::from(io::ErrorKind::InvalidInput),
                });
            }
            libc::CPU_SET(core, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result == 0 {
        Ok(())
    } else {
        Err(ThreadError::Housekeeping {
            cores: cores.to_vec(),
            source: io::Error::last_os_error(),
        })
    }
}

/// Locks all current and future pages of the process in memory, so that no page fault on a hot
/// thread ever waits for swap.
pub fn lock_memory(policy: PrivilegeErrorPolicy) -> Result<bool, ThreadError> {
    // SAFETY: mlockall takes flags only and has no memory-safety preconditions.
    let result = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if result == 0 {
        return Ok(true);
    }
    let error = ThreadError::Mlockall {
        source: io::Error::last_os_error(),
    };
    downgrade_or_fail(policy, error).map(|()| false)
}

/// The cores this process may run on (its affinity mask), sorted.
pub fn allowed_cores() -> Vec<usize> {
    // After [`pin_housekeeping`] the control thread's own mask is the housekeeping cores; the
    // process may still run on what it could before.
    if let Some(cores) = PROCESS_CORES.get() {
        return cores.clone();
    }
    let mut cores: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|core| core.id)
        .collect();
    cores.sort_unstable();
    cores
}

fn format_cores(cores: &[usize]) -> String {
    if cores.is_empty() {
        return "none found".to_owned();
    }
    cores
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads(text: &str) -> ThreadsConfig {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tickwire.toml");
        std::fs::write(&path, text).unwrap();
        crate::config::load_with_cpu_count(&path, 8)
            .unwrap_or_else(|errors| panic!("{errors}"))
            .appliance
            .threads
    }

    fn stages(plans: &[ThreadPlan]) -> Vec<(String, Vec<Task>)> {
        plans
            .iter()
            .map(|plan| (plan.spec.name.clone(), plan.stages.clone()))
            .collect()
    }

    #[test]
    fn unfused_stages_get_a_thread_each() {
        let config = threads(
            "[threads.net]\ncore = 1\nwait = \"spin\"\n[threads.decoder]\ncore = 2\n\
             [threads.strategy]\ncore = 3\nwait = \"park\"\npark_timeout_us = 250\n",
        );
        let plans = plan(&config, PrivilegeErrorPolicy::Fail);
        assert_eq!(
            stages(&plans),
            [
                ("tw-net".to_owned(), vec![Task::Net]),
                ("tw-decoder".to_owned(), vec![Task::Decoder(0)]),
                ("tw-strategy".to_owned(), vec![Task::Strategy]),
            ]
        );
        assert_eq!(plans[0].spec.core, Some(1));
        assert_eq!(plans[0].spec.wait, WaitStrategy::Spin);
        assert_eq!(
            plans[2].spec.wait,
            WaitStrategy::Park {
                spins: 10_000,
                timeout: Duration::from_micros(250)
            }
        );
    }

    #[test]
    fn fused_stages_ride_on_their_host_thread() {
        let config = threads(
            "[threads.net]\ncore = 1\n[threads.decoder]\nfuse_into = \"net\"\n\
             [threads.strategy]\ncore = 2\n",
        );
        assert_eq!(
            stages(&plan(&config, PrivilegeErrorPolicy::Fail)),
            [
                ("tw-net".to_owned(), vec![Task::Net, Task::Decoder(0)]),
                ("tw-strategy".to_owned(), vec![Task::Strategy]),
            ]
        );
        let config = threads(
            "[threads.net]\n[threads.decoder]\nfuse_into = \"net\"\n\
             [threads.strategy]\nfuse_into = \"net\"\n",
        );
        assert_eq!(
            stages(&plan(&config, PrivilegeErrorPolicy::Fail)),
            [(
                "tw-net".to_owned(),
                vec![Task::Net, Task::Decoder(0), Task::Strategy]
            )]
        );
        let config = threads(
            "[threads.net]\n[threads.decoder]\ncore = 1\n[threads.strategy]\nfuse_into = \"decoder\"\n",
        );
        assert_eq!(
            stages(&plan(&config, PrivilegeErrorPolicy::Fail)),
            [
                ("tw-net".to_owned(), vec![Task::Net]),
                (
                    "tw-decoder".to_owned(),
                    vec![Task::Decoder(0), Task::Strategy]
                ),
            ]
        );
    }

    #[test]
    fn several_decoders_get_a_named_thread_each_or_ride_on_net() {
        let config = threads(
            "[threads.net]\ncore = 1\n[[threads.decoders]]\nfuse_into = \"net\"\n\
             [[threads.decoders]]\ncore = 2\n[[threads.decoders]]\ncore = 3\nwait = \"park\"\n\
             [threads.strategy]\ncore = 4\n",
        );
        let plans = plan(&config, PrivilegeErrorPolicy::Fail);
        assert_eq!(
            stages(&plans),
            [
                ("tw-net".to_owned(), vec![Task::Net, Task::Decoder(0)]),
                ("tw-decoder-1".to_owned(), vec![Task::Decoder(1)]),
                ("tw-decoder-2".to_owned(), vec![Task::Decoder(2)]),
                ("tw-strategy".to_owned(), vec![Task::Strategy]),
            ]
        );
        assert_eq!(plans[1].spec.core, Some(2));
        assert_eq!(plans[2].spec.core, Some(3));
        // The strategy fused into "decoder" rides on decoder 0's thread.
        let config = threads(
            "[[threads.decoders]]\ncore = 1\n[[threads.decoders]]\ncore = 2\n\
             [threads.strategy]\nfuse_into = \"decoder\"\n",
        );
        assert_eq!(
            stages(&plan(&config, PrivilegeErrorPolicy::Fail)),
            [
                ("tw-net".to_owned(), vec![Task::Net]),
                (
                    "tw-decoder-0".to_owned(),
                    vec![Task::Decoder(0), Task::Strategy]
                ),
                ("tw-decoder-1".to_owned(), vec![Task::Decoder(1)]),
            ]
        );
    }

    fn spec(core: Option<usize>, sched_fifo_priority: Option<u8>) -> ThreadSpec {
        ThreadSpec {
            name: "tw-test".to_owned(),
            core,
            wait: WaitStrategy::SpinThenYield { spins: 10 },
            sched_fifo_priority,
            on_privilege_error: PrivilegeErrorPolicy::Fail,
        }
    }

    #[test]
    fn a_spawned_thread_is_named_pinned_and_runs_its_work() {
        let core = *allowed_cores().last().expect("at least one core");
        let thread = spawn(&spec(Some(core), None), move |waiter| {
            let name = std::thread::current().name().map(str::to_owned);
            // The thread runs where it was pinned.
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            (name, cpu, waiter.strategy())
        })
        .unwrap();
        assert_eq!(thread.pinned_core, Some(core));
        assert!(!thread.realtime);
        let (name, cpu, strategy) = thread.join().unwrap();
        assert_eq!(name.as_deref(), Some("tw-test"));
        assert_eq!(cpu, core as i32);
        assert_eq!(strategy, WaitStrategy::SpinThenYield { spins: 10 });
    }

    #[test]
    fn a_core_outside_the_affinity_mask_is_a_clear_error() {
        let error = match spawn(&spec(Some(4096), None), |_| ()) {
            Err(error) => error,
            Ok(_) => panic!("core 4096 accepted"),
        };
        let message = error.to_string();
        assert!(
            message.contains("core 4096 does not exist") && message.contains("allowed cores: "),
            "{message}"
        );
    }

    #[test]
    fn refused_sched_fifo_fails_or_downgrades_as_configured() {
        // A priority outside 1..=99 is refused by the kernel whatever the privileges (EINVAL),
        // which exercises the same path as a missing CAP_SYS_NICE (EPERM) without needing to
        // drop privileges. The thread does no work, so no real-time thread ever spins here.
        let error = match spawn(&spec(None, Some(200)), |_| ()) {
            Err(error) => error,
            Ok(_) => panic!("priority 200 accepted"),
        };
        let message = error.to_string();
        assert!(
            message.contains("SCHED_FIFO priority 200 refused") && message.contains("CAP_SYS_NICE"),
            "{message}"
        );
        let mut warn_spec = spec(None, Some(200));
        warn_spec.on_privilege_error = PrivilegeErrorPolicy::Warn;
        let thread = spawn(&warn_spec, |_| 7).unwrap();
        assert!(!thread.realtime);
        assert_eq!(thread.join().unwrap(), 7);
    }
}
