//! Issue 37: every capture in `../shared/data/itch` (one ITCH 5.0 message type each, Ethernet,
//! 802.1Q, IPv4, UDP, one MoldUDP64 packet per datagram) decodes field by field as the
//! specification (TotalView-ITCH 5.0, 03/06/2015) says. The expected values were read by hand
//! from each packet's bytes at the specification's offsets; the files' MoldUDP64 session and
//! sequence numbers are zeroed (the folder's README says so), the ITCH messages are as sent.
//!
//! The folder is not in a fresh clone: each test skips with a printed reason, or fails under
//! `TICKWIRE_REQUIRE_SHARED_DATA=1`.

#[path = "../../../tests/support/skip.rs"]
mod skip;

use std::path::PathBuf;
use tickwire::venue::nasdaq_itch::book::{BookConfig, BookOutput, ItchBook};
use tickwire::venue::nasdaq_itch::itch::{self, Date, Header, Message, Symbol};
use tickwire::venue::nasdaq_itch::mold::{Packet, PacketKind, Session};
use tickwire::venue::nasdaq_itch::pcap::Capture;

fn capture_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/itch");
    if dir.join("AddOrderNoMPID.pcap").is_file() {
        return Some(dir);
    }
    let required = std::env::var("TICKWIRE_REQUIRE_SHARED_DATA").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "TICKWIRE_REQUIRE_SHARED_DATA=1 but {} is missing",
        dir.display()
    );
    skip::skipped(format_args!(
        "{} is not here (a fresh clone has no ../shared); this test needs the real captures",
        dir.display()
    ));
    None
}

/// The session's date: the captures are of Tuesday 22 August 2023.
const SESSION: Date = Date {
    year: 2023,
    month: 8,
    day: 22,
};

/// Every ITCH message of a capture, with the capture's timestamp; each datagram checked to be
/// one MoldUDP64 packet of one message, the session and sequence zeroed.
fn messages(dir: &std::path::Path, file: &str) -> Vec<(u64, Vec<u8>)> {
    let bytes = std::fs::read(dir.join(file)).expect("capture");
    let mut capture = Capture::new(&bytes).expect("pcap header");
    let mut out = Vec::new();
    for datagram in capture.by_ref() {
        let datagram = datagram.expect("whole record");
        let packet = Packet::parse(datagram.payload).expect("MoldUDP64 packet");
        assert_eq!(packet.session, Session([0; 10]), "{file}");
        assert_eq!(packet.sequence, 0, "{file}");
        assert_eq!(packet.kind(), PacketKind::Messages);
        assert_eq!(packet.count, 1, "{file}");
        for (_, message) in packet.messages() {
            out.push((datagram.ts_ns, message.to_vec()));
        }
    }
    let counters = capture.counters();
    assert_eq!(counters.datagrams as usize, out.len());
    assert_eq!(
        counters.not_ipv4 + counters.not_udp + counters.short_frames,
        0
    );
    out
}

fn header(locate: u16, tracking: u16, timestamp_ns: u64) -> Header {
    Header {
        locate,
        tracking,
        timestamp_ns,
    }
}

fn sym(text: &[u8; 8]) -> Symbol {
    Symbol(*text)
}

