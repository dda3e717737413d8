//! Databento's Live Subscription Gateway as the control side sees it: streams `<schema>:<symbol>`,
//! a raw TCP session opened by the CRAM exchange (the preamble), one session request per
//! connection (subscriptions and `start_session`, replaying from what the feed last saw), the
//! session's start as the answer to it, and the gateway's own messages as notices.

use super::config::{DatabentoConfig, Recovery, DATABENTO_SCHEMAS};
use super::subscribe;
use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::{StreamActivity, VenueReply};
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Notice, NoticeKind, Protocol, RecordMode, Response, RestUrl,
    SubscribeContext, Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};
use std::ops::Range;

/// The Databento live protocol.
pub struct Databento;

/// Per schema, where a resubscription replays from: with `recovery = "replay"`, the earliest of
/// the latest record times of the shard's symbols that had any (`None`: live only). The feed
/// skips what the replay repeats.
fn replay_starts(
    config: &DatabentoConfig,
    activity: &StreamActivity,
    symbols: Range<usize>,
    channels: usize,
) -> Vec<Option<u64>> {
    (0..channels)
        .map(|channel| {
            if config.recovery != Recovery::Replay {
                return None;
            }
            symbols
                .clone()
                .map(|symbol| activity.replay_from(symbol * channels + channel))
                .filter(|&ns| ns > 0)
                .min()
        })
        .collect()
}

impl Protocol for Databento {
    /// `[databento]` (`config.rs`): the gateway session's settings; the file's lifecycle
    /// follows them (no rotation, no pings, the read timeout from the heartbeat interval).
    fn check_table(
        &self,
        table: Option<&toml::Value>,
        check: &mut crate::venue::protocol::TableCheck<'_>,
    ) {
        super::config::check_table(table, check);
    }

