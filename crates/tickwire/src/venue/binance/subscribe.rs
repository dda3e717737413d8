//! Subscriptions as desired state: the streams a venue file asks for, split into connections
//! and requests within Binance USD-M's limits, and the `SUBSCRIBE` request text.
//!
//! Limits (Binance USD-M "Websocket Market Streams"): at most 1024 streams per connection
//! (`max_streams_per_connection`, which may set fewer) and 10 incoming messages per second per
//! connection, pings and pongs included. The venue documents no limit on the streams one
//! request may name; [`MAX_STREAMS_PER_REQUEST`] keeps each request a modest frame anyway, so a
//! full connection takes six requests, sent at most [`crate::lifecycle::REQUESTS_PER_SEC`] a
//! second.

/// Streams named in one `SUBSCRIBE` request at most.
pub const MAX_STREAMS_PER_REQUEST: usize = 200;

pub use crate::venue::Shard;

/// Splits `symbols` × `channels` into connections of at most `max_streams` streams, named
/// `<symbol lowercase>@<channel>`. `None` when one symbol's channels alone exceed `max_streams`.
pub fn shards(symbols: &[String], channels: &[String], max_streams: usize) -> Option<Vec<Shard>> {
    crate::venue::plan_shards(
        symbols,
        channels.len(),
        max_streams,
        MAX_STREAMS_PER_REQUEST,
        |symbol| {
            let symbol = symbol.to_ascii_lowercase();
            channels
                .iter()
                .map(|channel| format!("{symbol}@{channel}"))
                .collect()
        },
    )
}

/// [`shards`] per entry point ([`super::protocol::entry_point`]): `/public`'s channels first,
/// then `/market`'s, each shard on its entry point's combined-stream path (`/public/stream`).
/// `None` when one symbol's channels on one entry point alone exceed `max_streams`.
pub fn routed_shards(
    symbols: &[String],
    channels: &[String],
    max_streams: usize,
) -> Option<Vec<Shard>> {
    let mut out = Vec::new();
    for entry in super::protocol::EntryPoint::ALL {
        let indexes: Vec<usize> = (0..channels.len())
            .filter(|&index| super::protocol::entry_point(&channels[index]) == entry)
            .collect();
        if indexes.is_empty() {
            continue;
        }
        let routed: Vec<String> = indexes
            .iter()
            .map(|&index| channels[index].clone())
            .collect();
        for mut shard in shards(symbols, &routed, max_streams)? {
            shard.channels.clone_from(&indexes);
            shard.path = Some(format!("{}/stream", entry.path()));
            out.push(shard);
        }
    }
    Some(out)
}

/// `{"method":"SUBSCRIBE","params":[..],"id":N}`.
pub fn subscribe_request(id: u64, streams: &[String]) -> String {
    crate::venue::names_request(
        r#"{"method":"SUBSCRIBE","params":"#,
        streams,
        r#","id":"#,
        id,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, count: usize) -> Vec<String> {
        (0..count).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn splits_by_symbol_within_the_stream_limit() {
        let symbols = names("SYM", 700);
        let channels = vec!["bookTicker".to_owned(), "aggTrade".to_owned()];
        let shards = shards(&symbols, &channels, 1024).expect("fits");
        // 512 symbols (1024 streams) on the first connection, 188 on the second.
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].symbols, 0..512);
        assert_eq!(shards[1].symbols, 512..700);
        let sizes: Vec<usize> = shards[0].requests.iter().map(Vec::len).collect();
        assert_eq!(sizes, [200, 200, 200, 200, 200, 24]);
        assert_eq!(shards[0].requests[0][0], "sym0@bookTicker");
        assert_eq!(shards[0].requests[0][1], "sym0@aggTrade");
        let total: usize = shards.iter().flat_map(|s| &s.requests).map(Vec::len).sum();
        assert_eq!(total, 1400);
    }

    #[test]
    fn a_symbol_whose_channels_do_not_fit_is_refused() {
        let channels = names("c", 3);
        assert_eq!(shards(&names("S", 1), &channels, 2), None);
        assert_eq!(
            shards(&names("S", 1), &channels, 3).map(|s| s.len()),
            Some(1)
        );
    }

    #[test]
    fn channels_are_routed_to_their_entry_points() {
        let channels: Vec<String> = ["aggTrade", "bookTicker", "markPrice@1s", "depth@100ms"]
            .map(str::to_owned)
            .to_vec();
        let shards = routed_shards(&names("S", 3), &channels, 4).expect("fits");
        // /public: bookTicker and depth, two symbols a connection; /market: the same.
        let paths: Vec<&str> = shards.iter().filter_map(|s| s.path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                "/public/stream",
                "/public/stream",
                "/market/stream",
                "/market/stream"
            ]
        );
        assert_eq!(shards[0].channels, [1, 3]);
        assert_eq!(shards[0].symbols, 0..2);
        assert_eq!(shards[1].symbols, 2..3);
        assert_eq!(shards[2].channels, [0, 2]);
        assert_eq!(
            shards[0].requests[0],
            [
                "s0@bookTicker",
                "s0@depth@100ms",
                "s1@bookTicker",
                "s1@depth@100ms"
            ]
        );
        assert_eq!(shards[3].requests[0], ["s2@aggTrade", "s2@markPrice@1s"]);
        // Only /market channels: no /public connection at all.
        let market = routed_shards(&names("S", 1), &channels[..1], 4).expect("fits");
        assert_eq!(market.len(), 1);
        assert_eq!(market[0].path.as_deref(), Some("/market/stream"));
    }

    #[test]
    fn request_text_is_json() {
        let text = subscribe_request(
            (2 << 32) | 7,
            &[
                "btcusdt@bookTicker".to_owned(),
                "btcusdt@depth@100ms".to_owned(),
            ],
        );
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value["method"], "SUBSCRIBE");
        assert_eq!(value["params"][1], "btcusdt@depth@100ms");
        assert_eq!(value["id"].as_u64(), Some((2 << 32) | 7));
    }
}