/// (file, record index, the message as the specification reads its bytes).
fn expected() -> Vec<(&'static str, usize, Message)> {
    vec![
        (
            "SystemEvent.pcap",
            0,
            Message::SystemEvent {
                header: header(0, 0, 34_200_000_070_384),
                event_code: b'Q',
            },
        ),
        (
            "AddOrderNoMPID.pcap",
            0,
            Message::AddOrder {
                header: header(5528, 0, 34_199_999_894_278),
                order_ref: 23_508_286,
                side: b'B',
                shares: 1600,
                stock: sym(b"IVOO    "),
                price: 873_900,
            },
        ),
        (
            "AddOrderWithMPID.pcap",
            0,
            Message::AddOrderMpid {
                header: header(1738, 0, 34_199_999_977_782),
                order_ref: 18_923_125,
                side: b'S',
                shares: 100,
                stock: sym(b"CASY    "),
                price: 2_555_200,
                attribution: *b"FLTU",
            },
        ),
        (
            "CrossTrade.pcap",
            2,
            Message::CrossTrade {
                header: header(8231, 2, 34_200_000_781_447),
                shares: 5577,
                stock: sym(b"PTGX    "),
                cross_price: 195_600,
                match_number: 255_561,
                cross_type: b'O',
            },
        ),
        (
            "LULDAuctionCollar.pcap",
            0,
            Message::LuldAuctionCollar {
                header: header(11325, 0, 34_215_592_415_125),
                stock: sym(b"ZXZZT   "),
                reference_price: itch::price4(133_400),
                upper_price: itch::price4(140_100),
                lower_price: itch::price4(109_200),
                extension: 0,
            },
        ),
        (
            "MarketParticipantPosition.pcap",
            0,
            Message::MarketParticipantPosition {
                header: header(3648, 0, 34_224_468_064_326),
                mpid: *b"MAXM",
                stock: sym(b"FDLS    "),
                primary_market_maker: b'Y',
                market_maker_mode: b'N',
                participant_state: b'A',
            },
        ),
        (
            "NetOrderImbalanceIndicator.pcap",
            3,
            Message::Noii {
                header: header(6462, 0, 34_200_000_268_978),
                paired_shares: 1,
                imbalance_shares: 0,
                imbalance_direction: b'N',
                stock: sym(b"MDC     "),
                far_price: 464_400,
                near_price: 464_400,
                current_reference_price: 464_400,
                cross_type: b'O',
                price_variation_indicator: b'L',
            },
        ),
        (
            "NonCrossTrade.pcap",
            0,
            Message::Trade {
                header: header(4499, 2, 34_200_000_684_713),
                order_ref: 0,
                side: b'B',
                shares: 100,
                stock: sym(b"GOOGL   "),
                price: 1_284_600,
                match_number: 255_554,
            },
        ),
        (
            "OrderCancel.pcap",
            0,
            Message::OrderCancel {
                header: header(9413, 0, 34_200_002_394_205),
                order_ref: 33_823_232,
                canceled_shares: 100,
            },
        ),
        (
            "OrderDelete.pcap",
            0,
            Message::OrderDelete {
                header: header(3353, 0, 34_199_999_889_645),
                order_ref: 23_442_714,
            },
        ),
        (
            "OrderExecuted.pcap",
            0,
            Message::OrderExecuted {
                header: header(2345, 2, 34_199_999_934_561),
                order_ref: 23_499_418,
                executed_shares: 25,
                match_number: 255_547,
            },
        ),
        (
            "OrderExecutedWithPrice.pcap",
            0,
            Message::OrderExecutedWithPrice {
                header: header(5092, 1, 34_200_001_163_323),
                order_ref: 19_993_566,
                executed_shares: 4926,
                match_number: 255_581,
                printable: b'N',
                execution_price: 224_800,
            },
        ),
        (
            "OrderExecutedWithPrice.pcap",
            2,
            Message::OrderExecutedWithPrice {
                header: header(9509, 2, 34_200_007_615_761),
                order_ref: 34_105_576,
                executed_shares: 100,
                match_number: 256_056,
                printable: b'Y',
                execution_price: 4_411_700,
            },
        ),
        (
            "OrderReplace.pcap",
            0,
            Message::OrderReplace {
                header: header(7603, 0, 34_199_999_836_649),
                original_ref: 15_108_479,
                new_ref: 21_361_351,
                shares: 100,
                price: 1_062_600,
            },
        ),
        (
            "RegSHORestriction.pcap",
            0,
            Message::RegShoRestriction {
                header: header(9405, 0, 34_200_116_533_431),
                stock: sym(b"SOPA    "),
                action: b'1',
            },
        ),
        (
            "StockTradingAction.pcap",
            0,
            Message::StockTradingAction {
                header: header(11325, 0, 34_215_592_125_541),
                stock: sym(b"ZXZZT   "),
                trading_state: b'P',
                reserved: b' ',
                reason: *b"LUDP",
            },
        ),
    ]
}

