//! `tickwire decode --venue nasdaq-itch`: on the real captures in `../shared/data/itch` (their
//! messages field by field are `crates/tickwire/tests/itch_captures.rs`'), on raw ITCH files, and
//! on generated two-line captures with losses (filled by the other line, by re-request answers,
//! or given up as gaps).

use crate::support::common;
use std::path::Path;
use std::process::Command;
use tickwire::venue::nasdaq_itch::generate::{mold_packet, Generator, MAX_GENERATED_LEN};
use tickwire::venue::nasdaq_itch::itch::{self, Date};
use tickwire::venue::nasdaq_itch::mold::{self, Session};

fn decode(path: &Path) -> (Vec<serde_json::Value>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["decode", "--venue", "nasdaq-itch"])
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let events = output
        .stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("every line is JSON"))
        .collect();
    (events, stderr)
}

/// `tickwire decode` on the captures that publish by themselves: levels of the adds, trades,
/// statuses and imbalances, each named by its stock, priced with 4 implied decimals, stamped
/// with the capture day's New York time (2023-08-22, EDT).
#[test]
fn decode_prints_the_captures_events() {
    let Some(path) = common::shared_data("itch/AddOrderNoMPID.pcap") else {
        return;
    };
    let day = itch::epoch_ns(
        Date {
            year: 2023,
            month: 8,
            day: 22,
        },
        0,
    )
    .unwrap();
    let (events, summary) = decode(&path);
    assert!(summary.contains("5 messages (A=5)"), "{summary}");
    assert_eq!(events.len(), 5);
    let first = &events[0];
    assert_eq!(first["type"], "level");
    assert_eq!(first["symbol"], "IVOO");
    assert_eq!(first["side"], "bid");
    assert_eq!(first["px"], "87.39");
    assert_eq!(first["qty"], "1600");
    assert_eq!(first["exch_ts_ns"], day + 34_199_999_894_278);
    // Two adds at one XLF price: the level carries their sum.
    let xlf: Vec<&str> = events
        .iter()
        .filter(|e| e["symbol"] == "XLF")
        .map(|e| e["qty"].as_str().unwrap())
        .collect();
    assert_eq!(xlf, ["100", "4100"]);

    let dir = common::shared_data("itch/NonCrossTrade.pcap").unwrap();
    let (events, _) = decode(&dir);
    assert_eq!(events[0]["type"], "trade");
    assert_eq!(events[0]["symbol"], "GOOGL");
    assert_eq!(events[0]["px"], "128.46");
    assert_eq!(events[0]["qty"], "100");
    assert_eq!(events[0]["trade_id"], 255_554);
    // A buy order's non-displayed execution: the aggressor sold.
    assert_eq!(events[0]["aggressor"], "sell");

    // A cross of 0 shares prints nothing.
    let (events, _) = decode(&common::shared_data("itch/CrossTrade.pcap").unwrap());
    assert!(events.iter().all(|e| e["qty"] != "0"));
    assert!(events.iter().all(|e| e["symbol"] != "BAC-Q"));

    let (events, _) = decode(&common::shared_data("itch/StockTradingAction.pcap").unwrap());
    assert_eq!(events[0]["type"], "trading_status");
    assert_eq!(events[0]["symbol"], "ZXZZT");
    // `P`: paused (DBN's StatusAction::Pause).
    assert_eq!(events[0]["action"], 9);
    assert_eq!(events[0]["is_trading"], "N");

    let (events, _) = decode(&common::shared_data("itch/RegSHORestriction.pcap").unwrap());
    assert_eq!(events[0]["symbol"], "SOPA");
    assert_eq!(events[0]["is_short_sell_restricted"], "Y");

    let (events, _) = decode(&common::shared_data("itch/NetOrderImbalanceIndicator.pcap").unwrap());
    assert_eq!(events.len(), 5);
    assert!(events.iter().all(|e| e["type"] == "imbalance"));
    // A price of 0 is no price.
    assert_eq!(events[0]["ref_px"], serde_json::Value::Null);

    // Executions of orders the capture never added are counted skips, never events.
    let (events, summary) = decode(&common::shared_data("itch/OrderExecuted.pcap").unwrap());
    assert!(events.is_empty());
    assert!(summary.contains("5 unknown refs"), "{summary}");
}

// ---- generated captures ----

