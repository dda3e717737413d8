//! How long to wait before the next connection attempt: exponential backoff with full jitter,
//! under a per-venue cap on attempts per minute (the storm breaker).

use crate::config::ReconnectConfig;
use std::collections::VecDeque;

const NS_PER_MS: u64 = 1_000_000;
/// The storm breaker's window.
pub const BREAKER_WINDOW_NS: u64 = 60_000 * NS_PER_MS;

/// Exponential backoff with full jitter: the n-th consecutive failure waits a uniformly random
/// time in `[0, min(max_delay, initial_delay * factor^n)]` ("Exponential Backoff And Jitter",
/// the AWS architecture blog), so that many clients dropped at once do not come back in step.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial_ns: u64,
    max_ns: u64,
    factor: f64,
    /// Consecutive failures since the last reset.
    failures: u32,
    rng: u64,
}

impl Backoff {
    /// `seed` makes the jitter reproducible in tests; any value works (0 is remapped). The
    /// delays are bounded by the config check (`reconnect.max_delay_ms` at most
    /// [`crate::config::RECONNECT_DELAY_MS_MAX`]); a larger one saturates rather than wraps into
    /// a short delay (issue 32).
    pub fn new(config: &ReconnectConfig, seed: u64) -> Backoff {
        Backoff {
            initial_ns: config.initial_delay_ms.max(1).saturating_mul(NS_PER_MS),
            max_ns: config
                .max_delay_ms
                .max(config.initial_delay_ms)
                .max(1)
                .saturating_mul(NS_PER_MS),
            factor: config.factor.max(1.0),
            failures: 0,
            rng: seed | 1,
        }
    }

    /// The upper bound of the next delay: `min(max_delay, initial_delay * factor^failures)`.
    pub fn ceiling_ns(&self) -> u64 {
        let grown = self.initial_ns as f64 * self.factor.powi(self.failures.min(1_000) as i32);
        if grown.is_finite() && grown < self.max_ns as f64 {
            grown as u64
        } else {
            self.max_ns
        }
    }

    /// The delay before the next attempt, and one more failure counted.
    pub fn next_delay_ns(&mut self) -> u64 {
        let ceiling = self.ceiling_ns();
        self.failures = self.failures.saturating_add(1);
        // Full jitter, but never zero: a retry always yields the core for at least 1 ms.
        (self.next_random() % ceiling.saturating_add(1)).max(NS_PER_MS)
    }

    /// Consecutive failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A connection stayed live long enough: the next failure starts from the initial delay.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// xorshift64*: jitter needs spread, not cryptographic strength.
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// At most `per_minute` connection attempts in any 60 s window, for one venue, whatever the
/// backoff says: a venue that accepts and drops at once resets no backoff (the connection never
/// stays live), but without this cap a flapping venue with many connections could still be
/// hammered.
#[derive(Clone, Debug)]
pub struct StormBreaker {
    per_minute: usize,
    /// When the attempts in the current window started, oldest first.
    attempts: VecDeque<u64>,
    /// Attempts the breaker postponed.
    pub postponed: u64,
}

impl StormBreaker {
    pub fn new(per_minute: u32) -> StormBreaker {
        let per_minute = per_minute.max(1) as usize;
        StormBreaker {
            per_minute,
            attempts: VecDeque::with_capacity(per_minute),
            postponed: 0,
        }
    }

    /// The earliest time at or after `at_ns` when an attempt is allowed.
    pub fn earliest(&mut self, at_ns: u64) -> u64 {
        while self
            .attempts
            .front()
            .is_some_and(|&start| start + BREAKER_WINDOW_NS <= at_ns)
        {
            self.attempts.pop_front();
        }
        if self.attempts.len() < self.per_minute {
            return at_ns;
        }
        // The window is full: the next attempt waits until the oldest one leaves it.
        let index = self.attempts.len() - self.per_minute;
        self.attempts[index] + BREAKER_WINDOW_NS
    }

