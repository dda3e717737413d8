//! Latency from the simulator's send to the strategy, without changing a byte on the wire.
//!
//! The simulator stamps each bookTicker message with the time its write to the socket returned
//! and hands `(update id u, send_ns)` to the strategy thread through an SPSC ring, in send order.
//! Quotes reach the strategy in the same order (one connection, one decoder, in-order rings), so
//! the strategy finds a quote's stamp by walking the stamps forward to the first with the quote's
//! `u`. Stamps it walks past belong to messages that produced no quote here (dropped, or not yet
//! decoded when a later one was): they are counted as unmatched, never guessed.

use crate::ring::Consumer;

/// When the simulator handed one message to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The bookTicker update id `u` of the message.
    pub key: u64,
    /// ns since the Unix epoch, from the same calibrated clock the appliance reads.
    pub send_ns: u64,
}

/// How far ahead of the oldest pending stamp a quote is looked for. A quote further ahead than
/// this means its stamp was never sent (or overflowed the ring); it then goes unmeasured and the
/// pending stamps stay for the quotes they belong to.
const LOOKAHEAD: usize = 4096;

/// Finds each quote's send stamp.
pub struct StampMatcher {
    stamps: Consumer<Stamp>,
    /// Stamps taken off the ring, oldest first, not matched yet. Bounded by `LOOKAHEAD`.
    pending: std::collections::VecDeque<Stamp>,
    /// Stamps passed over: their message produced no quote here.
    pub unmatched: u64,
    /// Quotes with no stamp within the lookahead.
    pub unstamped: u64,
}

impl StampMatcher {
    pub fn new(stamps: Consumer<Stamp>) -> StampMatcher {
        StampMatcher {
            stamps,
            pending: std::collections::VecDeque::with_capacity(LOOKAHEAD),
            unmatched: 0,
            unstamped: 0,
        }
    }

    /// The send time of the venue message with update id `key`, consuming its stamp and the
    /// older stamps no quote claimed.
    pub fn send_ns(&mut self, key: u64) -> Option<u64> {
        loop {
            if let Some(position) = self.pending.iter().position(|stamp| stamp.key == key) {
                self.unmatched += position as u64;
                self.pending.drain(..position);
                return self.pending.pop_front().map(|stamp| stamp.send_ns);
            }
            if self.pending.len() >= LOOKAHEAD {
                self.unstamped += 1;
                return None;
            }
            // Refill from the ring; a quote can arrive before its stamp is visible (the
            // simulator stamps after its write returns), so an empty ring means "unstamped".
            let before = self.pending.len();
            while self.pending.len() < LOOKAHEAD {
                match self.stamps.try_pop() {
                    Some(stamp) => self.pending.push_back(stamp),
                    None => break,
                }
            }
            if self.pending.len() == before {
                self.unstamped += 1;
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_in_order_and_skips_stamps_without_quotes() {
        let (mut producer, consumer) = crate::ring::ring::<Stamp>(64);
        for (key, send_ns) in [(10, 100), (11, 110), (5, 120), (12, 130)] {
            producer.try_push(Stamp { key, send_ns }).unwrap();
        }
        let mut matcher = StampMatcher::new(consumer);
        assert_eq!(matcher.send_ns(10), Some(100));
        // Quote 11 was lost: its stamp is passed over when 5 (another symbol) arrives.
        assert_eq!(matcher.send_ns(5), Some(120));
        assert_eq!(matcher.unmatched, 1);
        // A quote with no stamp consumes nothing.
        assert_eq!(matcher.send_ns(99), None);
        assert_eq!(matcher.unstamped, 1);
        assert_eq!(matcher.send_ns(12), Some(130));
    }
}