const LINE_A: ([u8; 4], u16) = ([233, 54, 12, 111], 26477);
const LINE_B: ([u8; 4], u16) = ([233, 49, 196, 111], 26477);
const SERVER: ([u8; 4], u16) = ([10, 0, 0, 1], 27000);
const CLIENT: ([u8; 4], u16) = ([10, 0, 0, 2], 40000);
const SESSION: Session = Session(*b"TESTSESS01");

/// A classic nanosecond pcap of Ethernet/IPv4/UDP frames.
struct PcapWriter(Vec<u8>);

impl PcapWriter {
    fn new() -> PcapWriter {
        let mut out = Vec::new();
        out.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&65_535u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        PcapWriter(out)
    }

    fn datagram(&mut self, ts_ns: u64, src: ([u8; 4], u16), dst: ([u8; 4], u16), payload: &[u8]) {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = (20 + 8 + payload.len()) as u16;
        frame.extend_from_slice(&[0x45, 0]);
        frame.extend_from_slice(&total.to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
        frame.extend_from_slice(&src.0);
        frame.extend_from_slice(&dst.0);
        frame.extend_from_slice(&src.1.to_be_bytes());
        frame.extend_from_slice(&dst.1.to_be_bytes());
        frame.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(payload);
        let out = &mut self.0;
        out.extend_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
}

/// A generated market: `packets` MoldUDP64 packets of up to 8 messages from sequence 1, and the
/// same messages as a raw ITCH file.
fn market(packets: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut generator = Generator::new(11, 40, 600);
    let mut raw = Vec::new();
    let mut out = Vec::new();
    let mut sequence = 1u64;
    for at in 0..packets {
        let count = 1 + at % 8;
        let mut messages = Vec::new();
        for _ in 0..count {
            let mut message = [0u8; MAX_GENERATED_LEN];
            let len = generator.next_message(&mut message);
            raw.extend_from_slice(&(len as u16).to_be_bytes());
            raw.extend_from_slice(&message[..len]);
            messages.push(message[..len].to_vec());
        }
        let mut packet = Vec::new();
        assert!(mold_packet(
            SESSION,
            sequence,
            messages.iter().map(Vec::as_slice),
            &mut packet
        ));
        sequence += count as u64;
        out.push(packet);
    }
    (out, raw)
}

fn day_start() -> u64 {
    itch::epoch_ns(
        Date {
            year: 2019,
            month: 1,
            day: 30,
        },
        0,
    )
    .unwrap()
}

/// What a comparison keeps of an event: everything but the receive time.
fn without_recv(events: &[serde_json::Value]) -> Vec<serde_json::Value> {
    events
        .iter()
        .map(|event| {
            let mut event = event.clone();
            event.as_object_mut().unwrap().remove("recv_ts_ns");
            event
        })
        .collect()
}

/// Losses on line A, on line B, on both (answered by the re-request server after the client's
/// request), reordering on a line and duplicates: the capture decodes to exactly the events of
/// the raw file of the same messages, each sequence number once and in order.
#[test]
fn a_two_line_capture_with_recoverable_losses_decodes_as_the_raw_file() {
    let (packets, raw) = market(1_500);
    let dir = tempfile::tempdir().unwrap();
    let raw_path = dir.path().join("01302019.NASDAQ_ITCH50");
    std::fs::write(&raw_path, &raw).unwrap();
    let t0 = day_start() + 36_000_000_000_000;
    let mut pcap = PcapWriter::new();
    let mut answers: Vec<(u64, usize)> = Vec::new();
    let mut k = 0;
    while k < packets.len() {
        let ts = t0 + k as u64 * 100_000;
        while let Some(&(due, at)) = answers.first() {
            if due > ts {
                break;
            }
            pcap.datagram(due, SERVER, CLIENT, &packets[at]);
            answers.remove(0);
        }
        let (drop_a, drop_b) = (k % 7 == 3 || k % 40 == 20, k % 11 == 5 || k % 40 == 20);
        if k % 97 == 50 && k + 1 < packets.len() {
            // Line A sends k + 1 before k; line B in order.
            pcap.datagram(ts, ([10, 0, 0, 9], 5000), LINE_A, &packets[k + 1]);
            pcap.datagram(ts + 10, ([10, 0, 0, 9], 5000), LINE_A, &packets[k]);
            pcap.datagram(ts + 1_000, ([10, 0, 0, 9], 5000), LINE_B, &packets[k]);
            pcap.datagram(ts + 1_010, ([10, 0, 0, 9], 5000), LINE_B, &packets[k + 1]);
            k += 2;
            continue;
        }
        if !drop_a {
            pcap.datagram(ts, ([10, 0, 0, 9], 5000), LINE_A, &packets[k]);
        }
        if !drop_b {
            pcap.datagram(ts + 1_000, ([10, 0, 0, 9], 5000), LINE_B, &packets[k]);
        }
        if drop_a && drop_b {
            // The client's request (2.5 µs later), and the server's answer 3 ms later.
            let packet = mold::Packet::parse(&packets[k]).unwrap();
            let request = mold::Request {
                session: SESSION,
                sequence: packet.sequence,
                count: packet.count,
            };
            pcap.datagram(ts + 2_500, CLIENT, SERVER, &request.encode());
            answers.push((ts + 3_000_000, k));
        }
        k += 1;
    }
    for (due, at) in answers {
        pcap.datagram(due, SERVER, CLIENT, &packets[at]);
    }
    let pcap_path = dir.path().join("lines.pcap");
    std::fs::write(&pcap_path, &pcap.0).unwrap();

    let (from_raw, raw_summary) = decode(&raw_path);
    let (from_pcap, summary) = decode(&pcap_path);
    assert!(raw_summary.contains("raw ITCH"), "{raw_summary}");
    assert!(from_raw.len() > 2_000, "{raw_summary}");
    assert!(summary.contains(" 0 gaps"), "{summary}");
    assert!(summary.contains("0 malformed packets"), "{summary}");
    assert!(!summary.contains("re-request delivered 0/0/0"), "{summary}");
    assert!(!summary.contains(" 0 requests"), "{summary}");
    assert_eq!(without_recv(&from_pcap), without_recv(&from_raw));
    // Stamped with the raw file's date, from its name, and the capture's.
    assert!(from_raw
        .iter()
        .all(|e| e["exch_ts_ns"].as_u64() > Some(day_start())));
}

/// The same packets lost on both lines and never answered: a `gap` event for every stock
/// published by then, once the give-up time has passed; nothing of the lost run is ever
/// printed, and everything else comes once, in sequence order.
#[test]
fn an_unanswered_loss_on_both_lines_is_a_gap() {
    let (packets, _) = market(1_200);
    let lost = 400;
    let lost_range = {
        let packet = mold::Packet::parse(&packets[lost]).unwrap();
        packet.sequence..packet.sequence + u64::from(packet.count)
    };
    let t0 = day_start() + 36_000_000_000_000;
    let mut pcap = PcapWriter::new();
    for (k, packet) in packets.iter().enumerate() {
        if k == lost {
            continue;
        }
        let ts = t0 + k as u64 * 100_000;
        pcap.datagram(ts, ([10, 0, 0, 9], 5000), LINE_A, packet);
        pcap.datagram(ts + 500, ([10, 0, 0, 9], 5000), LINE_B, packet);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gap.pcap");
    std::fs::write(&path, &pcap.0).unwrap();
    let (events, summary) = decode(&path);
    assert!(summary.contains(" 1 gaps"), "{summary}");
    let gaps: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "gap")
        .map(|(at, _)| at)
        .collect();
    let stocks = summary
        .split(" stocks")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap();
    assert!(stocks > 0);
    assert_eq!(gaps.len(), stocks, "one gap per published stock");
    assert!(gaps.windows(2).all(|w| w[1] == w[0] + 1), "together");
    let mut last = 0u64;
    for (at, event) in events.iter().enumerate() {
        if event["type"] == "gap" {
            continue;
        }
        // Trades print no seq: they sit between the levels of their own message.
        let seq = event["seq"].as_u64().unwrap_or(last);
        assert!(!lost_range.contains(&seq), "{event}");
        assert!(seq >= last, "in order: {event}");
        assert_eq!(at > gaps[0], seq >= lost_range.end, "{event}");
        last = seq;
    }
}

/// A raw file cut inside a message: the events before it are printed, then an error naming the
/// byte; a message of a length its type does not have is a counted, noted skip.
#[test]
fn bad_raw_input_is_an_error_or_a_counted_skip() {
    let (_, raw) = market(50);
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.itch");
    std::fs::write(&cut, &raw[..raw.len() - 3]).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["decode", "--venue", "nasdaq-itch"])
        .arg(&cut)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("truncated"), "{stderr}");
    assert!(
        !output.stdout.is_empty(),
        "the events before the cut are printed"
    );

