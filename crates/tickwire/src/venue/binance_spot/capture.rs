//! `tickwire decode --venue binance-spot`: the Spot decoder, the same `quote`, `trade` and
//! `level` lines as `--venue binance-futures` (`json.rs`), the same summary. A line that
//! `tickwire record --venue` kept as base64 (`venue::capture::BINARY_PREFIX`) is one SBE frame
//! (`sbe.rs`), so the SBE streams' captures (`binance-spot-sbe`) are read here too.

use super::decode::{self as spot, Message as SpotMessage};
use super::json as spot_json;
use crate::venue::binance::decode::TradeKind;
use crate::venue::capture::{json_summary, Capture, CaptureDecoder, BINARY_PREFIX};
use std::collections::BTreeMap;

/// The venue label of Spot captures, JSON and SBE.
pub const LABEL: &str = "binance-spot";

/// Spot's capture decoder (`Protocol::capture_decoder` of `binance-spot`).
pub struct SpotCapture;

impl CaptureDecoder for SpotCapture {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        let out = &mut *capture.out;
        let notes = &mut *capture.notes;
        let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut unknown_types: BTreeMap<String, u64> = BTreeMap::new();
        let (mut skipped, mut malformed, mut events) = (0u64, 0u64, 0u64);
        let mut buffer = Vec::with_capacity(1 << 16);
        let mut binary = Vec::with_capacity(1 << 16);
        let lines = (capture.lines)(&mut |line, recv_ts_ns, message| {
            buffer.clear();
            // A binary message `tickwire record --venue` kept in base64: one SBE frame.
            if let Some(encoded) = message.strip_prefix(BINARY_PREFIX.as_bytes()) {
                use super::sbe::{self, Message as Sbe};
                use base64::Engine as _;
                binary.clear();
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode_vec(encoded, &mut binary)
                    .map_err(|error| error.to_string())
                    .and_then(|()| sbe::decode(&binary).map_err(|error| error.to_string()));
                match decoded {
                    Ok(frame) => {
                        let (name, count) = match &frame {
                            Sbe::BestBidAsk(_) => ("sbe:bestBidAsk", 1),
                            Sbe::Trades(m) => ("sbe:trade", m.trades.len()),
                            Sbe::DepthDiff(m) => ("sbe:depth", m.bids.len() + m.asks.len()),
                            Sbe::DepthSnapshot(m) => ("sbe:depth20", m.bids.len() + m.asks.len()),
                        };
                        *by_type.entry(name).or_default() += 1;
                        events += count as u64;
                        spot_json::write_sbe(&mut buffer, LABEL, &frame, recv_ts_ns);
                    }
                    Err(error) => {
                        malformed += 1;
                        if malformed <= 5 {
                            let _ = writeln!(
                                notes,
                                "decode: line {line}: a binary message that does not decode: {error}"
                            );
                        }
                    }
                }
                return out.write_all(&buffer);
            }
            match spot::decode(message) {
                Ok(SpotMessage::BookTicker(ticker)) => {
                    *by_type.entry("bookTicker").or_default() += 1;
                    spot_json::write_quote(&mut buffer, LABEL, &ticker, recv_ts_ns);
                    events += 1;
                }
                Ok(SpotMessage::Trade(trade)) => {
                    let name = match trade.kind {
                        TradeKind::Trade => "trade",
                        TradeKind::AggTrade => "aggTrade",
                    };
                    *by_type.entry(name).or_default() += 1;
                    spot_json::write_trade(&mut buffer, LABEL, &trade, recv_ts_ns);
                    events += 1;
                }
                Ok(SpotMessage::Depth(depth)) => {
                    *by_type.entry("depthUpdate").or_default() += 1;
                    spot_json::write_levels(&mut buffer, LABEL, &depth, recv_ts_ns);
                    events += (depth.bids.len() + depth.asks.len()) as u64;
                }
                Ok(SpotMessage::PartialDepth(partial)) => {
                    *by_type.entry("partialDepth").or_default() += 1;
                    let symbol = partial.stream_symbol().to_ascii_uppercase();
                    spot_json::write_partial_levels(
                        &mut buffer,
                        LABEL,
                        &symbol,
                        &partial,
                        recv_ts_ns,
                    );
                    events += (partial.bids.len() + partial.asks.len()) as u64;
                }
                Ok(SpotMessage::Unknown { event_type, .. }) => {
                    *unknown_types
                        .entry(String::from_utf8_lossy(event_type).into_owned())
                        .or_default() += 1;
                    skipped += 1;
                }
                Ok(SpotMessage::DepthSnapshot(_)) => {
                    // A REST snapshot recorded beside the streams: not a stream event.
                    *by_type.entry("depthSnapshot").or_default() += 1;
                    skipped += 1;
                }
                Ok(
                    SpotMessage::Ack { .. }
                    | SpotMessage::Subscriptions { .. }
                    | SpotMessage::Reply { .. }
                    | SpotMessage::ErrorReply { .. },
                ) => {
                    *by_type.entry("reply").or_default() += 1;
                    skipped += 1;
                }
                Err(error) => {
                    malformed += 1;
                    if malformed <= 5 {
                        let _ = writeln!(
                            notes,
                            "decode: line {line}: {error}: {}",
                            spot::sample(message)
                        );
                    }
                }
            }
            out.write_all(&buffer)
        })?;
        out.flush()?;
        Ok(json_summary(
            lines,
            &by_type,
            &unknown_types,
            (events, skipped, malformed),
        ))
    }
}
