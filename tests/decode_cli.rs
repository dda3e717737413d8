//! `tickwire decode` as a user runs it: a file in, JSON lines out, a summary on stderr.

use crate::support::common;

use std::io::Write;
use std::process::Command;

fn tickwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickwire"))
}

fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    stdout
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("every output line is JSON"))
        .collect()
}

#[test]
fn prints_every_field_of_each_event_type_and_counts_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.txt");
    let mut file = std::fs::File::create(&path).unwrap();
    // A prefixed bookTicker, an unprefixed raw trade, a depth update with two bids and one ask,
    // an aggTrade, a malformed line, an unknown event type and a subscription ack.
    writeln!(file, r#"1723161255030314667 {{"stream":"btcusdt@bookTicker","data":{{"e":"bookTicker","u":5123107831937,"s":"BTCUSDT","b":"61800.20","B":"2.909","a":"61800.30","A":"3.330","T":1723161256297,"E":1723161256299}}}}"#).unwrap();
    writeln!(file, r#"{{"e":"trade","E":1723161256322,"T":1723161256321,"s":"BTCUSDT","t":5266583935,"p":"61800.30","q":"0.006","X":"MARKET","m":true}}"#).unwrap();
    writeln!(file, r#"7 {{"stream":"btcusdt@depth@0ms","data":{{"e":"depthUpdate","E":1723161256299,"T":1723161256298,"s":"BTCUSDT","U":10,"u":12,"pu":9,"b":[["61800.20","0.000"],["61790.10","1.5"]],"a":[["61800.30","3.1"]]}}}}"#).unwrap();
    writeln!(file, r#"{{"e":"aggTrade","E":1,"s":"BTCUSDT","a":77,"p":"1.5","q":"2","f":100,"l":105,"T":2,"m":false}}"#).unwrap();
    writeln!(file, r#"{{"e":"bookTicker","u":1,"#).unwrap();
    writeln!(file, r#"{{"e":"somethingNew","E":1,"s":"BTCUSDT"}}"#).unwrap();
    writeln!(file, r#"{{"result":null,"id":1}}"#).unwrap();
    drop(file);

    let output = tickwire()
        .args(["decode", "--venue", "binance-futures"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = json_lines(&output.stdout);
    assert_eq!(
        lines.len(),
        6,
        "quote, trade, 3 levels, aggTrade: {lines:#?}"
    );

    let quote = &lines[0];
    assert_eq!(
        quote,
        &serde_json::json!({"type":"quote","venue":"binance-futures","symbol":"BTCUSDT",
            "seq":5123107831937u64,"event_ts_ns":1723161256299000000u64,
            "exch_ts_ns":1723161256297000000u64,"recv_ts_ns":1723161255030314667u64,
            "bid_px":"61800.2","bid_qty":"2.909","ask_px":"61800.3","ask_qty":"3.33"})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"type":"trade","venue":"binance-futures","symbol":"BTCUSDT",
            "trade_id":5266583935u64,"px":"61800.3","qty":"0.006","aggressor":"sell",
            "event_ts_ns":1723161256322000000u64,"exch_ts_ns":1723161256321000000u64,
            "recv_ts_ns":0})
    );
    let level = |side: &str, px: &str, qty: &str| {
        serde_json::json!({"type":"level","venue":"binance-futures","symbol":"BTCUSDT",
            "side":side,"px":px,"qty":qty,"seq":12,"first_seq":10,"prev_seq":9,
            "event_ts_ns":1723161256299000000u64,"exch_ts_ns":1723161256298000000u64,
            "recv_ts_ns":7})
    };
    assert_eq!(lines[2], level("bid", "61800.2", "0"));
    assert_eq!(lines[3], level("bid", "61790.1", "1.5"));
    assert_eq!(lines[4], level("ask", "61800.3", "3.1"));
    assert_eq!(lines[5]["trade_id"], 77);
    assert_eq!(lines[5]["aggressor"], "buy");
    assert!(stderr.contains("1 malformed"), "{stderr}");
    assert!(stderr.contains("unknown:somethingNew=1"), "{stderr}");
    assert!(
        stderr.contains("line 5"),
        "the malformed line is named: {stderr}"
    );
}

#[test]
fn decodes_the_whole_capture() {
    let Some(capture) = common::shared_data("binance-futures/btcusdt_20240808.gz") else {
        return;
    };
    let output = tickwire()
        .args(["decode", "--venue", "binance-futures"])
        .arg(&capture)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // Every message of each type and every level of every depthUpdate, counted independently
    // from the input with a general JSON parser.
    let mut by_type: std::collections::BTreeMap<String, usize> = Default::default();
    let mut levels = 0;
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(
        std::fs::File::open(&capture).unwrap(),
    ));
    for line in std::io::BufRead::lines(reader) {
        let line = line.unwrap();
        let json: serde_json::Value =
            serde_json::from_str(line.split_once(' ').unwrap().1).unwrap();
        // The capture also holds REST depth snapshots, which have no event type.
        let Some(kind) = json["data"]["e"].as_str() else {
            continue;
        };
        *by_type.entry(kind.to_owned()).or_default() += 1;
        if kind == "depthUpdate" {
            levels += json["data"]["b"].as_array().unwrap().len()
                + json["data"]["a"].as_array().unwrap().len();
        }
    }
    let in_capture = |kind: &str| by_type.get(kind).copied().unwrap_or(0);
    assert!(
        in_capture("bookTicker") > 0 && in_capture("depthUpdate") > 0 && in_capture("trade") > 0,
        "{by_type:?}"
    );
    for kind in ["bookTicker", "depthUpdate", "trade"] {
        let said = format!("{kind}={}", in_capture(kind));
        assert!(stderr.contains(&said), "the summary says {said}: {stderr}");
    }
    assert!(stderr.contains("0 malformed"), "{stderr}");
    let lines = json_lines(&output.stdout);
    let count = |kind: &str| lines.iter().filter(|line| line["type"] == kind).count();
    assert_eq!(count("quote"), in_capture("bookTicker"));
    assert_eq!(count("trade"), in_capture("trade"));
    assert_eq!(count("level"), levels);
}

#[test]
fn refuses_an_unknown_venue_and_a_missing_file() {
    let output = tickwire()
        .args(["decode", "--venue", "nasdaq", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("binance-futures"));
    let output = tickwire()
        .args([
            "decode",
            "--venue",
            "binance-futures",
            "/nonexistent/file.gz",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/file.gz"));
}

/// Real-shaped Thalex messages (api.yaml's shapes, floats with up to 17 significant digits):
/// every event with exact or 1e-9-rounded decimals, malformed lines counted and not printed.
#[test]
fn decodes_a_thalex_capture_with_routes_from_its_channels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thalex.txt");
    let combo = "[BTC-30MAY25-93000-C:-1,BTC-30MAY25-95000-C:1]";
    let lines = [
        r#"1700000000000000001 {"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":76000,"best_bid_amount":1e-3,"best_ask_price":76001,"best_ask_amount":2,"mark_price":76000.5,"mark_timestamp":1776715497.5,"index":76283.25916666667}}"#.to_owned(),
        r#"{"id":3,"result":["book.BTC-PERPETUAL.none.10.100ms"]}"#.to_owned(),
        String::new(),
        r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[[50000,0.25,"buy",1700000000.4,false]],"bid_changes":[[50000,1.5,1.5]],"ask_changes":[[50000.5,2,2]],"total_bid_amount":1.5,"total_ask_amount":2,"time":1700000000.5},"snapshot":true}"#.to_owned(),
        r#"{"notification":{"trades":[[50000,0.5,"sell",1700000000.6,false]],"bid_changes":[[50000,0,0]],"ask_changes":[],"time":1700000000.6},"channel_name":"book.BTC-PERPETUAL.none.10.100ms"}"#.to_owned(),
        r#"{"channel_name":"price_index.BTCUSD","notification":{"index_name":"BTCUSD","price":47389.10833333334,"timestamp":1776715497.7188172}}"#.to_owned(),
        format!(r#"{{"channel_name":"recent_trades.BTCUSD.all","notification":[[12,1,"buy",1700000000.7,"{combo}",false],[76000,0.1,"sell",1700000000.8,"BTC-PERPETUAL",true]]}}"#),
        r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":"x"}}"#.to_owned(),
        r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":.4}}"#.to_owned(),
        r#"{"channel_name":"ticker.BTC-PERPETUAL.100ms","notification":{"best_bid_price":1}}x"#.to_owned(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = tickwire()
        .args(["decode", "--venue", "thalex"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let events = json_lines(&output.stdout);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "quote",
            "mark",
            "index",
            "snapshot_begin",
            "level",
            "level",
            "snapshot_end",
            "quote",
            "trade",
            "level",
            "quote",
            "trade",
            "index",
            "trade",
            "trade"
        ]
    );
    assert_eq!(events[0]["symbol"], "BTC-PERPETUAL");
    assert_eq!(events[0]["bid_px"], "76000");
    assert_eq!(events[0]["bid_qty"], "0.001");
    assert_eq!(events[0]["ask_px"], "76001");
    assert_eq!(events[0]["recv_ts_ns"], 1_700_000_000_000_000_001u64);
    assert_eq!(events[0]["exch_ts_ns"], 1_776_715_497_500_000_000u64);
    assert_eq!(events[1]["px"], "76000.5");
    // 76283.25916666667 has eleven decimals: rounded to nine.
    assert_eq!(events[2]["px"], "76283.259166667");
    // The book message marked `"snapshot":true` is its snapshot; its trade is a trade.
    assert_eq!(events[8]["aggressor"], "buy");
    assert_eq!(events[8]["exch_ts_ns"], 1_700_000_000_400_000_000u64);
    // The book after the change: the bid at 50000 is gone, so the top is empty on that side.
    assert_eq!(events[10]["source"], "book");
    assert_eq!(events[10]["bid_px"], "0");
    assert_eq!(events[11]["aggressor"], "sell");
    assert_eq!(events[12]["symbol"], "BTCUSD");
    assert_eq!(events[12]["px"], "47389.108333333");
    assert_eq!(events[12]["exch_ts_ns"], 1_776_715_497_718_817_200u64);
    // An underlying's recent trades, each named by its tuple's instrument.
    assert_eq!(events[13]["symbol"], combo);
    assert_eq!(events[13]["px"], "12");
    assert_eq!(events[14]["symbol"], "BTC-PERPETUAL");
    assert_eq!(events[14]["qty"], "0.1");
    let summary = String::from_utf8_lossy(&output.stderr);
    assert!(summary.contains("10 lines; 9 messages"), "{summary}");
    assert!(summary.contains("3 malformed"), "{summary}");
}

/// A Thalex capture that starts mid-stream: book updates before the first snapshot make no book
/// (their trades are still printed), and a channel name spelled with a JSON escape is counted
/// as malformed, never printed under that spelling.
#[test]
fn a_thalex_capture_starting_mid_stream_has_no_book_until_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thalex.txt");
    let book = "book.BTC-PERPETUAL.none.10.100ms";
    let lines = [
        format!(r#"{{"channel_name":"{book}","notification":{{"trades":[[50000,0.25,"buy",1700000000.1,false]],"bid_changes":[[50001,1,1]],"ask_changes":[],"time":1700000000.1}}}}"#),
        r#"{"channel_name":"ticker.BTC\u002dPERPETUAL.100ms","notification":{"best_bid_price":1,"best_ask_price":2}}"#.to_owned(),
        format!(r#"{{"channel_name":"{book}","notification":{{"trades":[],"bid_changes":[[50000,1.5,1.5]],"ask_changes":[[50000.5,2,2]],"time":1700000000.5}},"snapshot":true}}"#),
        format!(r#"{{"channel_name":"{book}","notification":{{"trades":[[50000.5,1,"sell",1700000000.6,false]],"bid_changes":[[50000.25,1,1]],"ask_changes":[],"time":1700000000.6}}}}"#),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let output = tickwire()
        .args(["decode", "--venue", "thalex"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("u002d"), "{stdout}");
    let events = json_lines(&output.stdout);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "trade",
            "snapshot_begin",
            "level",
            "level",
            "snapshot_end",
            "quote",
            "level",
            "quote",
            "trade"
        ]
    );
    assert_eq!(events[0]["px"], "50000");
    // The snapshot holds its own levels only: 50001 from the update before it is not there.
    assert_eq!(events[2]["px"], "50000");
    assert_eq!(events[5]["bid_px"], "50000");
    assert_eq!(events[7]["bid_px"], "50000.25");
    let summary = String::from_utf8_lossy(&output.stderr);
    assert!(summary.contains("1 malformed"), "{summary}");
}

#[test]
fn binance_mark_prices_print_as_mark_and_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mark.txt");
    std::fs::write(
        &path,
        "5 {\"e\":\"markPriceUpdate\",\"E\":1562305380000,\"s\":\"BTCUSDT\",\"p\":\"11794.15000000\",\"i\":\"11784.62659091\",\"P\":\"11784.25641265\",\"r\":\"0.00038167\",\"T\":1562306400000}\n",
    )
    .unwrap();
    let output = tickwire()
        .args(["decode", "--venue", "binance-futures"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let events = json_lines(&output.stdout);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["type"], "mark");
    assert_eq!(events[0]["px"], "11794.15");
    assert_eq!(events[1]["type"], "index");
    assert_eq!(events[1]["px"], "11784.62659091");
    assert_eq!(events[1]["exch_ts_ns"], 1_562_305_380_000_000_000u64);
    assert_eq!(events[1]["recv_ts_ns"], 5);
}

#[test]
fn decodes_databento_dbn_files_and_fragments_through_the_record_stream() {
    let Some(trades) = common::shared_data("dbn/test_data.trades.v3.dbn.zst") else {
        return;
    };
    let output = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&trades)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = json_lines(&output.stdout);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["type"], "trade");
    assert_eq!(lines[0]["venue"], "databento");
    assert_eq!(
        lines[0]["symbol"], "ESH1",
        "the symbol from the metadata's mappings"
    );
    assert_eq!(lines[0]["px"], "3720.25");
    assert_eq!(lines[0]["qty"], "5");
    assert_eq!(lines[0]["aggressor"], "sell");
    assert_eq!(lines[0]["exch_ts_ns"], 1_609_160_400_098_821_953u64);
    assert_eq!(lines[0]["recv_ts_ns"], 1_609_160_400_099_150_057u64);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("DBN v3, zstd; 2 records"), "{stderr}");

    let Some(status) = common::shared_data("dbn/test_data.status.dbn") else {
        return;
    };
    let output = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&status)
        .output()
        .unwrap();
    assert!(output.status.success());
    let lines = json_lines(&output.stdout);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1]["type"], "trading_status");
    assert_eq!(lines[1]["is_trading"], "N");
    assert_eq!(lines[1]["is_quoting"], "Y");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("DBN v2;"),
        "untagged .dbn files are v2"
    );

    let Some(fragment) = common::shared_data("dbn/test_data.definition.v1.dbn.frag") else {
        return;
    };
    let missing = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&fragment)
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--dbn-version"));
    let output = tickwire()
        .args(["decode", "--venue", "databento", "--dbn-version", "1"])
        .arg(&fragment)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "definitions make no events");
    assert!(String::from_utf8_lossy(&output.stderr).contains("definitions=2"));
}