    // An `A` of 35 bytes (its type has 36), then a good one.
    let mut bad = Vec::new();
    bad.extend_from_slice(&35u16.to_be_bytes());
    bad.push(b'A');
    bad.extend_from_slice(&[0; 34]);
    bad.extend_from_slice(&raw);
    let path = dir.path().join("bad.itch");
    std::fs::write(&path, &bad).unwrap();
    let (events, summary) = decode(&path);
    assert!(summary.contains("1 malformed messages"), "{summary}");
    assert!(!events.is_empty());
}

// ---- the venue file ----

/// The shipped simulator file loads: line A from `url`, the rest from `[nasdaq_itch]`, one
/// shard with no subscription request; its live transport is the datagram sockets (both lines
/// joined on `lo`, the re-request server's address), never a TCP connection to a group.
#[test]
fn the_shipped_venue_file_loads_as_datagram_sockets() {
    use tickwire::venue::nasdaq_itch::config::ItchConfig;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/venues/nasdaq-itch-sim.toml");
    let venue = tickwire::config::load_venue(&path).unwrap_or_else(|errors| panic!("{errors}"));
    assert_eq!(venue.kind.as_str(), "nasdaq-itch");
    assert_eq!(venue.url.scheme, tickwire::config::Scheme::Udp);
    let itch = ItchConfig::of(&venue).unwrap();
    assert_eq!(itch.book().max_orders, 1 << 20);
    assert_eq!(itch.arbiter().give_up_ns, 50_000_000);
    let protocol = venue.kind.protocol();
    let shards = protocol.shards(&venue.symbols, &venue.channels, 1).unwrap();
    assert_eq!(shards.len(), 1);
    assert!(shards[0].requests.is_empty(), "no subscription step");
    let net = tickwire::config::NetConfig::default();
    let prepared = tickwire::venue::subscribe_spec(&venue, &net).expect("a live transport");
    let spec = prepared.datagram().expect("datagram sockets, not a stream");
    let lo = std::net::Ipv4Addr::LOCALHOST;
    let [Some(a), Some(b)] = spec.lines else {
        panic!("two lines: {spec:?}");
    };
    assert_eq!(a.group, "239.192.37.1:26477".parse().unwrap());
    assert_eq!(b.group, "239.192.37.2:26477".parse().unwrap());
    assert_eq!((a.interface, b.interface), (lo, lo));
    assert_eq!(spec.reply, Some("127.0.0.1:26478".parse().unwrap()));
    // `*` keeps an instrument id for every stock locate.
    assert_eq!(protocol.instrument_span(&venue), 1 << 16);
}

