//! OKX v5's public WebSocket as the control side sees it: the public entry point
//! (`/ws/v5/public`) and the business one for `trades-all` (`/ws/v5/business`), streams named
//! `{channel}:{instId}`, `subscribe` requests whose `args` are objects (`channel` and `instId`,
//! or `instType` for `liquidation-orders`, or the underlying index for `index-tickers`), the text
//! `ping` as the heartbeat, the optional login of the tick-by-tick books, and books from the
//! stream's own snapshots (no REST).

use super::decode::Channel;
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

/// The public entry point: `wss://ws.okx.com:8443/ws/v5/public`.
pub const PUBLIC_PATH: &str = "/ws/v5/public";
/// The business entry point, where `trades-all` lives.
pub const BUSINESS_PATH: &str = "/ws/v5/business";

/// Args a `subscribe` request carries at most. The page limits a request's args to 64 KB in
/// all; an arg is under 80 bytes, and 100 of them stay far below it.
pub const MAX_ARGS_PER_REQUEST: usize = 100;

/// The heartbeat: "send the String 'ping'" when nothing came for N < 30 s; tickwire sends it
/// every 20 s (`default_heartbeat_ms`), and the answer is the text `pong`.
pub const PING: &str = "ping";

/// The `id` of the requests that resubscribe a stream for a fresh snapshot: not a number, so
/// their answers are told apart from the subscription requests' (whose `id` is their id).
pub const RESUBSCRIBE_ID: &str = "resubscribe";

/// The low half of a reply's id that marks the answer to a login (`event` `login`, or an
/// `error` with a login code): OKX's login answer carries no `id`.
pub const LOGIN_ANSWER: u64 = 0xffff_fffe;

/// OKX (`okx`).
pub struct Okx;

/// The instrument type of an instrument id, as `liquidation-orders` takes it: `SWAP`
/// (`BTC-USDT-SWAP`), `OPTION` (`BTC-USD-251226-100000-C`), `FUTURES` (`BTC-USD-251226`),
/// `MARGIN` for a spot pair (`BTC-USDT`: its liquidations are margin positions').
pub fn inst_type(inst_id: &str) -> &'static str {
    let parts: Vec<&str> = inst_id.split('-').collect();
    match parts.as_slice() {
        [.., "SWAP"] => "SWAP",
        [_, _, _, _, "C" | "P"] => "OPTION",
        [_, _, date] if date.bytes().all(|byte| byte.is_ascii_digit()) => "FUTURES",
        _ => "MARGIN",
    }
}

/// The index an instrument's `index-tickers` subscribes: its first two parts.
pub fn underlying(inst_id: &str) -> &str {
    match inst_id.match_indices('-').nth(1) {
        Some((at, _)) => &inst_id[..at],
        None => inst_id,
    }
}

/// Whether `channel` is one of OKX's channels read; the error is the config's message.
pub fn check_channel(channel: &str, earlier: &[String]) -> Result<(), String> {
    let Some(read) = Channel::of(channel.as_bytes()) else {
        return Err(format!(
            "\"{channel}\" is not an okx channel; valid channels: {}",
            Channel::ALL.map(Channel::name).join(", ")
        ));
    };
    if let Channel::Book(_) = read {
        if let Some(other) = earlier
            .iter()
            .find(|other| matches!(Channel::of(other.as_bytes()), Some(Channel::Book(_))))
        {
            return Err(format!(
                "\"{channel}\" is a second order book channel after \"{other}\"; an instrument \
                 has one book, so list one of books, books5, bbo-tbt, books-l2-tbt, \
                 books50-l2-tbt"
            ));
        }
    }
    Ok(())
}

/// OKX instrument ids: upper-case letters and digits in `-`-separated parts.
pub fn check_symbol(symbol: &str) -> Result<(), String> {
    let valid = !symbol.is_empty()
        && symbol.len() <= 40
        && symbol.split('-').count() >= 2
        && symbol.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit())
        });
    if valid {
        return Ok(());
    }
    Err(format!(
        "\"{symbol}\" is not an OKX instrument id; write it as the venue does: BTC-USDT (SPOT), \
         BTC-USDT-SWAP, BTC-USD-251226 (FUTURES), BTC-USD-251226-100000-C (OPTION)"
    ))
}

