//! `[nasdaq_itch]`, a Nasdaq ITCH venue file's own table (`FileRules::table`): the B line, the
//! interface the groups are joined on, an optional source-specific join, the re-request server,
//! the expected session, the L3 book's caps and the arbiter's timers. The file's `url` is line
//! A, `udp://<group>:<port>`; `channels` is `["itch"]` (everything the feed carries); `symbols`
//! is `["*"]` (publish every stock) or a list of ITCH symbols (decode everything, publish these).
//!
//! ```toml
//! url = "udp://233.54.12.111:26477"
//! symbols = ["*"]
//! channels = ["itch"]
//!
//! [nasdaq_itch]
//! line_b = "233.49.196.111:26477"
//! interface = "eth1"             # or the interface's IPv4 address
//! source = "206.200.43.72"       # optional: source-specific joins
//! rerequest = "206.200.43.64:27000"
//! session = "000012345A"         # optional
//! max_orders = 4194304           # the book's cap on live orders
//! backend = "af-xdp"             # optional: read the lines through AF_XDP (default "kernel")
//! xdp_lines = ["a", "b"]         # optional: which lines (default: both)
//! xdp_queues = [0]               # optional: the interface's queues to bind (default: all)
//! xdp_busy_poll_us = 50          # optional: busy polling, µs per round (default: none)
//! ```

use super::book::BookConfig;
use super::mold::{ArbiterConfig, Session};
use crate::config::{read_venue_table, VenueConfig};
use crate::venue::protocol::TableCheck;
use serde::Deserialize;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The table's name in the venue file.
pub const TABLE: &str = "nasdaq_itch";
/// The one channel: every message of the feed.
pub const CHANNEL: &str = "itch";

/// `nasdaq_itch.max_orders` unset: a busy day's peak of live orders (a few million) with room;
/// 2^23 direct slots and 2^23 overflow slots of 16 bytes (256 MiB; `book.rs`, "Memory").
pub const MAX_ORDERS_DEFAULT: u32 = 4 << 20;
/// `nasdaq_itch.max_orders`' valid values (at the top 2^25 slots of each, 1 GiB).
pub const MAX_ORDERS_RANGE: std::ops::RangeInclusive<u32> = 1..=16 << 20;
/// `nasdaq_itch.max_levels` unset: price levels over every stock and side (2^21 index slots of
/// 16 bytes, 2^20 far places of 32, and ladders of 2 KiB for 32,768 stock sides: 128 MiB).
pub const MAX_LEVELS_DEFAULT: u32 = 1 << 20;
/// `nasdaq_itch.max_levels`' valid values.
pub const MAX_LEVELS_RANGE: std::ops::RangeInclusive<u32> = 1..=8 << 20;

