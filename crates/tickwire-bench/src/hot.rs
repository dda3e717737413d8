//! What reached a client's hot thread and its core during the timed window (issue 39): the
//! thread's context switches and page faults, from `/proc/<pid>/task/<tid>/status` and `stat`,
//! and the interrupts the core took, from `/proc/interrupts` and `/proc/softirqs` (its column).
//! Read before the window and after it; the difference is the window's. None of that needs
//! perf or tracepoints, so it works on a VM without them; where tracefs is mounted and writable,
//! a trace of the core names what ran there instead and what kernel work ([`SwitchTrace`]).

use std::path::PathBuf;

/// One reading of a thread and its core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HotReading {
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Hardware and IPI interrupts on the core (every row of `/proc/interrupts`).
    pub core_interrupts: u64,
    /// The core's local timer interrupts (`LOC`), part of `core_interrupts`.
    pub core_timer_interrupts: u64,
    /// Softirqs run on the core (every row of `/proc/softirqs`).
    pub core_softirqs: u64,
    /// Milliseconds the hypervisor ran something else on the core's virtual CPU (`steal` of
    /// the core's `/proc/stat` line; 0 on bare metal), at the kernel's tick resolution.
    pub core_steal_ms: u64,
}

/// What the window added: the second reading less the first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotWindow {
    /// The thread's name (`tw-net` for a tickwire client).
    pub thread: String,
    pub core: usize,
    pub delta: HotReading,
    /// What the core ran instead of the thread ([`SwitchTrace`]), or why that is not known.
    pub ran_instead: Result<Vec<(String, u64)>, String>,
    /// The kernel work items the core's workers ran in the window, by function (what a
    /// `kworker/N:M` in `ran_instead` was there for), most first; empty when not traced.
    pub work: Vec<(String, u64)>,
}

/// A thread of a process, found by name (or the main thread), and its core.
pub struct HotThread {
    pub name: String,
    task: PathBuf,
    core: usize,
}

impl HotThread {
    /// The thread of `pid` whose name is `name`, or the main thread when `name` is `None`;
    /// `None` when no such thread runs (yet).
    pub fn find(pid: u32, name: Option<&str>, core: usize) -> Option<HotThread> {
        let Some(name) = name else {
            let task = PathBuf::from(format!("/proc/{pid}/task/{pid}"));
            let comm = std::fs::read_to_string(task.join("comm")).ok()?;
            return Some(HotThread {
                name: comm.trim().to_owned(),
                task,
                core,
            });
        };
        for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let task = entry.ok()?.path();
            let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
            if comm.trim() == name {
                return Some(HotThread {
                    name: name.to_owned(),
                    task,
                    core,
                });
            }
        }
        None
    }

    /// The thread's counters and its core's now; `None` once the thread has ended.
    pub fn read(&self) -> Option<HotReading> {
        let status = std::fs::read_to_string(self.task.join("status")).ok()?;
        let stat = std::fs::read_to_string(self.task.join("stat")).ok()?;
        let field = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(key))
                .and_then(|rest| rest.trim().parse().ok())
                .unwrap_or(0)
        };
        // `stat`: the fields after the parenthesised name; minflt and majflt are fields 10
        // and 12 of the whole line, so 8th and 10th after it.
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let number = |index: usize| -> u64 {
            fields
                .get(index)
                .and_then(|value| value.parse().ok())
                .unwrap_or(0)
        };
        let (core_interrupts, core_timer_interrupts) = core_column("/proc/interrupts", self.core);
        let (core_softirqs, _) = core_column("/proc/softirqs", self.core);
        let core_steal_ms = core_steal_ms(self.core);
        Some(HotReading {
            voluntary_switches: field("voluntary_ctxt_switches:"),
            involuntary_switches: field("nonvoluntary_ctxt_switches:"),
            minor_faults: number(7),
            major_faults: number(9),
            core_interrupts,
            core_timer_interrupts,
            core_softirqs,
            core_steal_ms,
        })
    }

    /// The window between two readings, with what a [`SwitchTrace`] of the same window saw.
    pub fn window(
        &self,
        before: HotReading,
        after: HotReading,
        traced: Result<Traced, String>,
    ) -> HotWindow {
        let (ran_instead, work) = match traced {
            Ok(traced) => (Ok(traced.ran_instead), traced.work),
            Err(why) => (Err(why), Vec::new()),
        };
        HotWindow {
            thread: self.name.clone(),
            core: self.core,
            ran_instead,
            work,
            delta: HotReading {
                voluntary_switches: after
                    .voluntary_switches
                    .saturating_sub(before.voluntary_switches),
                involuntary_switches: after
                    .involuntary_switches
                    .saturating_sub(before.involuntary_switches),
                minor_faults: after.minor_faults.saturating_sub(before.minor_faults),
                major_faults: after.major_faults.saturating_sub(before.major_faults),
                core_interrupts: after.core_interrupts.saturating_sub(before.core_interrupts),
                core_timer_interrupts: after
                    .core_timer_interrupts
                    .saturating_sub(before.core_timer_interrupts),
                core_softirqs: after.core_softirqs.saturating_sub(before.core_softirqs),
                core_steal_ms: after.core_steal_ms.saturating_sub(before.core_steal_ms),
            },
        }
    }
}