#[test]
fn every_capture_decodes_field_by_field() {
    let Some(dir) = capture_dir() else { return };
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("folder")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".pcap"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 15, "one capture per message type: {files:?}");
    let expected = expected();
    for file in &files {
        let messages = messages(&dir, file);
        assert!(!messages.is_empty(), "{file}");
        assert!(
            expected.iter().any(|(name, _, _)| name == file),
            "{file} has an expected message"
        );
        for (index, (capture_ts, bytes)) in messages.iter().enumerate() {
            let message = itch::parse(bytes).unwrap_or_else(|e| panic!("{file} #{index}: {e}"));
            // Each file holds one type; its name says which.
            let kind = bytes[0];
            assert!(
                expected
                    .iter()
                    .any(|(name, _, m)| name == file && kind_of(m) == kind),
                "{file} #{index} is of type {:?}",
                kind as char
            );
            // The ITCH timestamp, made epoch ns on the session's New York date, is when the
            // message was sent: at or before the capture saw it, by less than a second.
            let sent = itch::epoch_ns(SESSION, message.header().timestamp_ns).expect("in the day");
            assert!(
                sent <= *capture_ts && capture_ts - sent < 1_000_000_000,
                "{file} #{index}: sent {sent}, captured {capture_ts}"
            );
            for (name, at, want) in &expected {
                if name == file && *at == index {
                    assert_eq!(message, *want, "{file} #{index}");
                }
            }
        }
    }
}

fn kind_of(message: &Message) -> u8 {
    match message {
        Message::SystemEvent { .. } => b'S',
        Message::AddOrder { .. } => b'A',
        Message::AddOrderMpid { .. } => b'F',
        Message::CrossTrade { .. } => b'Q',
        Message::LuldAuctionCollar { .. } => b'J',
        Message::MarketParticipantPosition { .. } => b'L',
        Message::Noii { .. } => b'I',
        Message::Trade { .. } => b'P',
        Message::OrderCancel { .. } => b'X',
        Message::OrderDelete { .. } => b'D',
        Message::OrderExecuted { .. } => b'E',
        Message::OrderExecutedWithPrice { .. } => b'C',
        Message::OrderReplace { .. } => b'U',
        Message::RegShoRestriction { .. } => b'Y',
        Message::StockTradingAction { .. } => b'H',
        other => panic!("no capture of {other:?}"),
    }
}

/// The prices read from the captures in their decimal form: 4 implied decimals.
#[test]
fn capture_prices_read_as_decimals() {
    let Some(dir) = capture_dir() else { return };
    let messages = messages(&dir, "AddOrderWithMPID.pcap");
    match itch::parse(&messages[0].1).expect("F") {
        Message::AddOrderMpid { price, stock, .. } => {
            assert_eq!(itch::price4(price).to_string(), "255.52");
            assert_eq!(stock.as_str(), Some("CASY"));
        }
        other => panic!("{other:?}"),
    }
    let collar = messages_of(&dir, "LULDAuctionCollar.pcap");
    match collar[0] {
        Message::LuldAuctionCollar {
            reference_price,
            upper_price,
            lower_price,
            ..
        } => {
            assert_eq!(reference_price.to_string(), "13.34");
            assert_eq!(upper_price.to_string(), "14.01");
            assert_eq!(lower_price.to_string(), "10.92");
        }
        other => panic!("{other:?}"),
    }
}

fn messages_of(dir: &std::path::Path, file: &str) -> Vec<Message> {
    messages(dir, file)
        .iter()
        .map(|(_, bytes)| itch::parse(bytes).expect("message"))
        .collect()
}

/// The book over the captured adds: each add makes its level, at the captured price and size,
/// and the captured deletes of orders it never saw are counted skips, not errors.
#[test]
fn the_book_takes_the_captured_orders() {
    let Some(dir) = capture_dir() else { return };
    let mut book = ItchBook::new(BookConfig {
        max_orders: 1024,
        max_levels: 1024,
    });
    let mut out = Vec::new();
    for message in messages_of(&dir, "AddOrderNoMPID.pcap") {
        book.apply(&message, &mut |o| out.push(o)).expect("room");
    }
    // XLF has two asks at 33.95: 100 then 4000 shares.
    assert_eq!(
        out[2..4],
        [
            BookOutput::Level {
                locate: 11112,
                side: tickwire::event::Side::Ask,
                price: 339_500,
                shares: 100
            },
            BookOutput::Level {
                locate: 11112,
                side: tickwire::event::Side::Ask,
                price: 339_500,
                shares: 4100
            },
        ]
    );
    assert_eq!(book.orders(), 5);
    for message in messages_of(&dir, "OrderDelete.pcap") {
        book.apply(&message, &mut |o| out.push(o)).expect("room");
    }
    assert_eq!(book.counters().unknown_ref, 5);
    assert_eq!(book.orders(), 5);
}