/// `[nasdaq_itch]`, typed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItchConfig {
    /// Line B's `group:port`; unset: line A only.
    pub line_b: Option<String>,
    /// The interface the groups are joined on: its name (`eth1`) or its IPv4 address.
    pub interface: String,
    /// The sender's IPv4 address, for source-specific joins (IGMPv3); unset: any-source joins.
    pub source: Option<String>,
    /// The re-request server's `address:port`; unset: a gap no line fills is given up.
    pub rerequest: Option<String>,
    /// The MoldUDP64 session to expect (up to 10 characters, space-padded); unset: the first
    /// packet's.
    pub session: Option<String>,
    /// The L3 book's cap on live orders ([`MAX_ORDERS_RANGE`]; unset: [`MAX_ORDERS_DEFAULT`]).
    /// An add past it is refused with an error naming this key, counted, never a reallocation.
    pub max_orders: Option<u32>,
    /// The book's cap on price levels over every stock ([`MAX_LEVELS_RANGE`]).
    pub max_levels: Option<u32>,
    /// How long a gap waits for the other line before the first re-request (ms; default 2).
    pub line_wait_ms: Option<u32>,
    /// From a gap's start, when an unrecovered gap is given up as a `gap` event (ms; default
    /// 50, at most 10,000).
    pub give_up_ms: Option<u32>,
    /// `SO_RCVBUF` of each line's socket, bytes (default 16 MiB; the kernel caps it at
    /// `net.core.rmem_max`).
    pub rcvbuf_bytes: Option<u32>,
    /// How the lines are read: `"kernel"` (unset: their UDP sockets, over the network thread's
    /// io_uring or epoll) or `"af-xdp"` (an XDP program on `interface` steers their datagrams
    /// into AF_XDP sockets, `net::xdp`; without the privileges it falls back to `"kernel"`
    /// with one warning).
    pub backend: Option<String>,
    /// With `backend = "af-xdp"`: the lines read through it, `"a"` and/or `"b"` (unset: both).
    pub xdp_lines: Option<Vec<String>>,
    /// With `backend = "af-xdp"`: the interface's receive queues to bind (below 64; unset:
    /// every queue). A subset needs the NIC to steer the feed to those queues: what arrives
    /// on another queue goes to the line's kernel socket, which is not read.
    pub xdp_queues: Option<Vec<u32>>,
    /// With `backend = "af-xdp"`: busy polling, µs per round (`SO_PREFER_BUSY_POLL`,
    /// `SO_BUSY_POLL`, Linux 5.11; 1 to 1,000; unset: none). The network thread then drives
    /// the queue's NAPI poll itself, with a `recvfrom` on each empty round.
    pub xdp_busy_poll_us: Option<u32>,
}

/// `nasdaq_itch.backend`'s values.
pub const BACKENDS: [&str; 2] = ["kernel", "af-xdp"];

/// What `backend = "af-xdp"` reads: by line (A, B), and the queues as a bit mask (0: all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpChoice {
    pub lines: [bool; 2],
    pub queues: u64,
    /// 0: no busy polling.
    pub busy_poll_us: u32,
}

impl ItchConfig {
    /// The venue's table, typed; `None` for a file without one (the config refuses that for a
    /// nasdaq-itch venue).
    pub fn of(venue: &VenueConfig) -> Option<ItchConfig> {
        read_venue_table(TABLE, venue.table.as_ref()?).ok()
    }

    /// The AF_XDP lines and queues (`None`: the kernel backend), or the problem, with its key.
    pub fn xdp(&self) -> Result<Option<XdpChoice>, (&'static str, String)> {
        let af_xdp = match self.backend.as_deref() {
            None | Some("kernel") => false,
            Some("af-xdp") => true,
            Some(other) => {
                return Err((
                    "nasdaq_itch.backend",
                    format!("\"{other}\" is not a backend: \"kernel\" or \"af-xdp\""),
                ))
            }
        };
        if !af_xdp {
            for (key, set) in [
                ("nasdaq_itch.xdp_lines", self.xdp_lines.is_some()),
                ("nasdaq_itch.xdp_queues", self.xdp_queues.is_some()),
                (
                    "nasdaq_itch.xdp_busy_poll_us",
                    self.xdp_busy_poll_us.is_some(),
                ),
            ] {
                if set {
                    return Err((key, "is only read with backend = \"af-xdp\"".to_owned()));
                }
            }
            return Ok(None);
        }
        let lines = match &self.xdp_lines {
            None => [true, self.line_b.is_some()],
            Some(names) => {
                let mut lines = [false; 2];
                for name in names {
                    let index = match name.as_str() {
                        "a" | "A" => 0,
                        "b" | "B" => 1,
                        _ => {
                            return Err((
                                "nasdaq_itch.xdp_lines",
                                format!("\"{name}\" is not a line: \"a\" or \"b\""),
                            ))
                        }
                    };
                    if lines[index] {
                        return Err(("nasdaq_itch.xdp_lines", format!("\"{name}\" twice")));
                    }
                    lines[index] = true;
                }
                if lines == [false; 2] {
                    return Err((
                        "nasdaq_itch.xdp_lines",
                        "is empty: name \"a\" and/or \"b\", or leave it out for both".to_owned(),
                    ));
                }
                if lines[1] && self.line_b.is_none() {
                    return Err((
                        "nasdaq_itch.xdp_lines",
                        "names line \"b\" but nasdaq_itch.line_b is not set".to_owned(),
                    ));
                }
                lines
            }
        };
        let mut queues = 0u64;
        if let Some(list) = &self.xdp_queues {
            if list.is_empty() {
                return Err((
                    "nasdaq_itch.xdp_queues",
                    "is empty: list queue numbers, or leave it out for every queue".to_owned(),
                ));
            }
            for &queue in list {
                if queue >= 64 {
                    return Err((
                        "nasdaq_itch.xdp_queues",
                        format!("queue {queue}: queues are numbered 0 to 63"),
                    ));
                }
                if queues & (1 << queue) != 0 {
                    return Err(("nasdaq_itch.xdp_queues", format!("queue {queue} twice")));
                }
                queues |= 1 << queue;
            }
        }
        let busy_poll_us = self.xdp_busy_poll_us.unwrap_or(0);
        if self.xdp_busy_poll_us.is_some() && !(1..=1_000).contains(&busy_poll_us) {
            return Err((
                "nasdaq_itch.xdp_busy_poll_us",
                format!("{busy_poll_us} is outside 1..=1000 (µs per busy-poll round)"),
            ));
        }
        Ok(Some(XdpChoice {
            lines,
            queues,
            busy_poll_us,
        }))
    }