    /// `--venue databento` (`capture.rs`): DBN files, not lines.
    fn capture_decoder(&self) -> Option<&'static dyn crate::venue::capture::CaptureDecoder> {
        Some(&super::capture::DbnCapture)
    }

    /// The gateway's own dataset (`databento.dataset`).
    fn dbn_dataset(&self, venue: &VenueConfig) -> String {
        DatabentoConfig::of(venue).map_or_else(|| "DATABENTO".to_owned(), |db| db.dataset.clone())
    }

    /// A gateway session per shard, as the appliance opens it.
    fn record_mode(&self) -> RecordMode {
        RecordMode::Subscribe
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Tls, Scheme::Tcp]
    }

    /// The gateway needs a key and its session settings; `rest_url` is accepted as before.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::Accepted,
            key: KeyUse::Required {
                missing: "has no API key: the Databento gateway needs one; set \
                          credentials.api_key_env (an environment variable) or \
                          credentials.api_key_credential (a systemd credential)",
            },
            table: Some(super::config::TABLE),
        }
    }

    /// The gateway's heartbeats set the read timeout (from the `[databento]` table, applied by
    /// the config); no pings.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        if symbol.is_empty()
            || !symbol
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b',' | b'|'))
        {
            return Err(format!(
                "\"{symbol}\" is not a valid symbol; Databento symbols are printable ASCII \
                 without `,` or `|`, such as ESZ6, ES.FUT or ES.c.0"
            ));
        }
        Ok(())
    }

    fn check_channel(&self, channel: &str, _earlier: &[String]) -> Result<(), String> {
        if DATABENTO_SCHEMAS.contains(&channel) {
            return Ok(());
        }
        Err(format!(
            "\"{channel}\" is not a DBN schema; valid: {}",
            DATABENTO_SCHEMAS.join(", ")
        ))
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        subscribe::stream_names(symbols, channels)
    }

    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        subscribe::shards(symbols, channels, max_streams)
    }

    fn names_a_stream(&self, _name: &str) -> bool {
        true
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        if streams_in_url {
            return Err(VenueError::Unsupported {
                venue: venue.name.clone(),
                kind: VenueKind::Databento.as_str(),
            });
        }
        Ok(Transport::Raw {
            preamble: subscribe::preamble_for(venue)?,
        })
    }

    /// The gateway authenticates in the preamble, not with a login request.
    fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        Ok(None)
    }

    fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
        Err("the databento gateway authenticates in its opening exchange".to_owned())
    }

    /// `None` without a `[databento]` table, which the config refuses for a databento venue.
    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        let venue = request.venue;
        let config = &DatabentoConfig::of(venue)?;
        let channels = venue.channels.len().max(1);
        let starts = replay_starts(config, request.activity, request.symbols.clone(), channels);
        let first = request
            .streams
            .iter()
            .all(|&stream| request.activity.replay_from(stream) == 0);
        let symbols = venue.symbols.get(request.symbols.clone())?;
        Some(subscribe::session_request(
            config,
            &venue.channels,
            symbols,
            &starts,
            first,
            request.id,
        ))
    }

    fn answer_lists_accepted(&self) -> bool {
        false
    }

    fn read_response(&self, reply: &VenueReply) -> Response {
        if reply.id & 0xffff_ffff == super::feed::SESSION_STARTED {
            Response::SessionStarted
        } else {
            Response::Answer
        }
    }

    /// The gateway's `ErrorMsg` and `SystemMsg` codes, by the `dbn` crate's names.
    fn read_notice(&self, reply: &VenueReply) -> Notice {
        let stream_broken = reply.error == Some(super::feed::STREAM_BROKEN);
        if let Some(code) = reply.error {
            let what = u8::try_from(code)
                .ok()
                .and_then(|code| dbn::ErrorCode::try_from(code).ok())
                .map_or_else(|| format!("code {code}"), |code| format!("{code:?}"));
            return Notice {
                kind: NoticeKind::Error { what },
                stream_broken,
            };
        }
        let code = (reply.id & 0xff) as u8;
        let kind = match dbn::SystemCode::try_from(code) {
            Ok(dbn::SystemCode::SlowReaderWarning) => NoticeKind::SlowReader,
            Ok(other) => NoticeKind::Other {
                what: format!("{other:?}"),
            },
            Err(_) => NoticeKind::Other {
                what: format!("code {code}"),
            },
        };
        Notice {
            kind,
            stream_broken,
        }
    }

    fn feed(
        &self,
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        let (feed, counters) = super::feed::DatabentoFeed::new(super::feed::FeedConfig {
            venue_id,
            venue_name: venue.name.clone(),
            symbols: venue.symbols.clone(),
            channels: venue.channels.clone(),
            instrument_base,
            recovery: DatabentoConfig::of(venue)
                .map(|config| config.recovery)
                .unwrap_or_default(),
            max_orders_per_book: DatabentoConfig::of(venue)
                .map_or(super::config::MAX_ORDERS_PER_BOOK_DEFAULT, |config| {
                    config.max_orders_per_book()
                }) as usize,
            max_instrument_mappings: DatabentoConfig::of(venue)
                .map_or(super::config::MAX_INSTRUMENT_MAPPINGS_DEFAULT, |config| {
                    config.max_instrument_mappings()
                }) as usize,
        });
        Ok(VenueFeed {
            feed: Box::new(feed),
            counters,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::venue::databento::feed::{SESSION_STARTED, STREAM_BROKEN};

    #[test]
    fn the_session_start_answers_the_request() {
        let started = VenueReply::new(0, (3 << 32) | SESSION_STARTED, None, b"");
        assert_eq!(Databento.read_response(&started), Response::SessionStarted);
        let other = VenueReply::new(0, (3 << 32) | 1, None, b"");
        assert_eq!(Databento.read_response(&other), Response::Answer);
    }

    #[test]
    fn gateway_notices_are_read_by_their_codes() {
        let slow = dbn::SystemCode::SlowReaderWarning as u8;
        let notice = Databento.read_notice(&VenueReply::notice(0, 1, slow, None, b"slow"));
        assert_eq!(notice.kind, NoticeKind::SlowReader);
        assert!(!notice.stream_broken);
        let replayed = dbn::SystemCode::ReplayCompleted as u8;
        let notice = Databento.read_notice(&VenueReply::notice(0, 1, replayed, None, b""));
        assert_eq!(
            notice.kind,
            NoticeKind::Other {
                what: "ReplayCompleted".to_owned()
            }
        );
        let broken = VenueReply::notice(0, 1, 0, Some(STREAM_BROKEN), b"bad record");
        let notice = Databento.read_notice(&broken);
        assert!(notice.stream_broken);
        assert!(matches!(notice.kind, NoticeKind::Error { .. }));
    }

    #[test]
    fn symbols_and_schemas_follow_the_gateway() {
        assert!(Databento.check_symbol("ES.c.0").is_ok());
        assert!(Databento.check_symbol("ES,NQ").is_err());
        assert!(Databento.check_symbol("").is_err());
        assert!(Databento.check_channel("mbo", &[]).is_ok());
        assert!(Databento.check_channel("bookTicker", &[]).is_err());
    }
}