/// Every key of `[nasdaq_itch]` is checked, each bad value named by its key.
#[test]
fn a_bad_table_names_each_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"x\"\nkind = \"nasdaq-itch\"\nurl = \"udp://10.1.1.1:26477\"\n\
                symbols = [\"AAPL\", \"TOOLONGSYM\"]\nchannels = [\"book\"]\n\
                [nasdaq_itch]\nline_b = \"10.0.0.1:1\"\ninterface = \"a/b\"\n\
                source = \"239.1.1.1\"\nrerequest = \"nowhere\"\nsession = \"ELEVENCHARS\"\n\
                max_orders = 0\nmax_levels = 999999999\ngive_up_ms = 5\nline_wait_ms = 9\n";
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let errors = tickwire::config::load_venue(&path).unwrap_err();
    let keys: Vec<String> = errors.iter().map(|e| e.key.clone()).collect();
    for key in [
        "url",
        "symbols[1]",
        "channels[0]",
        "nasdaq_itch.line_b",
        "nasdaq_itch.interface",
        "nasdaq_itch.source",
        "nasdaq_itch.rerequest",
        "nasdaq_itch.session",
        "nasdaq_itch.max_orders",
        "nasdaq_itch.max_levels",
        "nasdaq_itch.line_wait_ms",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} not in {keys:?}");
    }
    // A file without the table says what it needs.
    let text = "name = \"x\"\nkind = \"nasdaq-itch\"\nurl = \"udp://239.1.1.1:26477\"\n\
                symbols = [\"*\"]\nchannels = [\"itch\"]\n";
    std::fs::write(&path, text).unwrap();
    let errors = tickwire::config::load_venue(&path).unwrap_err();
    assert!(
        errors.to_string().contains("nasdaq_itch.interface"),
        "{errors}"
    );
}