    pub fn book(&self) -> BookConfig {
        BookConfig {
            max_orders: self.max_orders.unwrap_or(MAX_ORDERS_DEFAULT) as usize,
            max_levels: self.max_levels.unwrap_or(MAX_LEVELS_DEFAULT) as usize,
        }
    }

    pub fn arbiter(&self) -> ArbiterConfig {
        let defaults = ArbiterConfig::default();
        ArbiterConfig {
            expected_session: self.session.as_deref().and_then(session),
            line_wait_ns: self
                .line_wait_ms
                .map_or(defaults.line_wait_ns, |ms| u64::from(ms) * 1_000_000),
            give_up_ns: self
                .give_up_ms
                .map_or(defaults.give_up_ns, |ms| u64::from(ms) * 1_000_000),
            ..defaults
        }
    }
}

/// A session name as sent: up to 10 printable ASCII characters, space-padded on the right.
pub fn session(text: &str) -> Option<Session> {
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let mut bytes = [b' '; 10];
    bytes[..text.len()].copy_from_slice(text.as_bytes());
    Some(Session(bytes))
}

/// A multicast `group:port` (IPv4, 224.0.0.0/4, a port above 0).
pub fn multicast(text: &str) -> Result<SocketAddrV4, String> {
    let addr: SocketAddrV4 = text.parse().map_err(|_| {
        format!("\"{text}\" is not an IPv4 group:port, such as 233.54.12.111:26477")
    })?;
    if !addr.ip().is_multicast() || addr.port() == 0 {
        return Err(format!(
            "\"{text}\" is not a multicast group (224.0.0.0/4) with a port"
        ));
    }
    Ok(addr)
}

