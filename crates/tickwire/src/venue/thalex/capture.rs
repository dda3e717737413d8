//! `tickwire decode --venue thalex`: the appliance's Thalex feed, its routes made from the
//! channels the file holds (a first pass collects them, and each instrument an underlying's
//! `recent_trades` channel names), every event it writes printed
//! (`venue::capture::print_feed`).

use super::decode::{decode as read, Body as ThalexBody, Message as ThalexMessage, Scratch};
use super::feed::ThalexFeed;
use crate::venue::capture::{print_feed, Capture, CaptureDecoder};

/// The venue label of Thalex captures.
pub const LABEL: &str = "thalex";

/// Thalex's capture decoder (`Protocol::capture_decoder` of `thalex`).
pub struct ThalexCapture;

impl CaptureDecoder for ThalexCapture {
    fn label(&self) -> &'static str {
        LABEL
    }

    fn decode(&self, capture: &mut Capture<'_>) -> anyhow::Result<String> {
        let mut names: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // An underlying's recent_trades channel and each instrument its trades name.
        let mut trade_instruments: Vec<(String, String)> = Vec::new();
        let mut scratch = Scratch::default();
        (capture.lines)(&mut |_, _, message| {
            if let Ok(ThalexMessage::Notification { channel, body, .. }) =
                read(message, &mut scratch)
            {
                let name = String::from_utf8_lossy(channel).into_owned();
                if !seen.contains(channel) {
                    seen.insert(channel.to_vec());
                    names.push(name.clone());
                }
                if body == ThalexBody::Trades {
                    for trade in &scratch.trades {
                        let instrument = message
                            .get(trade.instrument.0..trade.instrument.1)
                            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
                            .unwrap_or_default();
                        let pair = (name.clone(), instrument);
                        if !trade_instruments.contains(&pair) {
                            trade_instruments.push(pair);
                        }
                    }
                }
            }
            Ok(())
        })?;
        let (mut feed, counters) = ThalexFeed::for_channels(0, LABEL, &names, &trade_instruments);
        let symbols: Vec<String> = feed.symbols().to_vec();
        let printed = print_feed(&mut feed, &symbols, LABEL, capture)?;
        // The venue's own message kinds (the feed's table), then what the feed dropped.
        let kinds: Vec<String> = counters
            .messages()
            .map(|(kind, count)| format!("{}={count}", kind.name))
            .collect();
        Ok(format!(
            "decode: {} lines; {} messages ({}, unknown channel={}, duplicate={}); \
             {} events; {} malformed",
            printed.lines,
            printed.messages,
            kinds.join(", "),
            counters.unknown_symbol.get(),
            counters.duplicates.get(),
            printed.events,
            counters.malformed.get(),
        ))
    }
}