/// `backend = "af-xdp"` (issue 38): `check-config` refuses a bad backend and the AF_XDP keys
/// without it, each by its key; a good file's datagram spec reads its lines through AF_XDP on
/// the interface, named by name or found by its address.
#[test]
fn the_af_xdp_backend_is_checked_and_reaches_the_datagram_spec() {
    let dir = tempfile::tempdir().unwrap();
    let venue = |table: &str| {
        format!(
            "name = \"x\"\nkind = \"nasdaq-itch\"\nurl = \"udp://239.1.1.1:26477\"\n\
             symbols = [\"*\"]\nchannels = [\"itch\"]\n[nasdaq_itch]\n\
             line_b = \"239.1.1.2:26477\"\nrerequest = \"127.0.0.1:26478\"\n{table}"
        )
    };
    std::fs::write(
        dir.path().join("tickwire.toml"),
        "venues = [\"venue.toml\"]\n",
    )
    .unwrap();
    for (table, key, says) in [
        (
            "interface = \"lo\"\nbackend = \"dpdk\"\n",
            "nasdaq_itch.backend",
            "\"kernel\" or \"af-xdp\"",
        ),
        (
            "interface = \"lo\"\nxdp_queues = [0]\n",
            "nasdaq_itch.xdp_queues",
            "only read with backend = \"af-xdp\"",
        ),
        (
            "interface = \"lo\"\nbackend = \"af-xdp\"\nxdp_lines = [\"c\"]\n",
            "nasdaq_itch.xdp_lines",
            "not a line",
        ),
    ] {
        std::fs::write(dir.path().join("venue.toml"), venue(table)).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_tickwire"))
            .arg("check-config")
            .arg(dir.path().join("tickwire.toml"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{table}: accepted");
        assert!(
            stderr.contains(key) && stderr.contains(says),
            "{table}: {stderr}"
        );
    }
    let net = tickwire::config::NetConfig::default();
    for (interface, lines, want) in [
        ("lo", "", [true, true]),
        (
            "127.0.0.1",
            "xdp_lines = [\"b\"]\nxdp_queues = [0]\n",
            [false, true],
        ),
    ] {
        let path = dir.path().join("venue.toml");
        std::fs::write(
            &path,
            venue(&format!(
                "interface = \"{interface}\"\nbackend = \"af-xdp\"\n{lines}"
            )),
        )
        .unwrap();
        let venue = tickwire::config::load_venue(&path).unwrap_or_else(|errors| panic!("{errors}"));
        let prepared = tickwire::venue::subscribe_spec(&venue, &net).expect("a live transport");
        let spec = prepared.datagram().expect("datagram sockets");
        let xdp = spec.xdp.expect("AF_XDP lines");
        assert_eq!(xdp.interface(), "lo", "{interface}");
        assert_eq!(xdp.lines, want);
        assert_eq!(xdp.queue_list(), (!lines.is_empty()).then(|| vec![0]));
    }
    // The default reads the kernel sockets.
    let path = dir.path().join("venue.toml");
    std::fs::write(&path, venue("interface = \"lo\"\n")).unwrap();
    let venue = tickwire::config::load_venue(&path).unwrap();
    let prepared = tickwire::venue::subscribe_spec(&venue, &net).unwrap();
    assert_eq!(prepared.datagram().unwrap().xdp, None);
}

/// A gzip raw file (Nasdaq ships its daily files gzipped) streams through as the plain one.
#[test]
fn a_gzip_raw_file_decodes_as_the_plain_one() {
    use std::io::Write;
    let (_, raw) = market(300);
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("01302019.NASDAQ_ITCH50");
    std::fs::write(&plain, &raw).unwrap();
    let gz = dir.path().join("01302019.NASDAQ_ITCH50.gz");
    let mut encoder =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    encoder.write_all(&raw).unwrap();
    encoder.finish().unwrap();
    let (from_plain, _) = decode(&plain);
    let (from_gz, summary) = decode(&gz);
    assert!(summary.contains("raw ITCH"), "{summary}");
    assert!(!from_plain.is_empty());
    assert_eq!(from_gz, from_plain);
}