/// Checks the table against what the config could not.
pub(super) fn check_table(table: Option<&toml::Value>, check: &mut TableCheck<'_>) {
    let itch = match table.map(|table| read_venue_table::<ItchConfig>(TABLE, table)) {
        Some(Ok(itch)) => itch,
        Some(Err(problem)) => {
            check.problems.push(problem);
            return;
        }
        None => {
            check.problem(
                TABLE,
                "is missing: a nasdaq-itch venue needs at least nasdaq_itch.interface, the \
                 interface its groups are joined on (a name such as \"eth1\" or an IPv4 address)",
            );
            return;
        }
    };
    if let Some(line_b) = &itch.line_b {
        if let Err(message) = multicast(line_b) {
            check.problem("nasdaq_itch.line_b", message);
        }
    }
    let interface_ok = itch.interface.parse::<Ipv4Addr>().is_ok()
        || (!itch.interface.is_empty()
            && itch.interface.len() < 16
            && itch
                .interface
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'/'));
    if !interface_ok {
        check.problem(
            "nasdaq_itch.interface",
            format!(
                "\"{}\" is neither an interface name (up to 15 characters, no `/`) nor an IPv4 \
                 address",
                itch.interface
            ),
        );
    }
    if let Some(source) = &itch.source {
        match source.parse::<Ipv4Addr>() {
            Ok(ip) if !ip.is_multicast() && !ip.is_unspecified() => {}
            _ => check.problem(
                "nasdaq_itch.source",
                format!("\"{source}\" is not a unicast IPv4 address (the sender's)"),
            ),
        }
    }
    if let Some(rerequest) = &itch.rerequest {
        match rerequest.parse::<SocketAddrV4>() {
            Ok(addr) if !addr.ip().is_multicast() && addr.port() != 0 => {}
            _ => check.problem(
                "nasdaq_itch.rerequest",
                format!("\"{rerequest}\" is not a unicast IPv4 address:port"),
            ),
        }
    }
    if let Some(text) = &itch.session {
        if session(text).is_none() {
            check.problem(
                "nasdaq_itch.session",
                format!(
                    "\"{text}\" is not a MoldUDP64 session: 1 to 10 printable ASCII characters"
                ),
            );
        }
    }
    if let Some(max) = itch.max_orders {
        if !MAX_ORDERS_RANGE.contains(&max) {
            check.problem(
                "nasdaq_itch.max_orders",
                format!(
                    "{max} is outside {}..={} (each live order takes 64 bytes: two direct and two overflow slots)",
                    MAX_ORDERS_RANGE.start(),
                    MAX_ORDERS_RANGE.end()
                ),
            );
        }
    }
    if let Some(max) = itch.max_levels {
        if !MAX_LEVELS_RANGE.contains(&max) {
            check.problem(
                "nasdaq_itch.max_levels",
                format!(
                    "{max} is outside {}..={}",
                    MAX_LEVELS_RANGE.start(),
                    MAX_LEVELS_RANGE.end()
                ),
            );
        }
    }
    if let Err((key, message)) = itch.xdp() {
        check.problem(key, message);
    }
    if itch.give_up_ms.is_some_and(|ms| ms == 0 || ms > 10_000) {
        check.problem("nasdaq_itch.give_up_ms", "must be 1 to 10000");
    }
    if let (Some(wait), give_up) = (itch.line_wait_ms, itch.give_up_ms.unwrap_or(50)) {
        if wait >= give_up {
            check.problem(
                "nasdaq_itch.line_wait_ms",
                format!("{wait} must be below nasdaq_itch.give_up_ms ({give_up})"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_sessions_and_caps_are_read_as_documented() {
        assert!(multicast("233.54.12.111:26477").is_ok());
        assert!(multicast("10.0.0.1:26477").is_err());
        assert!(multicast("233.54.12.111:0").is_err());
        assert!(multicast("233.54.12.111").is_err());
        assert_eq!(session("ABC"), Some(Session(*b"ABC       ")));
        assert_eq!(session("0123456789"), Some(Session(*b"0123456789")));
        assert_eq!(session("01234567890"), None);
        assert_eq!(session(""), None);
        let config: ItchConfig = toml::from_str(
            "interface = \"eth1\"\nmax_orders = 1000\nsession = \"S1\"\ngive_up_ms = 20",
        )
        .unwrap();
        assert_eq!(config.book().max_orders, 1000);
        assert_eq!(config.book().max_levels, MAX_LEVELS_DEFAULT as usize);
        assert_eq!(config.arbiter().give_up_ns, 20_000_000);
        assert_eq!(
            config.arbiter().expected_session,
            Some(Session(*b"S1        "))
        );
    }

    fn table(text: &str) -> ItchConfig {
        toml::from_str(&format!(
            "interface = \"eth1\"\nline_b = \"233.1.1.2:1\"\n{text}"
        ))
        .unwrap()
    }

    #[test]
    fn the_af_xdp_backend_reads_its_lines_and_queues_and_refuses_what_it_cannot_use() {
        assert_eq!(table("").xdp(), Ok(None));
        assert_eq!(table("backend = \"kernel\"").xdp(), Ok(None));
        assert_eq!(
            table("backend = \"af-xdp\"").xdp(),
            Ok(Some(XdpChoice {
                lines: [true, true],
                queues: 0,
                busy_poll_us: 0
            }))
        );
        assert_eq!(
            table(
                "backend = \"af-xdp\"\nxdp_lines = [\"b\"]\nxdp_queues = [0, 3]\n\
                 xdp_busy_poll_us = 50"
            )
            .xdp(),
            Ok(Some(XdpChoice {
                lines: [false, true],
                queues: 0b1001,
                busy_poll_us: 50
            }))
        );
        let without_b: ItchConfig =
            toml::from_str("interface = \"eth1\"\nbackend = \"af-xdp\"").unwrap();
        assert_eq!(
            without_b.xdp().unwrap().unwrap().lines,
            [true, false],
            "line A alone when there is no line B"
        );
        for (text, key, says) in [
            (
                "backend = \"dpdk\"",
                "nasdaq_itch.backend",
                "\"kernel\" or \"af-xdp\"",
            ),
            (
                "xdp_lines = [\"a\"]",
                "nasdaq_itch.xdp_lines",
                "only read with",
            ),
            (
                "xdp_queues = [0]",
                "nasdaq_itch.xdp_queues",
                "only read with",
            ),
            (
                "backend = \"af-xdp\"\nxdp_lines = [\"c\"]",
                "nasdaq_itch.xdp_lines",
                "not a line",
            ),
            (
                "backend = \"af-xdp\"\nxdp_lines = [\"a\", \"a\"]",
                "nasdaq_itch.xdp_lines",
                "twice",
            ),
            (
                "backend = \"af-xdp\"\nxdp_lines = []",
                "nasdaq_itch.xdp_lines",
                "empty",
            ),
            (
                "backend = \"af-xdp\"\nxdp_queues = [64]",
                "nasdaq_itch.xdp_queues",
                "0 to 63",
            ),
            (
                "backend = \"af-xdp\"\nxdp_queues = []",
                "nasdaq_itch.xdp_queues",
                "empty",
            ),
            (
                "backend = \"af-xdp\"\nxdp_queues = [1, 1]",
                "nasdaq_itch.xdp_queues",
                "twice",
            ),
            (
                "xdp_busy_poll_us = 50",
                "nasdaq_itch.xdp_busy_poll_us",
                "only read with",
            ),
            (
                "backend = \"af-xdp\"\nxdp_busy_poll_us = 0",
                "nasdaq_itch.xdp_busy_poll_us",
                "outside 1..=1000",
            ),
            (
                "backend = \"af-xdp\"\nxdp_busy_poll_us = 5000",
                "nasdaq_itch.xdp_busy_poll_us",
                "outside 1..=1000",
            ),
        ] {
            let (got_key, message) = table(text).xdp().unwrap_err();
            assert_eq!(got_key, key, "{text}");
            assert!(message.contains(says), "{text}: {message}");
        }
        let only_a: ItchConfig =
            toml::from_str("interface = \"eth1\"\nbackend = \"af-xdp\"\nxdp_lines = [\"b\"]")
                .unwrap();
        assert!(only_a.xdp().unwrap_err().1.contains("line_b is not set"));
    }
}