/// A timed window on a client's hot thread: [`HotProbe::open`] as the window starts (finds the
/// thread, starts the core's trace, reads the counters), [`HotProbe::close`] as it ends.
pub struct HotProbe {
    thread: Option<HotThread>,
    trace: Result<SwitchTrace, String>,
    before: Option<HotReading>,
}

impl HotProbe {
    /// `name`: the hot thread's name, `None` for the process's main thread.
    pub fn open(pid: u32, name: Option<&str>, core: usize) -> HotProbe {
        let thread = HotThread::find(pid, name, core);
        let trace = SwitchTrace::start(core);
        let before = thread.as_ref().and_then(HotThread::read);
        HotProbe {
            thread,
            trace,
            before,
        }
    }

    /// The window; `None` when the thread was not found or ended within it.
    pub fn close(self) -> Option<HotWindow> {
        let thread = self.thread?;
        let after = thread.read();
        let traced = self.trace.map(|trace| trace.stop(&thread.name));
        Some(thread.window(self.before?, after?, traced))
    }
}

/// A `sched_switch` trace of one core (a tracefs instance of its own, so that nothing else
/// using tracefs is disturbed): which tasks ran there instead of the hot thread, and, where the
/// kernel has the `workqueue_execute_start` event, which work items its kernel workers ran. Only
/// where tracefs is mounted at `/sys/kernel/tracing` and writable (root); otherwise `start` says
/// why.
pub struct SwitchTrace {
    instance: PathBuf,
}

/// What a [`SwitchTrace`] saw, each list by name with its count, most first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traced {
    /// Every task other than the hot thread that the core switched to.
    pub ran_instead: Vec<(String, u64)>,
    /// Every kernel work item run on the core, by its function.
    pub work: Vec<(String, u64)>,
}

/// Counts into a list, most first, then by name.
fn by_count(counts: std::collections::HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// Reads a trace's text (`sched_switch` and `workqueue_execute_start` lines): what ran instead
/// of `hot`, and the work items run.
fn read_trace(text: &str, hot: &str) -> Traced {
    let mut tasks: std::collections::HashMap<String, u64> = Default::default();
    let mut work: std::collections::HashMap<String, u64> = Default::default();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        if let Some(next) = line.split(" next_comm=").nth(1) {
            let name = next.split(" next_pid=").next().unwrap_or(next).to_owned();
            if name != hot {
                *tasks.entry(name).or_default() += 1;
            }
        } else if line.contains("workqueue_execute_start:") {
            if let Some(function) = line.rsplit(" function ").next().filter(|f| *f != line) {
                *work.entry(function.trim().to_owned()).or_default() += 1;
            }
        }
    }
    Traced {
        ran_instead: by_count(tasks),
        work: by_count(work),
    }
}