/// Every stream, symbol-major: `{channel}:{instId}`.
pub fn stream_names(symbols: &[String], channels: &[String]) -> Vec<String> {
    symbols
        .iter()
        .flat_map(|symbol| {
            channels
                .iter()
                .map(move |channel| format!("{channel}:{symbol}"))
        })
        .collect()
}

/// The `args` object a stream name subscribes; `None` for a name that is not a stream's.
pub fn arg_of(name: &str) -> Option<String> {
    let (channel, symbol) = name.split_once(':')?;
    let read = Channel::of(channel.as_bytes())?;
    Some(match read {
        Channel::LiquidationOrders => format!(
            r#"{{"channel":"{channel}","instType":"{}"}}"#,
            inst_type(symbol)
        ),
        Channel::IndexTickers => format!(
            r#"{{"channel":"{channel}","instId":"{}"}}"#,
            underlying(symbol)
        ),
        _ => format!(r#"{{"channel":"{channel}","instId":"{symbol}"}}"#),
    })
}

/// `{"id":"<id>","op":"<op>","args":[..]}` for the streams `names`, each distinct arg once (two
/// instruments of one type share `liquidation-orders`, of one underlying `index-tickers`).
pub fn request(op: &str, id: &str, names: &[String]) -> String {
    let mut args: Vec<String> = Vec::with_capacity(names.len());
    for arg in names.iter().filter_map(|name| arg_of(name)) {
        if !args.contains(&arg) {
            args.push(arg);
        }
    }
    format!(r#"{{"id":"{id}","op":"{op}","args":[{}]}}"#, args.join(","))
}

/// The login request, signed now: "HMAC SHA256 ... of `timestamp` + 'GET' +
/// '/users/self/verify' with the SecretKey, then Base64". `secret` is the key the file points
/// at: the secret key, a line break, the passphrase.
pub fn login_request(api_key: &str, secret: &str, timestamp: u64) -> Result<String, String> {
    use base64::Engine as _;
    let (secret_key, passphrase) = secret
        .split_once('\n')
        .map(|(key, passphrase)| {
            (
                key.trim_end_matches('\r'),
                passphrase.trim_end_matches(['\r', '\n']),
            )
        })
        .ok_or_else(|| {
            "the key holds the secret key and the passphrase on two lines; no line break found"
                .to_owned()
        })?;
    if secret_key.is_empty() || passphrase.is_empty() {
        return Err("the secret key or the passphrase is empty".to_owned());
    }
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret_key.as_bytes());
    let prehash = format!("{timestamp}GET/users/self/verify");
    let sign = base64::engine::general_purpose::STANDARD
        .encode(ring::hmac::sign(&key, prehash.as_bytes()).as_ref());
    let quote = |text: &str| serde_json::to_string(text).unwrap_or_default();
    Ok(format!(
        r#"{{"op":"login","args":[{{"apiKey":{},"passphrase":{},"timestamp":"{timestamp}","sign":"{sign}"}}]}}"#,
        quote(api_key),
        quote(passphrase)
    ))
}

/// The channels of each entry point: the public one's, then the business one's.
fn groups(channels: &[String]) -> [(Vec<usize>, Option<&'static str>); 2] {
    let business = |channel: &String| Channel::of(channel.as_bytes()) == Some(Channel::TradesAll);
    [
        (
            (0..channels.len())
                .filter(|&at| !business(&channels[at]))
                .collect(),
            None,
        ),
        (
            (0..channels.len())
                .filter(|&at| business(&channels[at]))
                .collect(),
            Some(BUSINESS_PATH),
        ),
    ]
}

impl Protocol for Okx {
    fn dbn_dataset(&self, _venue: &VenueConfig) -> String {
        "OKX".to_owned()
    }

    /// Subscriptions on the appliance's own connections (no URL names a channel).
    fn record_mode(&self) -> RecordMode {
        RecordMode::Subscribe
    }

    fn feed_schemes(&self) -> &'static [Scheme] {
        &[Scheme::Wss, Scheme::Ws]
    }

    fn check_url(&self, url: &crate::config::Endpoint) -> Result<(), String> {
        if url.path == PUBLIC_PATH {
            return Ok(());
        }
        Err(format!(
            "{} is not OKX's public entry point; use {PUBLIC_PATH} \
             (wss://ws.okx.com:8443{PUBLIC_PATH}; trades-all goes to {BUSINESS_PATH} on its own)",
            url.path
        ))
    }

    /// Books start from the stream's own snapshots; a key signs the optional login that the
    /// tick-by-tick books need.
    fn file_rules(&self) -> FileRules {
        FileRules {
            rest_url: RestUrl::Unused {
                why: "its books start from the stream's own snapshots",
            },
            key: KeyUse::SignedLogin {
                missing_key_id: "the login needs credentials.key_id: the API key (the key file \
                                 holds the secret key and the passphrase)",
                key_id_without_key: "credentials.key_id (the API key) needs the secret key and \
                                     passphrase in api_key_env or api_key_credential",
            },
            table: None,
        }
    }

    /// The text `ping` every 20 s; a connection that reads nothing, not even the `pong`, for
    /// 30 s is recycled ("the connection will break automatically if ... data has not been
    /// pushed for more than 30 seconds").
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
        check_channel(channel, earlier)
    }

    fn stream_names(&self, symbols: &[String], channels: &[String]) -> Vec<String> {
        stream_names(symbols, channels)
    }

    /// The public channels' shards, then the business channel's (`trades-all`), each of at
    /// most `max_streams` streams.
    fn shards(
        &self,
        symbols: &[String],
        channels: &[String],
        max_streams: usize,
    ) -> Option<Vec<Shard>> {
        let mut out = Vec::new();
        for (group, path) in groups(channels) {
            if group.is_empty() {
                continue;
            }
            let names: Vec<String> = group.iter().map(|&at| channels[at].clone()).collect();
            let planned = crate::venue::plan_shards(
                symbols,
                group.len(),
                max_streams,
                MAX_ARGS_PER_REQUEST,
                |symbol| stream_names(&[symbol.to_owned()], &names),
            )?;
            out.extend(planned.into_iter().map(|mut shard| {
                shard.channels.clone_from(&group);
                shard.path = path.map(str::to_owned);
                shard
            }));
        }
        Some(out)
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
                kind: VenueKind::Okx.as_str(),
            });
        }
        Ok(Transport::WebSocket {
            path: venue.url.path.clone(),
        })
    }

    /// The API key (`credentials.key_id`) and its secret key and passphrase, read now and
    /// checked to sign, when the file points at them.
    fn login(&self, venue: &VenueConfig) -> Result<Option<Login>, VenueError> {
        let error = |reason: String| VenueError::Login {
            venue: venue.name.clone(),
            reason,
        };
        let Some(secret) = venue.api_key().map_err(|e| error(e.to_string()))? else {
            return Ok(None);
        };
        let key_id = venue
            .credentials
            .key_id
            .clone()
            .ok_or_else(|| error("credentials.key_id (the API key) is not set".to_owned()))?;
        login_request(&key_id, &secret, 0).map_err(error)?;
        Ok(Some(Login {
            key_id,
            private_key_pem: secret,
        }))
    }

    fn login_request(&self, _id: u64, login: &Login) -> Result<String, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        login_request(&login.key_id, &login.private_key_pem, now)
    }

    fn subscribe_request(&self, request: &SubscribeContext<'_>) -> Option<String> {
        Some(self::request(
            "subscribe",
            &request.id.to_string(),
            request.names,
        ))
    }

    fn answer_lists_accepted(&self) -> bool {
        false
    }

    /// A login's answer names no request: it answers the connection's first, the login.
    fn read_response(&self, reply: &VenueReply) -> Response {
        if reply.id & 0xffff_ffff == LOGIN_ANSWER {
            Response::SessionStarted
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
        let (feed, counters) = super::feed::OkxFeed::new(super::feed::FeedConfig {
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

    /// Through its own feed (`venue::capture::FeedCapture`): the streams are the channels and
    /// instruments of the file's pushes.
    fn capture_decoder(&self) -> Option<&'static dyn CaptureDecoder> {
        static DECODER: FeedCapture = FeedCapture {
            label: VenueKind::Okx.as_str(),
            stream: super::feed::stream_of,
            feed: |names| {
                let (feed, counters) =
                    super::feed::OkxFeed::for_streams(0, VenueKind::Okx.as_str(), names);
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

    /// `unsubscribe` then `subscribe` of the one stream: its next message is a new snapshot.
    fn resubscribe_requests(&self, name: &str) -> Vec<String> {
        let names = [name.to_owned()];
        vec![
            request("unsubscribe", RESUBSCRIBE_ID, &names),
            request("subscribe", RESUBSCRIBE_ID, &names),
        ]
    }
}

/// Whether `channel` needs the login (the tick-by-tick books).
pub fn needs_login(channel: &str) -> bool {
    matches!(Channel::of(channel.as_bytes()), Some(Channel::Book(book)) if book.needs_login())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_symbols_and_types() {
        for channel in Channel::ALL {
            assert!(check_channel(channel.name(), &[]).is_ok(), "{channel:?}");
        }
        let second = check_channel("books5", &["books".to_owned()]).unwrap_err();
        assert!(second.contains("second order book"), "{second}");
        assert!(check_channel("books400", &[]).is_err());
        for symbol in [
            "BTC-USDT",
            "BTC-USDT-SWAP",
            "BTC-USD-251226",
            "BTC-USD-251226-100000-C",
        ] {
            assert!(check_symbol(symbol).is_ok(), "{symbol}");
        }
        for symbol in ["btc-usdt", "BTCUSDT", "BTC--USDT", "", "BTC-USDT\""] {
            assert!(check_symbol(symbol).is_err(), "{symbol}");
        }
        assert_eq!(inst_type("BTC-USDT-SWAP"), "SWAP");
        assert_eq!(inst_type("BTC-USD-251226"), "FUTURES");
        assert_eq!(inst_type("BTC-USD-251226-100000-C"), "OPTION");
        assert_eq!(inst_type("BTC-USDT"), "MARGIN");
        assert_eq!(underlying("BTC-USDT-SWAP"), "BTC-USDT");
        assert_eq!(underlying("BTC-USDT"), "BTC-USDT");
        assert!(needs_login("books-l2-tbt") && !needs_login("books"));
    }

    /// The page's request example, and the args of the channels that take no `instId`.
    #[test]
    fn requests() {
        assert_eq!(
            request("subscribe", "1512", &["books:BTC-USDT".to_owned()]),
            r#"{"id":"1512","op":"subscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#
        );
        let names = [
            "liquidation-orders:BTC-USDT-SWAP".to_owned(),
            "liquidation-orders:ETH-USDT-SWAP".to_owned(),
            "index-tickers:BTC-USDT-SWAP".to_owned(),
            "index-tickers:BTC-USDT".to_owned(),
        ];
        assert_eq!(
            request("subscribe", "2", &names),
            r#"{"id":"2","op":"subscribe","args":[{"channel":"liquidation-orders","instType":"SWAP"},{"channel":"index-tickers","instId":"BTC-USDT"}]}"#
        );
        assert_eq!(
            Okx.resubscribe_requests("books:BTC-USDT")[0],
            r#"{"id":"resubscribe","op":"unsubscribe","args":[{"channel":"books","instId":"BTC-USDT"}]}"#
        );
    }

    /// The business channel gets its own connections, at its own path.
    #[test]
    fn trades_all_goes_to_the_business_entry_point() {
        let symbols = ["BTC-USDT".to_owned(), "ETH-USDT".to_owned()];
        let channels = [
            "books".to_owned(),
            "trades-all".to_owned(),
            "tickers".to_owned(),
        ];
        let shards = Okx.shards(&symbols, &channels, 1024).expect("fits");
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].channels, [0, 2]);
        assert_eq!(shards[0].path, None);
        assert_eq!(
            shards[0].requests[0],
            [
                "books:BTC-USDT",
                "tickers:BTC-USDT",
                "books:ETH-USDT",
                "tickers:ETH-USDT"
            ]
        );
        assert_eq!(shards[1].channels, [1]);
        assert_eq!(shards[1].path.as_deref(), Some(BUSINESS_PATH));
    }

    /// The login of the page: `sign` is base64(HMAC-SHA256(secret, timestamp + "GET" +
    /// "/users/self/verify")). The signature here was computed independently (Python's `hmac`
    /// and `base64` modules) for the page's example secret key.
    #[test]
    fn the_login_signature() {
        let text = login_request(
            "key-1",
            "22582BD0CFF14C41EDBF1AB98506286D\npass phrase\n",
            1_538_054_050,
        )
        .expect("signs");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let arg = &value["args"][0];
        assert_eq!(value["op"], "login");
        assert_eq!(arg["apiKey"], "key-1");
        assert_eq!(arg["passphrase"], "pass phrase");
        assert_eq!(arg["timestamp"], "1538054050");
        assert_eq!(arg["sign"], SIGNATURE);
        assert!(login_request("k", "no line break", 1).is_err());
    }

    const SIGNATURE: &str = "+LdIr8lkkvhr5hoA3g9TMC0+uQJ849ftAcocA/ouu4M=";
}
