//! `tickwire decode --venue bybit-spot|bybit-linear` on `<recv_ns> <json>` captures: exact
//! books, trades, quotes, marks, gaps and liquidations, each event with its line's receive time.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;

fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    stdout
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("every output line is JSON"))
        .collect()
}

fn decode(venue: &str, lines: &[(u64, &str)]) -> (Vec<serde_json::Value>, String) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for (recv_ns, message) in lines {
        writeln!(file, "{recv_ns} {message}").unwrap();
    }
    file.flush().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["decode", "--venue", venue])
        .arg(file.path())
        .output()
        .expect("tickwire runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (json_lines(&output.stdout), stderr)
}

/// The orderbook page's delta example, on one line (whitespace taken out, nothing else).
const DOC_DELTA: &str = r#"{"topic":"orderbook.50.BTCUSDT","type":"delta","ts":1687940967466,"data":{"s":"BTCUSDT","b":[["30247.20","30.028"],["30245.40","0.224"],["30242.10","1.593"],["30240.30","1.305"],["30240.00","0"]],"a":[["30248.70","0"],["30249.30","0.892"],["30249.50","1.778"],["30249.60","0"],["30251.90","2.947"],["30252.20","0.659"],["30252.50","4.591"]],"u":177400507,"seq":66544703342},"cts":1687940967464}"#;

/// The trade page's example, on one line.
const DOC_TRADE: &str = r#"{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1672304486868,"data":[{"T":1672304486865,"s":"BTCUSDT","S":"Buy","v":"0.001","p":"16578.50","L":"PlusTick","i":"20f43950-d8dd-5b31-9112-a178eb6023af","BT":false,"seq":1783284617}]}"#;

/// The ticker page's perpetual example, on one line.
const DOC_TICKER: &str = r#"{"topic":"tickers.BTCUSDT","type":"snapshot","data":{"symbol":"BTCUSDT","tickDirection":"MinusTick","price24hPcnt":"-0.158315","lastPrice":"66666.60","prevPrice24h":"79206.20","highPrice24h":"79266.30","lowPrice24h":"65076.90","prevPrice1h":"66666.60","markPrice":"66666.60","indexPrice":"115418.19","openInterest":"492373.72","openInterestValue":"32824881841.75","turnover24h":"4936790807.6521","volume24h":"73191.3870","fundingIntervalHour":"8","fundingCap":"0.005","nextFundingTime":"1760342400000","fundingRate":"-0.005","bid1Price":"66666.60","bid1Size":"23789.165","ask1Price":"66666.70","ask1Size":"23775.469","preOpenPrice":"","preQty":"","curPreListingPhase":""},"cs":9532239429,"ts":1760325052630}"#;