impl SwitchTrace {
    pub fn start(core: usize) -> Result<SwitchTrace, String> {
        let root = PathBuf::from("/sys/kernel/tracing");
        if !root.join("events/sched/sched_switch").exists() {
            return Err("no tracefs at /sys/kernel/tracing (mount -t tracefs nodev \
                 /sys/kernel/tracing, as root)"
                .to_owned());
        }
        let instance = root.join(format!("instances/tickwire-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir(&instance);
        std::fs::create_dir(&instance).map_err(|error| format!("tracefs instance: {error}"))?;
        let trace = SwitchTrace { instance };
        // The core alone, as a hex CPU mask.
        let mut groups = vec![0u32; core / 32 + 1];
        groups[0] = 1 << (core % 32);
        for (file, value) in [
            ("tracing_cpumask", mask_text(&groups, 8)),
            ("buffer_size_kb", "4096".to_owned()),
            ("events/sched/sched_switch/enable", "1".to_owned()),
        ] {
            std::fs::write(trace.instance.join(file), value)
                .map_err(|error| format!("tracefs {file}: {error}"))?;
        }
        // The work items, where the kernel has the event: without it the switches still say
        // that a kernel worker ran, not what for.
        let _ = std::fs::write(trace.instance.join(WORK_EVENT), "1");
        std::fs::write(trace.instance.join("tracing_on"), "1")
            .map_err(|error| format!("tracefs tracing_on: {error}"))?;
        Ok(trace)
    }

    /// Stops the trace: every task other than `hot` that the core switched to, and every work
    /// item run there, with how many times, most first.
    pub fn stop(self, hot: &str) -> Traced {
        let _ = std::fs::write(self.instance.join("tracing_on"), "0");
        let text = std::fs::read_to_string(self.instance.join("trace")).unwrap_or_default();
        read_trace(&text, hot)
    }
}

/// The work-item event, under a tracefs instance.
const WORK_EVENT: &str = "events/workqueue/workqueue_execute_start/enable";

impl Drop for SwitchTrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.instance.join("tracing_on"), "0");
        let _ = std::fs::write(self.instance.join("events/sched/sched_switch/enable"), "0");
        let _ = std::fs::write(self.instance.join(WORK_EVENT), "0");
        let _ = std::fs::remove_dir(&self.instance);
    }
}

/// The steal time of `core` so far, in ms: the eighth value of its `cpuN` line in `/proc/stat`,
/// in clock ticks.
fn core_steal_ms(core: usize) -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    steal_ticks(&text, core).saturating_mul(1000) / ticks_per_s
}

