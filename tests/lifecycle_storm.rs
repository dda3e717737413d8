//! A venue that refuses every connection for a minute: the storm breaker keeps the attempts to
//! `reconnect.max_attempts_per_minute` however short the backoff, and nothing spins while it
//! waits. Alone in its own test binary, so that the process's CPU time is this test's.

#[path = "support/appliance.rs"]
mod appliance;
#[path = "support/common.rs"]
mod common;
#[path = "support/skip.rs"]
mod skip;

use appliance::{start, synthetic, Setup};
use std::time::{Duration, Instant};
use tickwire::lifecycle::Reason;

const PER_MINUTE: u64 = 10;

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass; RUSAGE_SELF is valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[test]
fn a_venue_refusing_every_connection_for_a_minute_gets_at_most_the_configured_attempts() {
    let closed_port = appliance::free_port();
    // A backoff that alone would retry every few milliseconds: only the breaker holds it back.
    let mut pair = start(
        synthetic(10.0),
        |_| {},
        Setup {
            port: Some(closed_port),
            channels: vec!["bookTicker"],
            venue_extra: format!(
                "[reconnect]\ninitial_delay_ms = 1\nmax_delay_ms = 4\nfactor = 2.0\n\
                 max_attempts_per_minute = {PER_MINUTE}\n"
            ),
            ..Setup::default()
        },
    );
    let started = Instant::now();
    let cpu_before = cpu_time();
    let minute = Duration::from_secs(60);
    pair.run_until(
        minute + Duration::from_secs(5),
        "a minute of refusals",
        |_| started.elapsed() >= minute - Duration::from_millis(500),
    );
    let cpu = cpu_time() - cpu_before;
    let wall = started.elapsed();
    let counters = pair.session.venues.counters(0);
    assert_eq!(
        counters.attempts, PER_MINUTE,
        "the breaker allows exactly {PER_MINUTE} attempts in the minute: {counters:?}"
    );
    assert_eq!(counters.transitions.get(Reason::ConnectFailed), PER_MINUTE);
    assert!(counters.postponed >= 1, "{counters:?}");
    assert!(!pair.session.venues.all_live());
    // A busy loop would burn a whole core (60 s); the appliance's threads wait in the kernel.
    assert!(
        cpu < wall / 5,
        "CPU time {cpu:?} over {wall:?}: something spins while the venue refuses"
    );
    println!("{} attempts, CPU {cpu:?} in {wall:?}", counters.attempts);
    pair.finish();
}
