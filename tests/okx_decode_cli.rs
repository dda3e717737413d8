//! `tickwire decode --venue okx` on `<recv_ns> <json>` captures: books rebuilt and verified by
//! the venue's checksum, every corruption reported as a `gap` on its line (the book then
//! silent until the next snapshot), trades, quotes and marks, each event with its line's
//! receive time. There is no OKX capture in `../shared/data`: the lines are the OKX
//! simulator's and the documentation's examples.

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

fn decode(lines: &[(u64, String)]) -> (Vec<serde_json::Value>, String) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for (recv_ns, message) in lines {
        writeln!(file, "{recv_ns} {message}").unwrap();
    }
    file.flush().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["decode", "--venue", "okx"])
        .arg(file.path())
        .output()
        .expect("tickwire runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (json_lines(&output.stdout), stderr)
}

/// The "Trades channel" example, on one line.
const DOC_TRADE: &str = r#"{"arg":{"channel":"trades","instId":"BTC-USDT"},"data":[{"instId":"BTC-USDT","tradeId":"130639474","px":"42219.9","sz":"0.12060306","side":"buy","ts":"1630048897897","count":"3","source":"0","seqId":1234}]}"#;

/// The simulator's `books` messages for BTC-USDT (a snapshot, then updates with true
/// checksums), corrupted where asked (one level's size changed, the checksum left as the venue
/// computed it), interleaved with other lines. The book is rebuilt from the `level` lines and
/// compared with the last snapshot's levels and every `quote`.
#[test]
fn a_capture_is_rebuilt_verified_and_every_corruption_reported() {
    let instruments = ["BTC-USDT".to_owned()];
    let mut lines: Vec<(u64, String)> = Vec::new();
    let mut corrupted: Vec<u64> = Vec::new();
    let mut snapshots: Vec<u64> = Vec::new();
    // Two streams one after the other, as a resubscription after a mismatch brings: each a
    // snapshot then updates, one update of each corrupted.
    for seed in [3, 4] {
        let books = tickwire_sim::okx::messages(
            &instruments,
            &["books:BTC-USDT"],
            seed,
            1_700_000_000_000,
            150,
        );
        let mut done = false;
        for (index, message) in books.iter().enumerate() {
            let recv = 1_000 + lines.len() as u64;
            if index == 0 {
                snapshots.push(recv);
            }
            // From update 100 on, one update is corrupted: a level within 2.0 of the mid (so
            // in the first 25 of its side) has its size written otherwise (`1` more at its
            // end), the checksum left as the venue computed it.
            if index >= 100 && !done {
                let value: serde_json::Value = serde_json::from_str(message).unwrap();
                let data = &value["data"][0];
                let near = ["bids", "asks"].iter().find_map(|side| {
                    let level = data[*side].get(0)?;
                    let px = level[0].as_str()?;
                    let sz = level[1].as_str()?;
                    let distance = (px.parse::<f64>().ok()? - 30_000.0).abs();
                    (distance <= 2.0).then(|| {
                        (
                            format!(r#"["{px}","{sz}","#),
                            format!(r#"["{px}","{sz}1","#),
                        )
                    })
                });
                if let Some((level, corrupt)) = near {
                    lines.push((recv, message.replacen(&level, &corrupt, 1)));
                    corrupted.push(recv);
                    done = true;
                    continue;
                }
            }
            lines.push((recv, message.clone()));
        }
    }
    // A snapshot again after the last corruption: the book comes back.
    lines.push((5_000, DOC_TRADE.to_owned()));
    lines.push((5_001, "pong".to_owned()));
    let (events, summary) = decode(&lines);
    assert!(events
        .iter()
        .all(|e| e["venue"] == "okx" && e["symbol"] == "BTC-USDT"));
    let gaps: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "gap")
        .map(|e| e["recv_ts_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(
        gaps, corrupted,
        "every corruption, on its own line, and nothing else"
    );
    assert_eq!(corrupted.len(), 2);
    // After a gap nothing of the book is printed until the next snapshot.
    let silent = events
        .iter()
        .filter(|e| {
            let at = e["recv_ts_ns"].as_u64().unwrap();
            (at > corrupted[0] && at < snapshots[1]) || at > corrupted[1]
        })
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("level" | "quote" | "snapshot_begin")
            )
        })
        .count();
    assert_eq!(silent, 0);
    assert!(events
        .iter()
        .any(|e| e["recv_ts_ns"] == snapshots[1] && e["type"] == "snapshot_begin"));
    // The book rebuilt from the lines before the first corruption: every quote its top.
    let mut bids: BTreeMap<i64, (String, String)> = BTreeMap::new();
    let mut asks: BTreeMap<i64, (String, String)> = BTreeMap::new();
    let key = |px: &str| (px.parse::<f64>().unwrap() * 10_000.0).round() as i64;
    let mut quotes = 0;
    for event in events
        .iter()
        .filter(|e| e["recv_ts_ns"].as_u64().unwrap() < corrupted[0])
    {
        match event["type"].as_str().unwrap() {
            "snapshot_begin" => {
                bids.clear();
                asks.clear();
            }
            "level" => {
                let side = if event["side"] == "bid" {
                    &mut bids
                } else {
                    &mut asks
                };
                let px = event["px"].as_str().unwrap();
                let qty = event["qty"].as_str().unwrap();
                if qty == "0" {
                    side.remove(&key(px));
                } else {
                    side.insert(key(px), (px.to_owned(), qty.to_owned()));
                }
            }
            "quote" => {
                let (_, (bid_px, bid_qty)) = bids.iter().next_back().expect("a bid");
                let (_, (ask_px, ask_qty)) = asks.iter().next().expect("an ask");
                assert_eq!(event["bid_px"].as_str().unwrap(), bid_px);
                assert_eq!(event["bid_qty"].as_str().unwrap(), bid_qty);
                assert_eq!(event["ask_px"].as_str().unwrap(), ask_px);
                assert_eq!(event["ask_qty"].as_str().unwrap(), ask_qty);
                quotes += 1;
            }
            _ => {}
        }
    }
    assert!(quotes >= 5, "{quotes}");
    let levels = events.iter().filter(|e| e["type"] == "level").count();
    assert!(levels >= 300, "{levels}");
    let trade = events
        .iter()
        .find(|e| e["type"] == "trade")
        .expect("the trade");
    assert_eq!(trade["recv_ts_ns"], 5_000);
    assert_eq!(trade["px"], "42219.9");
    assert!(summary.contains("books_verified="), "{summary}");
    assert!(summary.contains("2 gaps"), "{summary}");
}