/// The `steal` ticks of `core` in a `/proc/stat` text (0 when it has none).
fn steal_ticks(text: &str, core: usize) -> u64 {
    let label = format!("cpu{core}");
    text.lines()
        .find_map(|line| {
            let mut cells = line.split_whitespace();
            (cells.next() == Some(label.as_str()))
                .then(|| cells.nth(7).and_then(|cell| cell.parse::<u64>().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// The sum of `core`'s column over every row of a per-CPU table (`/proc/interrupts`,
/// `/proc/softirqs`), and the `LOC` row's value alone.
fn core_column(path: &str, core: usize) -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return (0, 0);
    };
    let mut lines = text.lines();
    // The header names the CPUs: the column of `CPU<core>`.
    let Some(column) = lines.next().and_then(|header| {
        header
            .split_whitespace()
            .position(|cpu| cpu == format!("CPU{core}"))
    }) else {
        return (0, 0);
    };
    let (mut total, mut timer) = (0u64, 0u64);
    for line in lines {
        let mut cells = line.split_whitespace();
        let Some(label) = cells.next() else {
            continue;
        };
        if let Some(value) = cells.nth(column).and_then(|cell| cell.parse::<u64>().ok()) {
            total += value;
            if label == "LOC:" {
                timer += value;
            }
        }
    }
    (total, timer)
}

impl std::fmt::Display for HotWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.delta;
        write!(
            f,
            "{} on core {}: {} voluntary + {} involuntary context switches, {} minor + {} major \
             page faults; core {}: {} interrupts ({} local timer), {} softirqs, {} ms stolen by \
             the host",
            self.thread,
            self.core,
            d.voluntary_switches,
            d.involuntary_switches,
            d.minor_faults,
            d.major_faults,
            self.core,
            d.core_interrupts,
            d.core_timer_interrupts,
            d.core_softirqs,
            d.core_steal_ms
        )?;
        match &self.ran_instead {
            Ok(tasks) if tasks.is_empty() => write!(f, "; nothing else ran on the core")?,
            Ok(tasks) => {
                let list: Vec<String> = tasks
                    .iter()
                    .take(8)
                    .map(|(name, count)| format!("{name} x{count}"))
                    .collect();
                write!(f, "; the core also ran: {}", list.join(", "))?;
            }
            Err(why) => write!(f, "; what else ran is not known: {why}")?,
        }
        if !self.work.is_empty() {
            let list: Vec<String> = self
                .work
                .iter()
                .take(8)
                .map(|(function, count)| format!("{function} x{count}"))
                .collect();
            write!(f, "; kernel work run there: {}", list.join(", "))?;
        }
        Ok(())
    }
}

/// A kernel setting written for the runs and written back when dropped: what a tuned host has
/// for good (the sysctl of `tuning/sysctl/99-tickwire-latency.conf`; the unbound workqueues off
/// the isolated cores, which the kernel does itself on a host booted with the `isolcpus` of
/// `tuning/isolate-cores`), set here only while the bench runs.
pub struct Setting {
    pub path: PathBuf,
    /// The value before, written back on drop.
    pub before: String,
    pub value: String,
}

impl Setting {
    /// Writes `value` to `path`, or says why not (the file missing, no permission).
    pub fn set(path: impl Into<PathBuf>, value: &str) -> Result<Setting, String> {
        let path = path.into();
        let before = std::fs::read_to_string(&path)
            .map_err(|error| format!("{}: {error}", path.display()))?
            .trim()
            .to_owned();
        std::fs::write(&path, value).map_err(|error| format!("{}: {error}", path.display()))?;
        Ok(Setting {
            path,
            before,
            value: value.to_owned(),
        })
    }

    /// The unbound workqueues' cpumask (`/sys/devices/virtual/workqueue/cpumask`, a hex mask)
    /// without `core`: their workers (`kworker/uN:M`) then run elsewhere. Per-core work items
    /// stay on their core whatever the mask.
    pub fn unbound_work_off_core(core: usize) -> Result<Setting, String> {
        let path = PathBuf::from("/sys/devices/virtual/workqueue/cpumask");
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        let without = mask_without(text.trim(), core)
            .ok_or_else(|| format!("{}: {:?} is no CPU mask", path.display(), text.trim()))?;
        Setting::set(path, &without)
    }
}

impl Drop for Setting {
    fn drop(&mut self) {
        if let Err(error) = std::fs::write(&self.path, &self.before) {
            eprintln!(
                "bench e2e: could not put {} back to {:?}: {error}",
                self.path.display(),
                self.before
            );
        }
    }
}

/// A hex CPU mask as the kernel writes it (32-bit groups separated by commas, the lowest group
/// last) without `core`; `None` when it is no such mask or would be left empty.
fn mask_without(mask: &str, core: usize) -> Option<String> {
    let mut groups: Vec<u32> = mask
        .split(',')
        .map(|group| u32::from_str_radix(group, 16).ok())
        .collect::<Option<_>>()?;
    let index = groups.len().checked_sub(1 + core / 32)?;
    groups[index] &= !(1u32 << (core % 32));
    if groups.iter().all(|&group| group == 0) {
        return None;
    }
    Some(mask_text(
        &groups,
        mask.split(',').next().map_or(8, str::len),
    ))
}

/// 32-bit groups as a hex CPU mask (the highest group first, as in `groups`), each group
/// `width` digits wide at least, separated by commas: the form the kernel reads and writes.
fn mask_text(groups: &[u32], width: usize) -> String {
    groups
        .iter()
        .map(|group| format!("{group:0width$x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `PF_KTHREAD` in `/proc/<pid>/stat`'s flags: the task is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

/// What `move_off` did with one task.
enum Moved {
    /// Moved; its mask before.
    Yes(libc::cpu_set_t),
    /// Allowed on the core and on no other, or the kernel refused to move it.
    Bound,
    /// Not allowed on the core (or gone): nothing to do.
    NotThere,
}

/// Takes `core` out of task `tid`'s affinity mask if the mask allows it and another core.
fn move_off(tid: i32, core: usize) -> Moved {
    // SAFETY: a zeroed cpu_set_t is valid, sched_getaffinity writes within its size.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: as above, for a task that may have exited (then an error).
    if unsafe { libc::sched_getaffinity(tid, size, &mut mask) } != 0 {
        return Moved::NotThere;
    }
    // SAFETY: CPU_ISSET reads within the set, for a core below CPU_SETSIZE.
    if core >= libc::CPU_SETSIZE as usize || !unsafe { libc::CPU_ISSET(core, &mask) } {
        return Moved::NotThere;
    }
    let mut without = mask;
    // SAFETY: within the set, as above.
    unsafe { libc::CPU_CLR(core, &mut without) };
    // SAFETY: CPU_COUNT reads the set.
    let others = unsafe { libc::CPU_COUNT(&without) };
    // SAFETY: sched_setaffinity reads the set; the kernel refuses (EINVAL) for a thread bound
    // to its core.
    if others == 0 || unsafe { libc::sched_setaffinity(tid, size, &without) } != 0 {
        return Moved::Bound;
    }
    Moved::Yes(mask)
}

/// Puts each moved task's mask back.
fn put_back(moved: &[(i32, libc::cpu_set_t)]) {
    for (tid, mask) in moved {
        // SAFETY: sched_setaffinity reads the saved set; a task that exited meanwhile makes it
        // fail, which changes nothing.
        unsafe { libc::sched_setaffinity(*tid, std::mem::size_of::<libc::cpu_set_t>(), mask) };
    }
}

/// Threads moved off a core for as long as this lives, to the other cores each may run on, as a
/// tuned host keeps them off an isolated core (issue 39: the bench's tuned layout); dropping it
/// puts every moved thread's mask back.
/// - [`ThreadsAway::kernel_off_core`]: the kernel threads, as `isolcpus=domain` keeps them.
///   Per-core kernel threads (`kworker/N`, `migration/N`, `ksoftirqd/N`) refuse to move and stay:
///   a tuned host has them too, fewer with `nohz_full`.
/// - [`ThreadsAway::others_off_core`]: every thread of every other user process, as
///   `isolcpus=domain` or a cpuset shield keeps them (on this VM the sandbox's own daemons,
///   `process_api`'s `tokio-rt-worker`s among them, took the clients' core several times a run).
///   This process is left alone (the simulator's threads are pinned already), and so are the
///   clients, which start after it.
pub struct ThreadsAway {
    moved: Vec<(i32, libc::cpu_set_t)>,
    /// The moved threads' names, for the report.
    pub names: Vec<String>,
    /// How many threads allowed on the core could not be moved (bound to it).
    pub bound: usize,
}

impl ThreadsAway {
    fn none() -> ThreadsAway {
        ThreadsAway {
            moved: Vec::new(),
            names: Vec::new(),
            bound: 0,
        }
    }

    /// Moves every movable kernel thread allowed on `core` off it. Needs CAP_SYS_NICE (root);
    /// without it nothing moves and `bound` counts every thread.
    pub fn kernel_off_core(core: usize) -> ThreadsAway {
        let mut away = ThreadsAway::none();
        // Each kernel thread is a process of its own.
        for (pid, path) in numbered("/proc") {
            away.consider(pid, &path, core, true);
        }
        away
    }

    /// Moves every thread of every other user process allowed on `core` off it. Needs
    /// CAP_SYS_NICE for other users' processes (root); what cannot move is counted in `bound`.
    pub fn others_off_core(core: usize) -> ThreadsAway {
        let mut away = ThreadsAway::none();
        let own = std::process::id() as i32;
        for (pid, path) in numbered("/proc") {
            if pid == own {
                continue;
            }
            for (tid, task) in numbered(path.join("task")) {
                // A kernel thread's one task: `kernel_off_core`'s.
                if !away.consider(tid, &task, core, false) {
                    break;
                }
            }
        }
        away
    }

    /// Moves task `tid` (its `/proc` directory `path`) off `core` if it is a kernel thread and
    /// `kernel`, or a user thread and not; returns false for a task of the other kind.
    fn consider(&mut self, tid: i32, path: &std::path::Path, core: usize, kernel: bool) -> bool {
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            return true;
        };
        // The fields after the name in parentheses: state is field 3, flags field 9.
        let Some((name_part, rest)) = stat.rsplit_once(") ") else {
            return true;
        };
        let flags = rest
            .split_whitespace()
            .nth(6)
            .and_then(|flags| flags.parse::<u64>().ok())
            .unwrap_or(0);
        if (flags & PF_KTHREAD != 0) != kernel {
            return false;
        }
        match move_off(tid, core) {
            Moved::Yes(mask) => {
                self.moved.push((tid, mask));
                let name = name_part.split_once(" (").map_or("", |(_, name)| name);
                self.names.push(name.to_owned());
            }
            Moved::Bound => self.bound += 1,
            Moved::NotThere => {}
        }
        true
    }
}

impl Drop for ThreadsAway {
    fn drop(&mut self) {
        put_back(&self.moved);
    }
}

/// The entries of a directory whose names are numbers (`/proc`'s processes, a process's tasks).
fn numbered(dir: impl AsRef<std::path::Path>) -> impl Iterator<Item = (i32, PathBuf)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let id = entry.file_name().to_str()?.parse::<i32>().ok()?;
            Some((id, entry.path()))
        })
}

