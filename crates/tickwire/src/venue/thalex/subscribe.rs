//! The requests the control thread sends to Thalex, and how a venue file's streams are split
//! into connections and requests.
//!
//! Thalex documents no limit on channels per connection or per request; tickwire keeps each
//! `public/subscribe` to [`MAX_CHANNELS_PER_REQUEST`] names so that a request stays a modest
//! frame, and paces requests at [`crate::lifecycle::REQUESTS_PER_SEC`] a second, well inside
//! the venue's request throttle (error code 4). The first request of every connection also
//! names the `system` channel, which carries the venue's `reconnect` notice.

use super::channel::{Template, SYSTEM_CHANNEL};
pub use crate::venue::Shard;

/// The error code of a request refused for exceeding the venue's request rate.
pub const THROTTLED: i64 = 4;

/// Channel names in one `public/subscribe` at most.
pub const MAX_CHANNELS_PER_REQUEST: usize = 100;

/// Splits `symbols` × `channels` (templates) into connections of at most `max_streams`
/// streams. `None` when one symbol's channels alone exceed `max_streams`.
pub fn shards(symbols: &[String], channels: &[String], max_streams: usize) -> Option<Vec<Shard>> {
    let templates: Vec<Template> = channels
        .iter()
        .filter_map(|template| Template::parse(template).ok())
        .collect();
    let mut shards = crate::venue::plan_shards(
        symbols,
        channels.len(),
        max_streams,
        MAX_CHANNELS_PER_REQUEST,
        |symbol| {
            templates
                .iter()
                .map(|template| template.channel(symbol))
                .collect()
        },
    )?;
    for shard in &mut shards {
        match shard.requests.first_mut() {
            Some(first) => first.push(SYSTEM_CHANNEL.to_owned()),
            None => shard.requests.push(vec![SYSTEM_CHANNEL.to_owned()]),
        }
    }
    Some(shards)
}

/// `{"method":"public/subscribe","params":{"channels":[..]},"id":N}`.
pub fn subscribe_request(id: u64, channels: &[String]) -> String {
    channels_request("public/subscribe", id, channels)
}

/// `{"method":"unsubscribe","params":{"channels":[..]},"id":N}` (api.yaml: one `unsubscribe` for
/// public and private channels alike).
pub fn unsubscribe_request(id: u64, channels: &[String]) -> String {
    channels_request("unsubscribe", id, channels)
}

fn channels_request(method: &str, id: u64, channels: &[String]) -> String {
    let head = format!(r#"{{"method":"{method}","params":{{"channels":"#);
    crate::venue::names_request(&head, channels, r#"},"id":"#, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_also_subscribes_the_system_channel() {
        let symbols: Vec<String> = (0..150).map(|i| format!("BTC-{i}")).collect();
        let channels = vec!["ticker.100ms".to_owned(), "book.1.10.100ms".to_owned()];
        let shards = shards(&symbols, &channels, 200).unwrap();
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].symbols, 0..100);
        assert_eq!(shards[0].requests.len(), 2);
        assert_eq!(shards[0].requests[0][0], "ticker.BTC-0.100ms");
        assert_eq!(shards[0].requests[0][1], "book.BTC-0.1.10.100ms");
        assert_eq!(shards[0].requests[0].last().unwrap(), "system");
        assert_eq!(shards[1].requests[0].last().unwrap(), "system");
        let names: usize = shards.iter().flat_map(|s| &s.requests).map(Vec::len).sum();
        assert_eq!(names, 300 + 2);
    }

    #[test]
    fn requests_are_json_rpc() {
        let channels = vec![
            "ticker.[BTC-30MAY25-93000-C:-1,BTC-30MAY25-95000-C:1].raw".to_owned(),
            "system".to_owned(),
        ];
        for (text, method) in [
            (subscribe_request(9, &channels), "public/subscribe"),
            (unsubscribe_request(9, &channels), "unsubscribe"),
        ] {
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value["method"], method);
            assert_eq!(value["id"], 9);
            assert_eq!(value["params"]["channels"][0], channels[0].as_str());
        }
    }
}
