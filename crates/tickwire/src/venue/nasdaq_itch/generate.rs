//! A generated ITCH 5.0 market, for tests, benchmarks and fuzz seeds (Nasdaq publishes no
//! volume we may ship): deterministic from a seed, over any number of stocks, a day-like mix of
//! adds (a few with MPID), partial cancels, deletes, executions (some with price, printable or
//! not), replaces and hidden trades, each message written in the specification's layout
//! ([`Generator::next_message`]), and [`mold_packet`] to frame messages as MoldUDP64 does.
//!
//! Every message it makes is one a correct book accepts: it keeps the live orders itself (in a
//! `Vec` reserved at its cap, so that steady state allocates nothing) and only executes, cancels
//! or replaces those, never more shares than they have.

use super::mold::Session;

/// A 64-bit generator (xorshift64*), enough for a market mix.
#[derive(Clone, Copy)]
struct Rng(u64);

impl Rng {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }
}

#[derive(Clone, Copy)]
struct Live {
    order_ref: u64,
    locate: u16,
    side: u8,
    price: u32,
    shares: u32,
}

/// Writes a generated market's messages.
pub struct Generator {
    rng: Rng,
    stocks: u16,
    target_live: usize,
    live: Vec<Live>,
    next_ref: u64,
    next_match: u64,
    timestamp_ns: u64,
    hot_percent: u64,
}

/// The longest message [`Generator::next_message`] writes (a `P`).
pub const MAX_GENERATED_LEN: usize = 44;

fn symbol(locate: u16) -> [u8; 8] {
    let mut out = *b"S       ";
    let mut n = locate;
    let mut digits = [b'0'; 5];
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out[1..6].copy_from_slice(&digits);
    out
}

impl Generator {
    /// A market of `stocks` stocks (locates 1 to `stocks`) that keeps about `target_live`
    /// orders resting.
    pub fn new(seed: u64, stocks: u16, target_live: usize) -> Generator {
        Generator {
            rng: Rng(seed | 1),
            stocks: stocks.max(1),
            target_live: target_live.max(1),
            live: Vec::with_capacity(target_live.max(1) * 2),
            next_ref: 1,
            next_match: 1,
            timestamp_ns: 4 * 3_600_000_000_000,
            hot_percent: 0,
        }
    }

    /// Makes `percent` of the executions, cancels, deletes and replaces hit one of the 4,096
    /// orders added last (roughly: the live list is kept by swap-removal), the rest any live
    /// order. 0 (the default) picks uniformly among the live orders: every access anywhere in
    /// the book, the worst case for caches. A real day is skewed: most orders are cancelled or
    /// executed soon after they are added.
    pub fn with_hot_percent(mut self, percent: u64) -> Generator {
        self.hot_percent = percent.min(100);
        self
    }

    /// Orders resting now.
    pub fn live_orders(&self) -> usize {
        self.live.len()
    }

    fn price(&mut self, locate: u16, side: u8) -> u32 {
        // Each stock trades around its own level ($10 to $500), a few cents wide per side.
        let mid = 100_000 + u32::from(locate) * 7_919 % 4_900_000;
        let offset = 100 * (1 + self.rng.below(40) as u32);
        if side == b'B' {
            mid - offset
        } else {
            mid + offset
        }
    }

    /// Writes the next message into `out` and returns its length.
    pub fn next_message(&mut self, out: &mut [u8; MAX_GENERATED_LEN]) -> usize {
        self.timestamp_ns += 1 + self.rng.below(2_000);
        let roll = self.rng.below(1000);
        let fill = self.live.len() * 100 / self.target_live;
        if self.live.is_empty() || (roll < 450 && fill < 110) || fill < 50 {
            return self.add(out);
        }
        let len = self.live.len() as u64;
        let index = if self.hot_percent > 0 && self.rng.below(100) < self.hot_percent {
            (len - 1 - self.rng.below(len.min(4_096))) as usize
        } else {
            self.rng.below(len) as usize
        };
        let order = self.live[index];
        let ts = self.timestamp_ns;
        let header = |out: &mut [u8; MAX_GENERATED_LEN], kind: u8, locate: u16| {
            out[0] = kind;
            out[1..3].copy_from_slice(&locate.to_be_bytes());
            out[3..5].copy_from_slice(&0u16.to_be_bytes());
            out[5..11].copy_from_slice(&ts.to_be_bytes()[2..]);
        };
        match roll {
            0..=649 => {
                // Delete (the commonest ending of a Nasdaq order).
                header(out, b'D', order.locate);
                out[11..19].copy_from_slice(&order.order_ref.to_be_bytes());
                self.live.swap_remove(index);
                19
            }
            650..=749 => {
                let shares = 1 + self.rng.below(u64::from(order.shares)) as u32;
                header(out, b'X', order.locate);
                out[11..19].copy_from_slice(&order.order_ref.to_be_bytes());
                out[19..23].copy_from_slice(&shares.to_be_bytes());
                self.take(index, shares);
                23
            }
            750..=849 => {
                let shares = 1 + self.rng.below(u64::from(order.shares)) as u32;
                let with_price = self.rng.below(5) == 0;
                header(out, if with_price { b'C' } else { b'E' }, order.locate);
                out[11..19].copy_from_slice(&order.order_ref.to_be_bytes());
                out[19..23].copy_from_slice(&shares.to_be_bytes());
                out[23..31].copy_from_slice(&self.next_match.to_be_bytes());
                self.next_match += 1;
                self.take(index, shares);
                if with_price {
                    out[31] = if self.rng.below(4) == 0 { b'N' } else { b'Y' };
                    out[32..36].copy_from_slice(&order.price.to_be_bytes());
                    36
                } else {
                    31
                }
            }
            850..=979 => {
                let new_ref = self.next_ref;
                self.next_ref += 1;
                let price = self.price(order.locate, order.side);
                let shares = 100 * (1 + self.rng.below(20) as u32);
                header(out, b'U', order.locate);
                out[11..19].copy_from_slice(&order.order_ref.to_be_bytes());
                out[19..27].copy_from_slice(&new_ref.to_be_bytes());
                out[27..31].copy_from_slice(&shares.to_be_bytes());
                out[31..35].copy_from_slice(&price.to_be_bytes());
                self.live[index] = Live {
                    order_ref: new_ref,
                    price,
                    shares,
                    ..order
                };
                35
            }
            _ => {
                // A trade against a hidden order.
                header(out, b'P', order.locate);
                out[11..19].copy_from_slice(&0u64.to_be_bytes());
                out[19] = order.side;
                out[20..24].copy_from_slice(&100u32.to_be_bytes());
                out[24..32].copy_from_slice(&symbol(order.locate));
                out[32..36].copy_from_slice(&order.price.to_be_bytes());
                out[36..44].copy_from_slice(&self.next_match.to_be_bytes());
                self.next_match += 1;
                44
            }
        }
    }