/// The device interrupts that may land on a core, steered to the other cores for as long as this
/// lives, as `tuning/irq-affinity` steers them on a tuned host (issue 39: on this VM the block
/// device's completions landed on the clients' core, and its `kworker/N:1H` preempted the hot
/// thread 127 times in one run). An interrupt the kernel will not move (a managed one) stays.
/// Dropping it writes every moved interrupt's list back.
pub struct IrqsAway {
    moved: Vec<(PathBuf, String)>,
    /// The moved interrupts' numbers.
    pub irqs: Vec<u32>,
    /// How many could not be moved.
    pub refused: usize,
}

/// Parses a CPU list (`0-3,5`) into the cores it names.
fn cpu_list(text: &str) -> Vec<usize> {
    let mut cores = Vec::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(first), Ok(last)) = (first.parse::<usize>(), last.parse::<usize>()) {
            cores.extend(first..=last.min(first + 4096));
        }
    }
    cores
}

impl IrqsAway {
    /// Steers every interrupt allowed on `core` to the others it is allowed on. Needs root;
    /// without it nothing moves and `refused` counts them.
    pub fn off_core(core: usize) -> IrqsAway {
        let mut away = IrqsAway {
            moved: Vec::new(),
            irqs: Vec::new(),
            refused: 0,
        };
        let Ok(entries) = std::fs::read_dir("/proc/irq") else {
            return away;
        };
        for entry in entries.flatten() {
            let Some(irq) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path().join("smp_affinity_list");
            let Ok(list) = std::fs::read_to_string(&path) else {
                continue;
            };
            let cores = cpu_list(&list);
            if !cores.contains(&core) {
                continue;
            }
            let others: Vec<String> = cores
                .iter()
                .filter(|&&other| other != core)
                .map(|other| other.to_string())
                .collect();
            if others.is_empty() || std::fs::write(&path, others.join(",")).is_err() {
                away.refused += 1;
                continue;
            }
            away.moved.push((path, list.trim().to_owned()));
            away.irqs.push(irq);
        }
        away.irqs.sort_unstable();
        away
    }
}

