//! Bybit v5's public WebSocket as the control side sees it: one entry point per category
//! (`/v5/public/spot`, `/v5/public/linear`), channels named as topics without their symbol
//! (`orderbook.50`, `publicTrade`, `tickers`), `subscribe` requests of at most
//! [`MAX_ARGS_PER_REQUEST`] topics, the `ping` op as the heartbeat, and books from the stream's
//! own snapshots (no REST).

use crate::config::{Scheme, VenueConfig, VenueKind};
use crate::event::{InstrumentId, VenueId};
use crate::venue::capture::{CaptureDecoder, CaptureFeed, FeedCapture};
use crate::venue::feed::VenueReply;
use crate::venue::login::Login;
use crate::venue::protocol::{
    FileRules, Heartbeat, KeyUse, Protocol, RecordMode, Response, RestUrl, SubscribeContext,
    Transport,
};
use crate::venue::{Shard, VenueError, VenueFeed};

/// A category of Bybit's public WebSocket: where it is and what it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Spot,
    Linear,
}

impl Category {
    /// The entry point: `wss://stream.bybit.com/v5/public/{spot,linear}`.
    pub fn path(self) -> &'static str {
        match self {
            Category::Spot => "/v5/public/spot",
            Category::Linear => "/v5/public/linear",
        }
    }

    pub const fn kind(self) -> VenueKind {
        match self {
            Category::Spot => VenueKind::BybitSpot,
            Category::Linear => VenueKind::BybitLinear,
        }
    }

    /// The DBN dataset its events are recorded under.
    pub fn dataset(self) -> &'static str {
        match self {
            Category::Spot => "BYBIT.SPOT",
            Category::Linear => "BYBIT.LINEAR",
        }
    }
}

/// The orderbook depths spot and linear offer ("Depths": 1, 50, 200, 1000 for both).
pub const BOOK_DEPTHS: [&str; 4] = ["1", "50", "200", "1000"];

/// Topics a `subscribe` request carries at most: the connection guide's limit for spot (10
/// args a request); linear has a limit on the args' total length instead, far above what ten
/// topics make, and tickwire uses ten for both.
pub const MAX_ARGS_PER_REQUEST: usize = 10;

/// The heartbeat: the connection guide's `ping` op, every 20 s (`default_heartbeat_ms`).
pub const PING: &str = r#"{"op":"ping"}"#;

/// The `req_id` of the requests that resubscribe a topic for a fresh snapshot: not a number, so
/// their answers are told apart from the subscription requests' (whose `req_id` is their id).
pub const RESUBSCRIBE_REQ_ID: &str = "resubscribe";

/// Bybit spot (`bybit-spot`).
pub struct BybitSpot;
/// Bybit linear, USDT and USDC contracts (`bybit-linear`).
pub struct BybitLinear;

/// Whether `channel` is one of `category`'s channels; the error is the config's message.
pub fn check_channel(category: Category, channel: &str, earlier: &[String]) -> Result<(), String> {
    let kind = category.kind();
    if let Some(depth) = channel.strip_prefix("orderbook.") {
        if !BOOK_DEPTHS.contains(&depth) {
            return Err(format!(
                "\"{channel}\": {kind} offers orderbook depths {}",
                BOOK_DEPTHS.join(", ")
            ));
        }
        if earlier.iter().any(|c| c.starts_with("orderbook.")) {
            return Err(format!(
                "\"{channel}\" is a second orderbook channel; an instrument has one book, so \
                 list one orderbook.<depth>"
            ));
        }
        return Ok(());
    }
    match (channel, category) {
        ("publicTrade", _) | ("tickers" | "allLiquidation", Category::Linear) => Ok(()),
        ("tickers", Category::Spot) => Err(format!(
            "\"tickers\" on {kind} carries no best bid and offer, mark or index price (Bybit's \
             spot ticker has only 24 h statistics): tickwire would publish nothing from it; \
             use orderbook.1 for the best bid and offer"
        )),
        ("allLiquidation", Category::Spot) => Err(format!(
            "\"allLiquidation\" is not a {kind} channel: Bybit publishes liquidations for \
             contracts only (use bybit-linear)"
        )),
        _ => Err(format!(
            "\"{channel}\" is not a {kind} channel; valid channels: orderbook.<depth> (depth {}), \
             publicTrade{}",
            BOOK_DEPTHS.join(", "),
            if category == Category::Linear {
                ", tickers, allLiquidation"
            } else {
                ""
            }
        )),
    }
}

/// Bybit symbols: upper-case letters and digits, and `-` in a dated future's (`BTC-26DEC25`).
pub fn check_symbol(symbol: &str) -> Result<(), String> {
    let valid = !symbol.is_empty()
        && symbol.len() <= 32
        && symbol
            .bytes()
            .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'-');
    if valid {
        return Ok(());
    }
    Err(format!(
        "\"{symbol}\" is not a Bybit symbol; use upper-case letters and digits as the venue \
         writes it (BTCUSDT, or BTC-26DEC25 for a dated future)"
    ))
}