    /// Records an attempt made at `now_ns`.
    pub fn record(&mut self, now_ns: u64) {
        self.attempts.push_back(now_ns);
    }

    /// Attempts in the 60 s before `now_ns`.
    pub fn attempts_in_window(&self, now_ns: u64) -> usize {
        self.attempts
            .iter()
            .filter(|&&start| start + BREAKER_WINDOW_NS > now_ns)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ReconnectConfig {
        ReconnectConfig {
            initial_delay_ms: 100,
            max_delay_ms: 1_000,
            factor: 2.0,
            max_attempts: None,
            reset_after_live_ms: 60_000,
            max_attempts_per_minute: 10,
        }
    }

    #[test]
    fn ceiling_grows_by_the_factor_up_to_the_maximum_and_resets() {
        let mut backoff = Backoff::new(&config(), 7);
        let mut ceilings = Vec::new();
        for _ in 0..6 {
            ceilings.push(backoff.ceiling_ns() / NS_PER_MS);
            backoff.next_delay_ns();
        }
        assert_eq!(ceilings, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(backoff.failures(), 6);
        backoff.reset();
        assert_eq!(backoff.ceiling_ns(), 100 * NS_PER_MS);
    }

    #[test]
    fn delays_are_jittered_within_the_ceiling() {
        let mut backoff = Backoff::new(&config(), 42);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            backoff.reset();
            let delay = backoff.next_delay_ns();
            assert!((NS_PER_MS..=100 * NS_PER_MS).contains(&delay), "{delay}");
            seen.insert(delay / NS_PER_MS);
        }
        // Full jitter spreads the delays over the whole range, not around one value.
        assert!(seen.len() > 30, "{seen:?}");
        assert!(seen.iter().any(|&ms| ms < 30) && seen.iter().any(|&ms| ms > 70));
    }

    #[test]
    fn a_huge_factor_saturates_at_the_maximum() {
        let mut config = config();
        config.factor = 10.0;
        let mut backoff = Backoff::new(&config, 1);
        for _ in 0..5_000 {
            assert!(backoff.next_delay_ns() <= 1_000 * NS_PER_MS);
        }
        assert_eq!(backoff.ceiling_ns(), 1_000 * NS_PER_MS);
    }

    /// Issue 32: `max_delay_ms * NS_PER_MS` wrapped in a release build for a delay past the
    /// config's bound, into a short (or zero) ceiling. It saturates: the ceiling only grows.
    #[test]
    fn a_max_delay_past_the_bound_saturates_rather_than_wraps() {
        let mut config = config();
        config.max_delay_ms = u64::MAX / 1_000;
        let mut backoff = Backoff::new(&config, 3);
        let mut previous = 0;
        for _ in 0..2_000 {
            let ceiling = backoff.ceiling_ns();
            assert!(ceiling >= previous, "{ceiling} after {previous}");
            previous = ceiling;
            backoff.next_delay_ns();
        }
        assert_eq!(backoff.ceiling_ns(), u64::MAX);
        config.initial_delay_ms = u64::MAX;
        let backoff = Backoff::new(&config, 3);
        assert_eq!(backoff.ceiling_ns(), u64::MAX);
    }

    #[test]
    fn breaker_allows_k_attempts_per_rolling_minute() {
        let mut breaker = StormBreaker::new(3);
        let second = 1_000 * NS_PER_MS;
        for t in [0, 1, 2] {
            assert_eq!(breaker.earliest(t * second), t * second);
            breaker.record(t * second);
        }
        // The fourth waits until the first leaves the window.
        assert_eq!(breaker.earliest(3 * second), BREAKER_WINDOW_NS);
        assert_eq!(breaker.earliest(BREAKER_WINDOW_NS), BREAKER_WINDOW_NS);
        breaker.record(BREAKER_WINDOW_NS);
        assert_eq!(
            breaker.earliest(BREAKER_WINDOW_NS),
            BREAKER_WINDOW_NS + second
        );
        assert_eq!(breaker.attempts_in_window(BREAKER_WINDOW_NS), 3);
    }
}