impl Drop for IrqsAway {
    fn drop(&mut self) {
        for (path, list) in &self.moved {
            let _ = std::fs::write(path, list);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(pid: i32) -> Option<libc::cpu_set_t> {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes within it.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let status = unsafe {
            libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask)
        };
        (status == 0).then_some(mask)
    }

    #[test]
    fn steal_is_read_from_the_cores_own_line() {
        let stat = "cpu  1798441 431 224592 690479 95936 0 8787 20670 0 0\n\
                    cpu0 811703 183 107370 440445 44875 0 3863 10455 0 0\n\
                    cpu1 986738 247 117222 250034 51061 0 4923 10214 0 0\n\
                    cpu10 1 2 3 4 5 6 7 99 0 0\nintr 12345\n";
        assert_eq!(steal_ticks(stat, 0), 10455);
        assert_eq!(steal_ticks(stat, 1), 10214);
        assert_eq!(steal_ticks(stat, 10), 99);
        assert_eq!(steal_ticks(stat, 2), 0, "no such core");
        assert_eq!(steal_ticks("cpu1 1 2 3\n", 1), 0, "a line without steal");
    }

    #[test]
    fn a_trace_names_what_ran_instead_and_the_work_items() {
        // Lines as tracefs writes them (the 6.18 kernel's format), a header comment, and one
        // switch back to the hot thread that must not count.
        let text = "\
# tracer: nop
          tw-net-3101  [001] d..2.   100.000001: sched_switch: prev_comm=tw-net prev_pid=3101 prev_prio=120 prev_state=R+ ==> next_comm=kworker/1:1 next_pid=54 next_prio=120
     kworker/1:1-54    [001] .....   100.000002: workqueue_execute_start: work struct 00000000a1b2c3d4: function vmstat_update
     kworker/1:1-54    [001] d..2.   100.000003: sched_switch: prev_comm=kworker/1:1 prev_pid=54 prev_prio=120 prev_state=I ==> next_comm=tw-net next_pid=3101 next_prio=120
          tw-net-3101  [001] d..2.   100.500001: sched_switch: prev_comm=tw-net prev_pid=3101 prev_prio=120 prev_state=R+ ==> next_comm=kworker/1:1 next_pid=54 next_prio=120
     kworker/1:1-54    [001] .....   100.500002: workqueue_execute_start: work struct 00000000a1b2c3d4: function vmstat_update
     kworker/1:1-54    [001] .....   100.500003: workqueue_execute_start: work struct 00000000e5f6a7b8: function psi_avgs_work
          tw-net-3101  [001] d..2.   101.000001: sched_switch: prev_comm=tw-net prev_pid=3101 prev_prio=120 prev_state=R+ ==> next_comm=migration/1 next_pid=20 next_prio=0
";
        let traced = read_trace(text, "tw-net");
        assert_eq!(
            traced.ran_instead,
            vec![("kworker/1:1".to_owned(), 2), ("migration/1".to_owned(), 1)]
        );
        assert_eq!(
            traced.work,
            vec![
                ("vmstat_update".to_owned(), 2),
                ("psi_avgs_work".to_owned(), 1)
            ]
        );
        assert_eq!(read_trace("", "tw-net"), Traced::default());
    }

    #[test]
    fn a_setting_is_written_for_the_runs_and_put_back() {
        let dir = std::env::temp_dir().join(format!("tickwire-setting-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("stat_interval");
        std::fs::write(&path, "1\n").expect("write");
        {
            let setting = Setting::set(&path, "10").expect("set");
            assert_eq!(setting.before, "1");
            assert_eq!(std::fs::read_to_string(&path).expect("read"), "10");
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "1");
        assert!(Setting::set(dir.join("missing"), "10").is_err());
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_core_leaves_a_cpu_mask_as_the_kernel_writes_it() {
        assert_eq!(mask_text(&[1 << 1], 8), "00000002");
        assert_eq!(mask_text(&[1, 0], 8), "00000001,00000000");
        assert_eq!(mask_without("3", 1).as_deref(), Some("1"));
        assert_eq!(mask_without("ffff", 3).as_deref(), Some("fff7"));
        assert_eq!(
            mask_without("00000001,ffffffff", 33).as_deref(),
            Some("00000001,ffffffff")
        );
        assert_eq!(
            mask_without("00000003,ffffffff", 32).as_deref(),
            Some("00000002,ffffffff")
        );
        assert_eq!(mask_without("00000001,00000000", 32), None);
        assert_eq!(mask_without("2", 1), None);
        assert_eq!(mask_without("zz", 0), None);
        assert_eq!(mask_without("3", 40), None);
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-1\n"), [0, 1]);
        assert_eq!(cpu_list("0,2-4,7"), [0, 2, 3, 4, 7]);
        assert_eq!(cpu_list(""), Vec::<usize>::new());
    }

    /// One test for both movers, so that they never run at once.
    #[test]
    fn kernel_threads_and_interrupts_leave_the_core_and_come_back() {
        kernel_threads_leave_the_core_and_come_back();
        interrupts_leave_the_core_and_come_back();
    }

    fn interrupts_leave_the_core_and_come_back() {
        let lists = || -> Vec<(u32, String)> {
            let mut lists: Vec<(u32, String)> = std::fs::read_dir("/proc/irq")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| {
                    let irq = entry.file_name().to_str()?.parse().ok()?;
                    let list =
                        std::fs::read_to_string(entry.path().join("smp_affinity_list")).ok()?;
                    Some((irq, list.trim().to_owned()))
                })
                .collect();
            lists.sort();
            lists
        };
        let before = lists();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0
            || !before
                .iter()
                .any(|(_, list)| cpu_list(list).len() > 1 && cpu_list(list).contains(&1))
        {
            eprintln!("skipped: needs root and an interrupt allowed on core 1 and another core");
            return;
        }
        let away = IrqsAway::off_core(1);
        assert!(
            !away.irqs.is_empty(),
            "nothing moved ({} refused)",
            away.refused
        );
        let during = lists();
        for irq in &away.irqs {
            let (_, list) = during.iter().find(|(n, _)| n == irq).expect("the irq");
            assert!(
                !cpu_list(list).contains(&1),
                "irq {irq} still allowed on core 1: {list}"
            );
        }
        drop(away);
        assert_eq!(lists(), before, "every list put back");
    }

    fn kernel_threads_leave_the_core_and_come_back() {
        // kthreadd (pid 2), every kernel thread's parent, may run anywhere and may be moved.
        let Some(before) = allowed(2) else {
            eprintln!("skipped: no kthreadd to read");
            return;
        };
        // SAFETY: geteuid has no preconditions; CPU_COUNT and CPU_ISSET read the set.
        let (root, count, on_one) = unsafe {
            (
                libc::geteuid() == 0,
                libc::CPU_COUNT(&before),
                libc::CPU_ISSET(1, &before),
            )
        };
        if !root || count < 2 || !on_one {
            eprintln!("skipped: needs root and kthreadd allowed on two cores, core 1 among them");
            return;
        }
        let away = ThreadsAway::kernel_off_core(1);
        assert!(
            away.names.iter().any(|name| name == "kthreadd"),
            "{:?}",
            away.names
        );
        let during = allowed(2).expect("kthreadd");
        // SAFETY: CPU_ISSET reads the set.
        let still_on_one = unsafe { libc::CPU_ISSET(1, &during) };
        assert!(!still_on_one, "kthreadd still allowed on core 1");
        drop(away);
        let after = allowed(2).expect("kthreadd");
        // SAFETY: CPU_EQUAL reads both sets.
        let same = unsafe { libc::CPU_EQUAL(&before, &after) };
        assert!(same, "kthreadd's mask put back");
    }

    /// Another process's thread allowed on cores 0 and 1 leaves core 1 while the guard lives
    /// and gets its mask back after; this process's own threads stay where they are.
    #[test]
    fn other_processes_threads_leave_the_core_and_come_back() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let Some(own_before) = allowed(0) else {
            eprintln!("skipped: this thread's mask cannot be read");
            return;
        };
        // SAFETY: CPU_ISSET reads the set.
        let two_cores =
            unsafe { libc::CPU_ISSET(0, &own_before) && libc::CPU_ISSET(1, &own_before) };
        if !root || !two_cores {
            eprintln!("skipped: needs root and this process allowed on cores 0 and 1");
            return;
        }
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id() as i32;
        let before = allowed(pid).expect("the child's mask");
        let away = ThreadsAway::others_off_core(1);
        let during = allowed(pid).expect("the child's mask");
        let own_during = allowed(0).expect("this thread's mask");
        drop(away);
        let after = allowed(pid).expect("the child's mask");
        let _ = child.kill();
        let _ = child.wait();
        // SAFETY: CPU_ISSET and CPU_EQUAL read the sets.
        unsafe {
            assert!(
                libc::CPU_ISSET(1, &before),
                "the child started allowed on core 1"
            );
            assert!(
                !libc::CPU_ISSET(1, &during),
                "the child still allowed on core 1"
            );
            assert!(libc::CPU_ISSET(0, &during), "the child kept core 0");
            assert!(
                libc::CPU_EQUAL(&own_before, &own_during),
                "this process's threads were left alone"
            );
            assert!(
                libc::CPU_EQUAL(&before, &after),
                "the child's mask put back"
            );
        }
    }

    #[test]
    fn a_busy_thread_of_this_process_is_read_and_its_window_counts_what_it_did() {
        let core = 0;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("tw-hot-test".to_owned())
            .spawn(move || {
                ready_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                // Ten voluntary switches: each sleep gives the core up.
                for _ in 0..10 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                // A page fault or more: fresh memory touched.
                let mut pages = vec![0u8; 1 << 20];
                for index in (0..pages.len()).step_by(4096) {
                    pages[index] = 1;
                }
                std::hint::black_box(&pages);
                done_tx.send(()).unwrap();
                stop_rx.recv().unwrap();
            })
            .unwrap();
        ready_rx.recv().unwrap();
        let hot = HotThread::find(std::process::id(), Some("tw-hot-test"), core)
            .expect("the thread is found by its name");
        let before = hot.read().unwrap();
        go_tx.send(()).unwrap();
        done_rx.recv().unwrap();
        let after = hot.read().unwrap();
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
        let window = hot.window(before, after, Err("not traced".to_owned()));
        assert!(
            window.delta.voluntary_switches >= 10,
            "{window}: the sleeps were switches"
        );
        assert!(window.delta.minor_faults >= 1, "{window}");
        assert!(window.to_string().starts_with("tw-hot-test on core 0: "));
        assert!(HotThread::find(std::process::id(), Some("no-such-thread"), core).is_none());
        let main = HotThread::find(std::process::id(), None, core).unwrap();
        assert!(main.read().is_some());
    }

    #[test]
    fn the_cores_column_is_summed_over_every_row() {
        assert_eq!(core_column("/nonexistent", 0), (0, 0));
        let (total, timer) = core_column("/proc/interrupts", 0);
        assert!(total >= timer);
    }
}
