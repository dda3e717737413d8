//! Every price and quantity in the real Binance USD-M capture goes through `Fixed::parse` and
//! back through `Display` to the same decimal, compared against a string-only oracle: the
//! fixed-point path is exact on what the venue actually sends.

use crate::support::common;

use std::io::{BufRead, BufReader};
use tickwire::fixed::Fixed;

/// The oracle: the venue's string with trailing fractional zeros (and a bare point) removed.
fn normalise(text: &str) -> String {
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    };
    let (sign, body) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let body = body.trim_start_matches('0');
    let body = if body.is_empty() || body.starts_with('.') {
        format!("0{body}")
    } else {
        body.to_owned()
    };
    if body == "0" {
        body
    } else {
        format!("{sign}{body}")
    }
}

fn check(text: &str, checked: &mut u64) {
    let value = Fixed::parse_str(text).unwrap_or_else(|error| panic!("{text:?}: {error}"));
    assert_eq!(value.to_string(), normalise(text), "decimal {text:?}");
    *checked += 1;
}

#[test]
fn every_decimal_in_the_binance_capture_round_trips_exactly() {
    let Some(path) = common::shared_data("binance-futures/btcusdt_20240808.gz") else {
        return;
    };
    let file = std::fs::File::open(&path).unwrap();
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let (mut messages, mut checked) = (0u64, 0u64);
    for line in reader.lines() {
        let line = line.unwrap();
        let (_recv_ns, json) = line.split_once(' ').expect("<recv ns> <json>");
        let message: serde_json::Value = serde_json::from_str(json).unwrap();
        let data = &message["data"];
        for key in ["b", "B", "a", "A", "p", "q"] {
            match &data[key] {
                serde_json::Value::String(text) => check(text, &mut checked),
                // depthUpdate: "b"/"a" are arrays of [price, quantity].
                serde_json::Value::Array(levels) => {
                    for level in levels {
                        for text in level.as_array().unwrap() {
                            check(text.as_str().unwrap(), &mut checked);
                        }
                    }
                }
                _ => {}
            }
        }
        messages += 1;
    }
    assert_eq!(
        messages, 93_954,
        "the capture's README counts 93,954 messages"
    );
    assert!(checked > 500_000, "only {checked} decimals found");
    println!("{checked} decimals from {messages} messages round-tripped exactly");
}
