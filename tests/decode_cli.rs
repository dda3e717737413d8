//! `tickwire decode` as a user runs it: a file in, JSON lines out, a summary on stderr.

mod common;

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
    assert!(
        stderr.contains("bookTicker=66089")
            && stderr.contains("depthUpdate=6551")
            && stderr.contains("trade=21313")
            && stderr.contains("0 malformed"),
        "{stderr}"
    );
    let lines = json_lines(&output.stdout);
    let count = |kind: &str| lines.iter().filter(|line| line["type"] == kind).count();
    assert_eq!(count("quote"), 66_089);
    assert_eq!(count("trade"), 21_313);
    // Every level of every depthUpdate, counted independently from the input.
    let mut levels = 0;
    let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(
        std::fs::File::open(&capture).unwrap(),
    ));
    for line in std::io::BufRead::lines(reader) {
        let line = line.unwrap();
        let json: serde_json::Value =
            serde_json::from_str(line.split_once(' ').unwrap().1).unwrap();
        if json["data"]["e"] == "depthUpdate" {
            levels += json["data"]["b"].as_array().unwrap().len()
                + json["data"]["a"].as_array().unwrap().len();
        }
    }
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
        r#"{"channel_name":"book.BTC-PERPETUAL.none.10.100ms","notification":{"trades":[[50000,0.25,"buy",1700000000.4,false]],"bid_changes":[[50000,1.5,1.5]],"ask_changes":[[50000.5,2,2]],"total_bid_amount":1.5,"total_ask_amount":2,"time":1700000000.5}}"#.to_owned(),
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
    // The first book message is its snapshot; its trade is a trade.
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