#[test]
fn a_truncated_dbn_file_names_the_file_and_the_offset() {
    let Some(mbo) = common::shared_data("dbn/test_data.mbo.v3.dbn") else {
        return;
    };
    let bytes = std::fs::read(mbo).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.dbn");
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let output = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cut.dbn"), "{stderr}");
    assert!(
        stderr.contains(&format!("byte offset {}", bytes.len() - 56)),
        "{stderr}"
    );
    assert!(
        stderr.contains("stream ends inside a DBN record"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// ns since the epoch of midnight UTC on 2024-03-`day`, plus `hours`.
fn march_2024(day: u64, hours: u64) -> u64 {
    // 2024-03-01T00:00:00Z.
    const MARCH_1_NS: u64 = 1_709_251_200_000_000_000;
    MARCH_1_NS + ((day - 1) * 24 + hours) * 3_600_000_000_000
}

fn dbn_trade(instrument_id: u32, ts_recv: u64, price_units: i64, sequence: u32) -> dbn::TradeMsg {
    dbn::TradeMsg {
        hd: dbn::RecordHeader::new::<dbn::TradeMsg>(
            dbn::rtype::MBP_0,
            1,
            instrument_id,
            ts_recv - 1_000,
        ),
        price: price_units * dbn::FIXED_PRICE_SCALE,
        size: 1,
        action: b'T' as std::ffi::c_char,
        side: b'B' as std::ffi::c_char,
        flags: dbn::FlagSet::new(dbn::flags::LAST),
        depth: 0,
        ts_recv,
        ts_in_delta: 0,
        sequence,
    }
}

#[test]
fn a_short_v2_record_ends_the_decode_cleanly_after_printing_what_came_before() {
    use dbn::encode::{DbnEncoder, EncodeRecord};
    // Issue 24: Databento's encoder wrote a 16-byte STATISTICS header after v2 metadata; dbn's
    // v2-to-v3 upgrade unwrapped on it and the decode died of SIGABRT with its output unflushed.
    let metadata = dbn::MetadataBuilder::new()
        .version(2)
        .dataset("GLBX.MDP3".to_owned())
        .schema(None)
        .start(march_2024(1, 0))
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .build();
    let mut bytes = Vec::new();
    {
        let mut encoder = DbnEncoder::new(&mut bytes, &metadata).unwrap();
        encoder
            .encode_record(&dbn_trade(7, march_2024(1, 1), 100, 1))
            .unwrap();
        encoder
            .encode_record(&dbn_trade(7, march_2024(1, 2), 101, 2))
            .unwrap();
    }
    let short_at = bytes.len();
    // A STATISTICS record header whose length byte says 16 bytes (4 words); v2's StatMsg is 64.
    let mut short = [0u8; 16];
    short[0] = 4;
    short[1] = dbn::rtype::STATISTICS;
    bytes.extend_from_slice(&short);
    let mut encoder = dbn::encode::DbnRecordEncoder::new(&mut bytes);
    encoder
        .encode_record(&dbn_trade(7, march_2024(1, 3), 102, 3))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short-stat.v2.dbn");
    std::fs::write(&path, &bytes).unwrap();

    let output = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("short-stat.v2.dbn"), "{stderr}");
    assert!(
        stderr.contains(&format!("byte offset {short_at} (after 2 records)")),
        "{stderr}"
    );
    assert!(
        stderr.contains("DBN v2 rtype 0x18 record of 16 bytes, under its 64-byte layout"),
        "{stderr}"
    );
    let lines = json_lines(&output.stdout);
    let prices: Vec<&str> = lines.iter().map(|l| l["px"].as_str().unwrap()).collect();
    assert_eq!(
        prices,
        ["100", "101"],
        "the trades before the bad record are printed, nothing after it"
    );
}

#[test]
fn continuous_symbols_are_named_by_the_mappings_dates() {
    use dbn::encode::{DbnEncoder, EncodeRecord};
    use time::macros::date;
    // ES.c.0 rolls from instrument 111 to 222 on 2024-03-03; 222 was ES.c.1 before, and 333
    // becomes ES.c.1. Instrument 222 is named ES.c.1 before the roll and ES.c.0 after, as
    // Databento's own `TsSymbolMap` names it.
    let interval = |start_date, end_date, symbol: &str| dbn::MappingInterval {
        start_date,
        end_date,
        symbol: symbol.to_owned(),
    };
    let mappings = vec![
        dbn::SymbolMapping {
            raw_symbol: "ES.c.0".to_owned(),
            intervals: vec![
                interval(date!(2024 - 03 - 01), date!(2024 - 03 - 03), "111"),
                interval(date!(2024 - 03 - 03), date!(2024 - 03 - 05), "222"),
            ],
        },
        dbn::SymbolMapping {
            raw_symbol: "ES.c.1".to_owned(),
            intervals: vec![
                interval(date!(2024 - 03 - 01), date!(2024 - 03 - 03), "222"),
                interval(date!(2024 - 03 - 03), date!(2024 - 03 - 05), "333"),
            ],
        },
    ];
    let metadata = dbn::MetadataBuilder::new()
        .dataset("GLBX.MDP3".to_owned())
        .schema(Some(dbn::Schema::Trades))
        .start(march_2024(1, 0))
        .end(std::num::NonZeroU64::new(march_2024(5, 0)))
        .stype_in(Some(dbn::SType::Continuous))
        .stype_out(dbn::SType::InstrumentId)
        .symbols(vec!["ES.c.0".to_owned(), "ES.c.1".to_owned()])
        .mappings(mappings)
        .build();
    let trades = [
        (111, march_2024(2, 12), 1),
        (222, march_2024(2, 12), 2),
        (222, march_2024(2, 23), 3),
        (222, march_2024(3, 0), 4),
        (333, march_2024(3, 1), 5),
        (222, march_2024(4, 23), 6),
        (444, march_2024(4, 23), 7),
    ];
    let mut bytes = Vec::new();
    {
        let mut encoder = DbnEncoder::new(&mut bytes, &metadata).unwrap();
        for (instrument, ts_recv, price) in trades {
            encoder
                .encode_record(&dbn_trade(instrument, ts_recv, price, price as u32))
                .unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("continuous.dbn");
    std::fs::write(&path, &bytes).unwrap();

    let output = tickwire()
        .args(["decode", "--venue", "databento"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let named: Vec<(String, String)> = json_lines(&output.stdout)
        .iter()
        .map(|line| {
            (
                line["px"].as_str().unwrap().to_owned(),
                line["symbol"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("1", "ES.c.0"),
        ("2", "ES.c.1"),
        ("3", "ES.c.1"),
        ("4", "ES.c.0"),
        ("5", "ES.c.1"),
        ("6", "ES.c.0"),
        ("7", "444"),
    ]
    .iter()
    .map(|(px, symbol)| (px.to_string(), symbol.to_string()))
    .collect();
    assert_eq!(named, expected);

    // The official map, for the record: the same names.
    let map = dbn::TsSymbolMap::from_metadata(&metadata).unwrap();
    for (instrument, ts_recv, price) in trades {
        let official = map.get_for_ts(ts_recv, instrument).cloned();
        let ours = &expected[price as usize - 1].1;
        assert_eq!(official.as_deref().unwrap_or(&instrument.to_string()), ours);
    }
}

/// `--venue binance-spot`: Spot's shapes (a bookTicker without times, a depthUpdate without `T`
/// or `pu`, a partial depth named by its stream) as the same `quote`, `trade` and `level` lines.
#[test]
fn binance_spot_prints_the_same_lines_with_the_fields_spot_sends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spot.txt");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, r#"1723161254087891268 {{"stream":"btcusdt@bookTicker","data":{{"u":50093239212,"s":"BTCUSDT","b":"61837.63000000","B":"3.78826000","a":"61837.64000000","A":"1.54698000"}}}}"#).unwrap();
    writeln!(file, r#"5 {{"stream":"btcusdt@trade","data":{{"e":"trade","E":1723161255343,"s":"BTCUSDT","t":3735683259,"p":"61837.63000000","q":"0.02000000","T":1723161255342,"m":true,"M":true}}}}"#).unwrap();
    writeln!(file, r#"6 {{"stream":"btcusdt@depth@100ms","data":{{"e":"depthUpdate","E":1723161255308,"s":"BTCUSDT","U":50093239203,"u":50093239207,"b":[["55653.87000000","0.00000000"]],"a":[["61838.04000000","0.32332000"]]}}}}"#).unwrap();
    writeln!(file, r#"7 {{"stream":"btcusdt@depth5","data":{{"lastUpdateId":160,"bids":[["0.0024","10"]],"asks":[]}}}}"#).unwrap();
    writeln!(file, r#"{{"u":1,"s":"BTCUSDT""#).unwrap();
    drop(file);
    let output = tickwire()
        .args(["decode", "--venue", "binance-spot"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = json_lines(&output.stdout);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert_eq!(
        lines[0],
        serde_json::json!({"type":"quote","venue":"binance-spot","symbol":"BTCUSDT",
            "seq":50093239212u64,"recv_ts_ns":1723161254087891268u64,
            "bid_px":"61837.63","bid_qty":"3.78826","ask_px":"61837.64","ask_qty":"1.54698"})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"type":"trade","venue":"binance-spot","symbol":"BTCUSDT",
            "trade_id":3735683259u64,"px":"61837.63","qty":"0.02","aggressor":"sell",
            "event_ts_ns":1723161255343000000u64,"exch_ts_ns":1723161255342000000u64,
            "recv_ts_ns":5})
    );
    assert_eq!(
        lines[2],
        serde_json::json!({"type":"level","venue":"binance-spot","symbol":"BTCUSDT",
            "side":"bid","px":"55653.87","qty":"0","seq":50093239207u64,
            "first_seq":50093239203u64,"event_ts_ns":1723161255308000000u64,
            "exch_ts_ns":1723161255308000000u64,"recv_ts_ns":6})
    );
    assert_eq!(lines[3]["side"], "ask");
    assert_eq!(
        lines[4],
        serde_json::json!({"type":"level","venue":"binance-spot","symbol":"BTCUSDT",
            "side":"bid","px":"0.0024","qty":"10","seq":160,"recv_ts_ns":7})
    );
    assert!(stderr.contains("1 malformed"), "{stderr}");
    assert!(stderr.contains("partialDepth=1"), "{stderr}");
}

/// The whole Spot capture through the command: every message decoded, none malformed.
#[test]
fn binance_spot_decodes_the_whole_capture() {
    let Some(path) = common::shared_data("binance-spot/btcusdt_20240808.gz") else {
        return;
    };
    let output = tickwire()
        .args(["decode", "--venue", "binance-spot"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "41249 messages (bookTicker=28040, depthSnapshot=1, depthUpdate=3451, trade=9757)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("0 malformed"), "{stderr}");
    assert_eq!(json_lines(&output.stdout).len(), 161887);
}

/// `tickwire record --venue` keeps a binary message as `<ns> base64:<frame>`; `tickwire decode
/// --venue binance-spot` reads such lines back as SBE, beside JSON lines, into the same event
/// lines. The frames come from sbe-tool's generated encoder, not from tickwire's code.
#[test]
fn recorded_sbe_frames_decode_into_the_json_streams_lines() {
    use base64::Engine as _;
    use binance_sbe_official::encode;
    let b64 = |frame: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(frame);
    let quote = b64(encode::best_bid_ask(&encode::BestBidAsk {
        event_time_us: 1_723_161_256_313_001,
        book_update_id: 50_093_239_212,
        price_exponent: -2,
        qty_exponent: -8,
        bid_price: 6_180_020,
        bid_qty: 250_700_000,
        ask_price: 6_180_030,
        ask_qty: 1,
        symbol: "BTCUSDT",
    }));
    let trades = b64(encode::trades(&encode::Trades {
        event_time_us: 1_723_161_256_400_000,
        transact_time_us: 1_723_161_256_399_999,
        price_exponent: -2,
        qty_exponent: -8,
        trades: &[
            encode::Trade {
                id: 7,
                price: 6_180_030,
                qty: 600_000,
                is_buyer_maker: true,
            },
            encode::Trade {
                id: 8,
                price: 6_180_040,
                qty: 100_000_000,
                is_buyer_maker: false,
            },
        ],
        symbol: "BTCUSDT",
    }));
    let diff = b64(encode::depth_diff(&encode::Depth {
        event_time_us: 1_723_161_256_500_000,
        first_update_id: 100,
        last_update_id: 102,
        price_exponent: -2,
        qty_exponent: -8,
        bids: &[(6_180_020, 0)],
        asks: &[(6_180_030, 310_000_000)],
        symbol: "BTCUSDT",
    }));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sbe.txt");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "1 {{\"result\":null,\"id\":1}}").unwrap();
    writeln!(file, "2 base64:{quote}").unwrap();
    writeln!(file, "3 base64:{trades}").unwrap();
    writeln!(file, "4 base64:{diff}").unwrap();
    writeln!(file, "5 base64:AAAA").unwrap();
    writeln!(file, "6 base64:not base64!").unwrap();
    drop(file);
    let output = tickwire()
        .args(["decode", "--venue", "binance-spot"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = json_lines(&output.stdout);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert_eq!(lines[0]["type"], "quote");
    assert_eq!(lines[0]["seq"], 50_093_239_212u64);
    assert_eq!(lines[0]["bid_px"], "61800.2");
    assert_eq!(lines[0]["bid_qty"], "2.507");
    assert_eq!(lines[0]["ask_qty"], "0.00000001");
    assert_eq!(lines[0]["event_ts_ns"], 1_723_161_256_313_001_000u64);
    assert_eq!(lines[0]["recv_ts_ns"], 2);
    assert_eq!(lines[1]["type"], "trade");
    assert_eq!(lines[1]["trade_id"], 7);
    assert_eq!(lines[1]["aggressor"], "sell");
    assert_eq!(lines[1]["qty"], "0.006");
    assert_eq!(lines[2]["trade_id"], 8);
    assert_eq!(lines[2]["aggressor"], "buy");
    assert_eq!(lines[2]["exch_ts_ns"], 1_723_161_256_399_999_000u64);
    assert_eq!(lines[3]["type"], "level");
    assert_eq!(lines[3]["side"], "bid");
    assert_eq!(lines[3]["qty"], "0");
    assert_eq!(
        (&lines[3]["seq"], &lines[3]["first_seq"]),
        (&102.into(), &100.into())
    );
    assert_eq!(lines[4]["side"], "ask");
    assert_eq!(lines[4]["qty"], "3.1");
    assert!(stderr.contains("2 malformed"), "{stderr}");
    assert!(stderr.contains("sbe:bestBidAsk=1"), "{stderr}");
}
