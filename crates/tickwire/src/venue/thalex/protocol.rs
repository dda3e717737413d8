//! Thalex as the control side sees it: channel names from the venue file's templates, every
//! connection also on the `system` channel (its `reconnect` notice), `public/subscribe` requests
//! whose answer lists the channels accepted, an optional RS512 JWT `public/login` first, the
//! throttle error, and books from the stream's own snapshots (no REST).

use super::channel::{check_symbol, Template, SYSTEM_CHANNEL};
use super::subscribe;
use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, KeyUse, Protocol, RecordMode, Response, RestUrl, SubscribeContext, Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};

/// The Thalex protocol.
pub struct Thalex;

impl Protocol for Thalex {
    /// `--venue thalex` (`capture.rs`).
    fn capture_decoder(&self) -> Option<&'static dyn crate::venue::capture::CaptureDecoder> {
        Some(&super::capture::ThalexCapture)
    }

    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "THALEX".to_owned()
    }

    /// JSON-RPC subscriptions on the appliance's own connections (no URL names a channel).
    fn record_mode(&self) -> RecordMode {
        RecordMode::Subscribe
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Wss, Scheme::Ws]
    }

    /// Books start from the stream's own snapshots; an optional key signs a login.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::Unused {
                why: "its books start from the stream's own snapshot",
            },
            key: KeyUse::SignedLogin {
                missing_key_id: "is missing: a Thalex login token names its key by id (the `kid` shown beside                  the API key); set it, or remove the key settings to use public data only",
                key_id_without_key: "has no key to go with it: set credentials.api_key_env or                  credentials.api_key_credential to where the RSA private key (PEM) is",
            },
            table: None,
        }
    }

    /// Thalex asks clients to ping.
    fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
        (Some(5_000), Some(7_000))
    }

    /// Thalex instrument names: perpetuals, futures, options, combinations in brackets.
    fn check_symbol(&self, symbol: &str) -> Result<(), String> {
        check_symbol(symbol)
    }

    fn check_channel(&self, channel: &str, earlier: &[String]) -> Result<(), String> {
        Template::parse(channel)?;
        if channel.starts_with("book.") && earlier.iter().any(|c| c.starts_with("book.")) {
            return Err(format!(
                "\"{channel}\" is a second book channel; an instrument has one book, so list \
                 one book.<grouping>.<levels>.<delay>"
            ));
        }
        Ok(())
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        super::feed::ThalexFeed::channel_names(symbols, channels)
    }

    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        subscribe::shards(symbols, channels, max_streams)
    }

    /// The `system` channel every connection subscribes is connection-wide.
    fn names_a_stream(&self, name: &str) -> bool {
        name != SYSTEM_CHANNEL
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        if streams_in_url {
            return Err(VenueError::Unsupported {
                venue: venue.name.clone(),
                kind: VenueKind::Thalex.as_str(),
            });
        }
        Ok(Transport::WebSocket {
            path: venue.url.path.clone(),
        })
    }

    fn login(&self, venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        let error = |reason: String| VenueError::Login {
            venue: venue.name.clone(),
            reason,
        };
        let Some(pem) = venue.api_key().map_err(|e| error(e.to_string()))? else {
            return Ok(None);
        };
        let key_id = venue
            .credentials
            .key_id
            .clone()
            .ok_or_else(|| error("credentials.key_id is not set".to_owned()))?;
        super::auth::login_token(&key_id, &pem, 0).map_err(|e| error(e.to_string()))?;
        Ok(Some(Login {
            key_id,
            private_key_pem: pem,
        }))
    }

    /// The `public/login` request, with a token made now.
    fn login_request(&self, id: u64, login: &Login) -> Result<String, String> {
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let token = super::auth::login_token(&login.key_id, &login.private_key_pem, iat)
            .map_err(|error| error.to_string())?;
        Ok(super::auth::login_request(id, &token))
    }

    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        Some(subscribe::subscribe_request(request.id, request.names))
    }

    fn answer_lists_accepted(&self) -> bool {
        true
    }

    fn read_response(&self, reply: &VenueReply) -> Response {
        if reply.error == Some(subscribe::THROTTLED) {
            Response::Throttled
        } else {
            Response::Answer
        }
    }

    fn feed(
        &self,
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        let (feed, counters) = super::feed::ThalexFeed::new(super::feed::FeedConfig {
            venue_id,
            venue_name: venue.name.clone(),
            symbols: venue.symbols.clone(),
            channels: venue.channels.clone(),
            instrument_base,
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

    #[test]
    fn a_throttle_error_is_read_as_such_and_other_errors_as_answers() {
        let throttled = VenueReply::new(0, 7, Some(subscribe::THROTTLED), b"throttle exceeded");
        assert_eq!(Thalex.read_response(&throttled), Response::Throttled);
        let invalid = VenueReply::new(0, 7, Some(6), b"invalid request");
        assert_eq!(Thalex.read_response(&invalid), Response::Answer);
        assert_eq!(
            Thalex.read_response(&VenueReply::new(0, 7, None, b"")),
            Response::Answer
        );
    }

    #[test]
    fn the_system_channel_is_no_stream_and_one_book_is_allowed() {
        assert!(!Thalex.names_a_stream(SYSTEM_CHANNEL));
        assert!(Thalex.names_a_stream("ticker.BTC-PERPETUAL.100ms"));
        let first = ["book.none.10.100ms".to_owned()];
        assert!(Thalex.check_channel("book.none.10.100ms", &[]).is_ok());
        let second = Thalex
            .check_channel("book.1.10.100ms", &first)
            .expect_err("a second book channel");
        assert!(second.contains("a second book channel"), "{second}");
        assert!(Thalex.check_channel("tickers.100ms", &[]).is_err());
    }
}