    fn take(&mut self, index: usize, shares: u32) {
        if shares >= self.live[index].shares {
            self.live.swap_remove(index);
        } else {
            self.live[index].shares -= shares;
        }
    }

    fn add(&mut self, out: &mut [u8; MAX_GENERATED_LEN]) -> usize {
        let locate = 1 + self.rng.below(u64::from(self.stocks)) as u16;
        let side = if self.rng.below(2) == 0 { b'B' } else { b'S' };
        let price = self.price(locate, side);
        let shares = 100 * (1 + self.rng.below(20) as u32);
        let order_ref = self.next_ref;
        self.next_ref += 1;
        let mpid = self.rng.below(20) == 0;
        out[0] = if mpid { b'F' } else { b'A' };
        out[1..3].copy_from_slice(&locate.to_be_bytes());
        out[3..5].copy_from_slice(&0u16.to_be_bytes());
        out[5..11].copy_from_slice(&self.timestamp_ns.to_be_bytes()[2..]);
        out[11..19].copy_from_slice(&order_ref.to_be_bytes());
        out[19] = side;
        out[20..24].copy_from_slice(&shares.to_be_bytes());
        out[24..32].copy_from_slice(&symbol(locate));
        out[32..36].copy_from_slice(&price.to_be_bytes());
        if self.live.len() < self.live.capacity() {
            self.live.push(Live {
                order_ref,
                locate,
                side,
                price,
                shares,
            });
        }
        if mpid {
            out[36..40].copy_from_slice(b"GSCO");
            40
        } else {
            36
        }
    }
}

/// Appends one MoldUDP64 downstream packet of `messages` from `sequence` to `out` (cleared
/// first). More than 65,534 messages, or one longer than 65,535 bytes, is refused (`false`).
pub fn mold_packet<'m>(
    session: Session,
    sequence: u64,
    messages: impl IntoIterator<Item = &'m [u8]>,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    out.extend_from_slice(&session.0);
    out.extend_from_slice(&sequence.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let mut count: u16 = 0;
    for message in messages {
        let Ok(len) = u16::try_from(message.len()) else {
            return false;
        };
        if count == super::mold::END_OF_SESSION - 1 {
            return false;
        }
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(message);
        count += 1;
    }
    out[18..20].copy_from_slice(&count.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::super::book::{BookConfig, ItchBook};
    use super::super::itch::{self, Message};
    use super::*;

    /// Every generated message parses, and a book takes all of them with no skip: the
    /// generator's own order list and the book agree.
    #[test]
    fn generated_messages_are_valid_and_a_book_takes_them_all() {
        for hot in [0, 90] {
            generated_stream_is_valid(hot);
        }
    }

    fn generated_stream_is_valid(hot: u64) {
        let mut generator = Generator::new(7, 300, 2_000).with_hot_percent(hot);
        let mut book = ItchBook::new(BookConfig {
            max_orders: 8_192,
            max_levels: 65_536,
        });
        let mut buffer = [0u8; MAX_GENERATED_LEN];
        let mut kinds = [0u32; 256];
        for _ in 0..100_000 {
            let len = generator.next_message(&mut buffer);
            let message = itch::parse(&buffer[..len]).expect("valid message");
            kinds[usize::from(buffer[0])] += 1;
            book.apply(&message, &mut |_| {}).expect("room");
            if let Message::AddOrder { stock, header, .. } = message {
                assert_eq!(stock.as_str().map(|s| s.len()), Some(6));
                assert!(header.locate >= 1 && header.locate <= 300);
            }
        }
        assert_eq!(book.counters(), Default::default());
        assert_eq!(book.orders(), generator.live_orders());
        for kind in *b"AFEXDUCP" {
            assert!(kinds[usize::from(kind)] > 100, "{}", kind as char);
        }
        let mut packet = Vec::new();
        assert!(mold_packet(
            Session(*b"TEST000001"),
            5,
            [&b"ab"[..], &b"c"[..]],
            &mut packet
        ));
        let parsed = super::super::mold::Packet::parse(&packet).expect("packet");
        assert_eq!((parsed.sequence, parsed.count), (5, 2));
    }
}