#[test]
fn a_linear_capture_prints_exact_books_trades_quotes_marks_and_gaps() {
    let snapshot = r#"{"topic":"orderbook.50.BTCUSDT","type":"snapshot","ts":1687940967000,"data":{"s":"BTCUSDT","b":[["30247.20","1"],["30240.00","2"]],"a":[["30248.70","3"],["30249.60","4"]],"u":177400506,"seq":66544703000},"cts":1687940966999}"#;
    let ticker_delta = r#"{"topic":"tickers.BTCUSDT","type":"delta","data":{"symbol":"BTCUSDT","bid1Price":"66666.50","markPrice":"66660.00"},"cs":9532239430,"ts":1760325052730}"#;
    let skipped = r#"{"topic":"orderbook.50.BTCUSDT","type":"delta","ts":1687940967600,"data":{"s":"BTCUSDT","b":[["30247.20","5"]],"a":[],"u":177400509,"seq":66544703400},"cts":1687940967598}"#;
    let pong = r#"{"success":true,"ret_msg":"pong","conn_id":"c1","req_id":"","op":"ping"}"#;
    let (events, summary) = decode(
        "bybit-linear",
        &[
            (101, snapshot),
            (102, DOC_DELTA),
            (103, DOC_TRADE),
            (104, DOC_TICKER),
            (105, ticker_delta),
            (106, pong),
            (107, skipped),
        ],
    );
    assert!(events
        .iter()
        .all(|e| e["venue"] == "bybit-linear" && e["symbol"] == "BTCUSDT"));
    let by_line = |ns: u64| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["recv_ts_ns"] == ns).collect()
    };
    let types = |ns: u64| -> Vec<&str> {
        by_line(ns)
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect()
    };
    assert_eq!(
        types(101),
        [
            "snapshot_begin",
            "level",
            "level",
            "level",
            "level",
            "snapshot_end",
            "quote"
        ]
    );
    // The delta: every level it changes (a delete as 0), then the book's new top.
    let levels: Vec<(String, String, String)> = by_line(102)
        .iter()
        .filter(|e| e["type"] == "level")
        .map(|e| {
            (
                e["side"].as_str().unwrap().to_owned(),
                e["px"].as_str().unwrap().to_owned(),
                e["qty"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(levels.len(), 12);
    assert!(
        levels.contains(&("bid".into(), "30240".into(), "0".into())),
        "{levels:?}"
    );
    assert!(
        levels.contains(&("ask".into(), "30248.7".into(), "0".into())),
        "{levels:?}"
    );
    assert!(
        levels.contains(&("bid".into(), "30247.2".into(), "30.028".into())),
        "{levels:?}"
    );
    let quote = by_line(102)
        .into_iter()
        .find(|e| e["type"] == "quote")
        .expect("a quote");
    assert_eq!(
        (
            &quote["bid_px"],
            &quote["bid_qty"],
            &quote["ask_px"],
            &quote["ask_qty"]
        ),
        (
            &"30247.2".into(),
            &"30.028".into(),
            &"30249.3".into(),
            &"0.892".into()
        )
    );
    assert_eq!(quote["source"], "book");
    assert_eq!(quote["seq"], 177400507);
    // The book after the delta, rebuilt from the printed levels, is the exact one.
    let mut bids: BTreeMap<String, String> = BTreeMap::new();
    for e in events.iter().filter(|e| {
        e["type"] == "level" && e["side"] == "bid" && e["recv_ts_ns"].as_u64() < Some(103)
    }) {
        let (px, qty) = (e["px"].as_str().unwrap(), e["qty"].as_str().unwrap());
        if qty == "0" {
            bids.remove(px);
        } else {
            bids.insert(px.to_owned(), qty.to_owned());
        }
    }
    assert_eq!(bids.len(), 4, "{bids:?}");
    let trade = by_line(103)[0];
    assert_eq!(
        (
            &trade["type"],
            &trade["px"],
            &trade["qty"],
            &trade["aggressor"]
        ),
        (
            &"trade".into(),
            &"16578.5".into(),
            &"0.001".into(),
            &"buy".into()
        )
    );
    assert_eq!(trade["exch_ts_ns"], 1_672_304_486_865_000_000u64);
    assert_eq!(
        trade["trade_id"],
        0x20f4_3950_d8dd_5b31u64 ^ 0x9112_a178_eb60_23af
    );
    assert_eq!(types(104), ["quote", "mark", "index"]);
    assert_eq!(by_line(104)[1]["px"], "66666.6");
    assert_eq!(by_line(104)[2]["px"], "115418.19");
    // The delta merged over the snapshot: the new bid, the snapshot's sizes and ask.
    assert_eq!(types(105), ["quote", "mark"]);
    let merged = by_line(105)[0];
    assert_eq!(
        (&merged["bid_px"], &merged["bid_qty"], &merged["ask_px"]),
        (&"66666.5".into(), &"23789.165".into(), &"66666.7".into())
    );
    assert!(by_line(106).is_empty(), "a pong makes no event");
    assert_eq!(types(107), ["gap"]);
    assert_eq!(by_line(107)[0]["reason"], "SequenceBreak");
    assert!(
        summary.contains("pong=1") && summary.contains("1 gaps"),
        "{summary}"
    );
}

#[test]
fn a_spot_capture_and_bad_lines_are_counted() {
    let snapshot = r#"{"topic":"orderbook.1.BTCUSDT","ts":1687940967000,"type":"snapshot","data":{"s":"BTCUSDT","b":[["30247.20","1"]],"a":[["30248.70","3"]],"u":5,"seq":1},"cts":1687940966999}"#;
    let trade = r#"{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1672304486868,"data":[{"i":"2290000000061666327","T":1672304486865,"p":"16578.50","v":"0.001","S":"Sell","s":"BTCUSDT","BT":false,"seq":1}]}"#;
    let exponent = r#"{"topic":"publicTrade.BTCUSDT","type":"snapshot","ts":1,"data":[{"i":"1","T":1,"p":"1e3","v":"1","S":"Sell","s":"BTCUSDT","seq":2}]}"#;
    let (events, summary) = decode(
        "bybit-spot",
        &[(1, snapshot), (2, trade), (3, exponent), (4, "{not json")],
    );
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "snapshot_begin",
            "level",
            "level",
            "snapshot_end",
            "quote",
            "trade"
        ]
    );
    assert_eq!(events[5]["trade_id"], 2_290_000_000_061_666_327u64);
    assert_eq!(events[5]["aggressor"], "sell");
    assert!(events.iter().all(|e| e["venue"] == "bybit-spot"));
    assert!(summary.contains("2 malformed"), "{summary}");
    assert!(
        summary.contains("bad decimal"),
        "the error is named: {summary}"
    );
}

/// The "All Liquidation" page's example, on one line.
const DOC_LIQUIDATION: &str = r#"{"topic":"allLiquidation.ROSEUSDT","type":"snapshot","ts":1739502303204,"data":[{"T":1739502302929,"s":"ROSEUSDT","S":"Sell","v":"20000","p":"0.04499"}]}"#;

#[test]
fn a_linear_capture_prints_the_documented_liquidation_as_a_liquidation_line() {
    let buy = DOC_LIQUIDATION.replace(r#""S":"Sell""#, r#""S":"Buy""#);
    let (events, _) = decode("bybit-linear", &[(201, DOC_LIQUIDATION), (202, &buy)]);
    assert_eq!(
        events,
        [
            serde_json::json!({
                "type": "liquidation", "venue": "bybit-linear", "symbol": "ROSEUSDT",
                "position": "short", "px": "0.04499", "qty": "20000",
                "exch_ts_ns": 1_739_502_302_929_000_000u64, "recv_ts_ns": 201,
            }),
            serde_json::json!({
                "type": "liquidation", "venue": "bybit-linear", "symbol": "ROSEUSDT",
                "position": "long", "px": "0.04499", "qty": "20000",
                "exch_ts_ns": 1_739_502_302_929_000_000u64, "recv_ts_ns": 202,
            }),
        ]
    );
}