/// Every topic, symbol-major: `{channel}.{symbol}`.
pub fn stream_names(symbols: &[String], channels: &[String]) -> Vec<String> {
    symbols
        .iter()
        .flat_map(|symbol| {
            channels
                .iter()
                .map(move |channel| format!("{channel}.{symbol}"))
        })
        .collect()
}

/// `{"req_id":"<id>","op":"<op>","args":[..]}`.
pub fn request(op: &str, req_id: &str, args: &[String]) -> String {
    let mut text = format!(r#"{{"req_id":"{req_id}","op":"{op}","args":["#);
    for (index, arg) in args.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push('"');
        text.push_str(arg);
        text.push('"');
    }
    text.push_str("]}");
    text
}

/// Shared by both categories.
struct Common(Category);

impl Common {
    fn check_url(&self, url: &crate::config::Endpoint) -> Result<(), String> {
        let path = self.0.path();
        if url.path == path {
            return Ok(());
        }
        Err(format!(
            "{} is not {}'s entry point; use {path} (wss://stream.bybit.com{path})",
            url.path,
            self.0.kind()
        ))
    }

    fn transport(
        &self,
        venue: &VenueConfig,
        streams_in_url: bool,
    ) -> Result<Transport, VenueError> {
        if streams_in_url {
            return Err(VenueError::Unsupported {
                venue: venue.name.clone(),
                kind: self.0.kind().as_str(),
            });
        }
        Ok(Transport::WebSocket {
            path: venue.url.path.clone(),
        })
    }

    fn feed(
        &self,
        venue_id: VenueId,
        venue: &VenueConfig,
        instrument_base: InstrumentId,
    ) -> Result<VenueFeed, VenueError> {
        let (feed, counters) = super::feed::BybitFeed::new(super::feed::FeedConfig {
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

macro_rules! bybit_protocol {
    ($name:ident, $category:expr) => {
        impl Protocol for $name {
            fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
                $category.dataset().to_owned()
            }

            /// Subscriptions on the appliance's own connections (no URL names a topic).
            fn record_mode(&self) -> RecordMode {
                RecordMode::Subscribe
            }

            fn feed_schemes(&self) -> &'static [Scheme] {
                &[Scheme::Wss, Scheme::Ws]
            }

            fn check_url(&self, url: &crate::config::Endpoint) -> Result<(), String> {
                Common($category).check_url(url)
            }

            /// Books start from the stream's own snapshots; public data needs no key.
            fn file_rules(&self) -> FileRules {
                FileRules {
                    rest_url: RestUrl::Unused {
                        why: "its books start from the stream's own snapshots",
                    },
                    key: KeyUse::Unused,
                    table: None,
                }
            }

            /// The `ping` op every 20 s, as the connection guide asks; a connection that reads
            /// nothing, not even the pong, for 30 s is recycled.
            fn default_heartbeat_ms(&self) -> (Option<u64>, Option<u64>) {
                (Some(20_000), Some(30_000))
            }

            fn heartbeat(&self) -> Heartbeat {
                Heartbeat::Message(PING)
            }

            fn check_symbol(&self, symbol: &str) -> Result<(), String> {
                check_symbol(symbol)
            }

            fn check_channel(&self, channel: &str, earlier: &[String]) -> Result<(), String> {
                check_channel($category, channel, earlier)
            }

            fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
                stream_names(symbols, channels)
            }

            fn shards(
                &self,
                symbols: &[String],
                channels: &[String],
                max_streams: usize,
            ) -> Option<Vec<Shard>> {
                crate::venue::plan_shards(
                    symbols,
                    channels.len(),
                    max_streams,
                    MAX_ARGS_PER_REQUEST,
                    |symbol| stream_names(&[symbol.to_owned()], channels),
                )
            }

            fn names_a_stream(&self, _name: &str) -> bool {
                true
            }

            fn transport(
                &self,
                venue: &VenueConfig,
                streams_in_url: bool,
            ) -> Result<Transport, VenueError> {
                Common($category).transport(venue, streams_in_url)
            }

            fn login(&self, _venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
                Ok(None)
            }

            fn login_request(&self, _id: u64, _login: &Login) -> Result<String, String> {
                Err("Bybit's public streams have no login".to_owned())
            }

            fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
                Some(super::protocol::request(
                    "subscribe",
                    &request.id.to_string(),
                    request.names,
                ))
            }

            fn answer_lists_accepted(&self) -> bool {
                false
            }

            fn read_response(&self, _reply: &VenueReply) -> Response {
                Response::Answer
            }

            fn feed(
                &self,
                venue_id: VenueId,
                venue: &VenueConfig,
                instrument_base: InstrumentId,
            ) -> Result<VenueFeed, VenueError> {
                Common($category).feed(venue_id, venue, instrument_base)
            }

            /// Through its own feed (`venue::capture::FeedCapture`): the streams are the
            /// topics of the file's market data messages.
            fn capture_decoder(&self) -> Option<&'static dyn CaptureDecoder> {
                static DECODER: FeedCapture = FeedCapture {
                    label: $category.kind().as_str(),
                    stream: super::feed::topic_of,
                    feed: |names| {
                        let (feed, counters) =
                            super::feed::BybitFeed::for_topics(0, $category.kind().as_str(), names);
                        let symbols = feed.symbols().to_vec();
                        CaptureFeed {
                            feed: Box::new(feed),
                            counters,
                            symbols,
                        }
                    },
                };
                Some(&DECODER)
            }

            /// `unsubscribe` then `subscribe` of the one topic: its next message is a new
            /// snapshot ("Once you have subscribed successfully, you will receive a snapshot").
            fn resubscribe_requests(&self, name: &str) -> Vec<String> {
                let args = [name.to_owned()];
                vec![
                    request("unsubscribe", RESUBSCRIBE_REQ_ID, &args),
                    request("subscribe", RESUBSCRIBE_REQ_ID, &args),
                ]
            }
        }
    };
}

