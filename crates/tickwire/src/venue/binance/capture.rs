//! `tickwire decode --venue binance-futures`: each raw USD-M message through the decoder
//! (`decode.rs`) into its `quote`, `trade`, `level` and `mark`/`index` lines (`json.rs`), with
//! the JSON venues' summary (messages by event type).

use super::decode::{self, Message, TradeKind};
use super::json;
use crate::event::json as event_json;
use crate::venue::capture::{json_summary, Capture, CaptureDecoder};
use std::collections::BTreeMap;

/// The venue label of USD-M captures.
pub const LABEL: &str = "binance-futures";

/// USD-M's capture decoder (`Protocol::capture_decoder` of `binance-usdm-futures`).
pub struct UsdmCapture;

impl CaptureDecoder for UsdmCapture {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        let out = &mut *capture.out;
        let notes = &mut *capture.notes;
        let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut unknown_types: BTreeMap<String, u64> = BTreeMap::new();
        let mut skipped = 0u64;
        let mut malformed = 0u64;
        let mut events = 0u64;
        let mut buffer = Vec::with_capacity(1 << 16);
        let lines = (capture.lines)(&mut |line, recv_ts_ns, message| {
            buffer.clear();
            match decode::decode(message) {
                Ok(Message::BookTicker(ticker)) => {
                    *by_type.entry("bookTicker").or_default() += 1;
                    json::write_quote(&mut buffer, LABEL, &ticker, recv_ts_ns);
                    events += 1;
                }
                Ok(Message::Trade(trade)) => {
                    let name = match trade.kind {
                        TradeKind::Trade => "trade",
                        TradeKind::AggTrade => "aggTrade",
                    };
                    *by_type.entry(name).or_default() += 1;
                    json::write_trade(&mut buffer, LABEL, &trade, recv_ts_ns);
                    events += 1;
                }
                Ok(Message::Depth(depth)) => {
                    *by_type.entry("depthUpdate").or_default() += 1;
                    json::write_levels(&mut buffer, LABEL, &depth, recv_ts_ns);
                    events += (depth.bids.len() + depth.asks.len()) as u64;
                }
                Ok(Message::MarkPrice(mark)) => {
                    *by_type.entry("markPriceUpdate").or_default() += 1;
                    let header = crate::event::EventHeader {
                        exchange_ts_ns: mark.event_time_ms.saturating_mul(1_000_000),
                        recv_ts_ns,
                        venue_seq: mark.event_time_ms,
                        instrument_id: 0,
                        venue_id: 0,
                        kind: crate::event::EventKind::Reference,
                        flags: 0,
                    };
                    for (kind, price) in [
                        (crate::event::ReferenceKind::Mark, mark.mark_price),
                        (crate::event::ReferenceKind::Index, mark.index_price),
                    ] {
                        let event = crate::event::Event::new(
                            header,
                            crate::event::Body::Reference(crate::event::Reference::new(
                                kind, price,
                            )),
                        );
                        event_json::write_event(&mut buffer, LABEL, mark.symbol, &event);
                        events += 1;
                    }
                }
                Ok(Message::Unknown { event_type, .. }) => {
                    *unknown_types
                        .entry(String::from_utf8_lossy(event_type).into_owned())
                        .or_default() += 1;
                    skipped += 1;
                }
                Ok(Message::DepthSnapshot(_)) => {
                    // A REST snapshot recorded beside the streams (the hftbacktest captures
                    // hold one): not a stream event.
                    *by_type.entry("depthSnapshot").or_default() += 1;
                    skipped += 1;
                }
                Ok(_) => {
                    *by_type.entry("reply").or_default() += 1;
                    skipped += 1;
                }
                Err(error) => {
                    malformed += 1;
                    if malformed <= 5 {
                        let _ = writeln!(
                            notes,
                            "decode: line {line}: {error}: {}",
                            decode::sample(message)
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