bybit_protocol!(BybitSpot, Category::Spot);
bybit_protocol!(BybitLinear, Category::Linear);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_follow_each_category() {
        for channel in [
            "orderbook.1",
            "orderbook.50",
            "orderbook.200",
            "orderbook.1000",
            "publicTrade",
        ] {
            assert!(
                check_channel(Category::Spot, channel, &[]).is_ok(),
                "{channel}"
            );
            assert!(
                check_channel(Category::Linear, channel, &[]).is_ok(),
                "{channel}"
            );
        }
        assert!(check_channel(Category::Linear, "tickers", &[]).is_ok());
        let spot_tickers = check_channel(Category::Spot, "tickers", &[]).unwrap_err();
        assert!(spot_tickers.contains("orderbook.1"), "{spot_tickers}");
        for invalid in [
            "orderbook.25",
            "orderbook",
            "orderbook.50.BTCUSDT",
            "trade",
            "",
        ] {
            assert!(
                check_channel(Category::Linear, invalid, &[]).is_err(),
                "{invalid}"
            );
        }
        let second = check_channel(
            Category::Linear,
            "orderbook.1",
            &["orderbook.50".to_owned()],
        )
        .unwrap_err();
        assert!(second.contains("second orderbook"), "{second}");
        assert_eq!(
            check_channel(Category::Linear, "allLiquidation", &[]),
            Ok(())
        );
        let spot = check_channel(Category::Spot, "allLiquidation", &[]).unwrap_err();
        assert!(spot.contains("contracts only"), "{spot}");
    }

    #[test]
    fn requests_carry_their_id_and_at_most_ten_topics() {
        let names: Vec<String> = (0..12).map(|i| format!("publicTrade.S{i}")).collect();
        let symbols: Vec<String> = (0..12).map(|i| format!("S{i}")).collect();
        let channels = ["publicTrade".to_owned()];
        let shards = BybitSpot.shards(&symbols, &channels, 1024).expect("fits");
        assert_eq!(shards.len(), 1);
        let sizes: Vec<usize> = shards[0].requests.iter().map(Vec::len).collect();
        assert_eq!(sizes, [10, 2]);
        assert_eq!(shards[0].requests[0][..], names[..10]);
        assert_eq!(
            request("subscribe", "7", &names[..2]),
            r#"{"req_id":"7","op":"subscribe","args":["publicTrade.S0","publicTrade.S1"]}"#
        );
        let again = BybitLinear.resubscribe_requests("orderbook.50.BTCUSDT");
        assert_eq!(
            again,
            [
                r#"{"req_id":"resubscribe","op":"unsubscribe","args":["orderbook.50.BTCUSDT"]}"#,
                r#"{"req_id":"resubscribe","op":"subscribe","args":["orderbook.50.BTCUSDT"]}"#
            ]
        );
        assert_eq!(
            BybitLinear.heartbeat(),
            Heartbeat::Message(r#"{"op":"ping"}"#)
        );
    }

    #[test]
    fn each_category_takes_its_own_entry_point() {
        let file = |kind: &str, path: &str| {
            format!(
                "name = \"b\"\nkind = \"{kind}\"\nurl = \"wss://stream.bybit.com{path}\"\n\
                 symbols = [\"BTCUSDT\"]\nchannels = [\"publicTrade\"]\n"
            )
        };
        assert!(crate::config::venue_from_text(&file("bybit-spot", "/v5/public/spot")).is_ok());
        assert!(crate::config::venue_from_text(&file("bybit-linear", "/v5/public/linear")).is_ok());
        let Err(errors) = crate::config::venue_from_text(&file("bybit-spot", "/v5/public/linear"))
        else {
            panic!("the linear path refused for spot");
        };
        let text = errors.to_string();
        assert!(text.contains("use /v5/public/spot"), "{text}");
    }
}
