//! What the control thread sends a Databento gateway: one request per connection, every schema's
//! subscription lines for the connection's symbols and then `start_session`, and the
//! authentication preamble the network thread runs before it.

use super::config::{DatabentoConfig, Recovery};
use super::gateway::{self, GatewayAuth, SessionOptions, Subscription};
use crate::config::VenueConfig;
use crate::net::engine::PreambleMaker;
use crate::venue::{plan_shards, Shard, VenueError};
use std::sync::Arc;

/// Every stream's name, symbol-major (stream `symbol * channels + channel`): `mbo:ESZ6`.
pub fn stream_names(symbols: &[String], schemas: &[String]) -> Vec<String> {
    symbols
        .iter()
        .flat_map(|symbol| {
            schemas
                .iter()
                .map(move |schema| format!("{schema}:{symbol}"))
        })
        .collect()
}

/// A venue's connections: at most `max_streams` streams (symbol × schema) each, every one
/// subscribed by a single request (its lines and `start_session`, sent together).
pub fn shards(symbols: &[String], schemas: &[String], max_streams: usize) -> Option<Vec<Shard>> {
    plan_shards(symbols, schemas.len(), max_streams, usize::MAX, |symbol| {
        schemas
            .iter()
            .map(|schema| format!("{schema}:{symbol}"))
            .collect()
    })
}

/// The session settings of a venue's `[databento]` table.
pub fn session_options(config: &DatabentoConfig) -> SessionOptions {
    SessionOptions {
        dataset: config.dataset.clone(),
        ts_out: false,
        heartbeat_interval_s: config.heartbeat_interval_s,
        slow_reader_behavior: config.slow_reader_behavior,
    }
}

/// The authentication every connection of the venue starts with. Reads the API key now (the
/// control thread, at start): a missing or unusable key stops the start with a clear error.
pub fn preamble_for(venue: &VenueConfig) -> Result<PreambleMaker, VenueError> {
    let error = |reason: String| VenueError::Login {
        venue: venue.name.clone(),
        reason,
    };
    let config = &DatabentoConfig::of(venue).ok_or_else(|| {
        error("the venue file has no [databento] table (dataset, ...)".to_owned())
    })?;
    let key = venue
        .api_key()
        .map_err(|e| error(e.to_string()))?
        .ok_or_else(|| {
            error(
                "no API key: set credentials.api_key_env or credentials.api_key_credential"
                    .to_owned(),
            )
        })?;
    gateway::check_key(&key).map_err(|reason| error(format!("the API key {reason}")))?;
    let options = session_options(config);
    Ok(Arc::new(move || {
        Box::new(GatewayAuth::new(key.clone(), options.clone()))
    }))
}

/// The request that subscribes a connection and starts its session: per schema, the lines for
/// `symbols` (500 a line), then `start_session`. `starts` holds, per schema, the time to replay
/// from (`None`: live only); `first` says that nothing was received for these symbols yet.
/// `id`'s low half names the subscriptions.
///
/// An L3 book cannot start from the middle of the order flow (the orders resting before it
/// are unknown), so `mbo` asks for a snapshot whenever its book starts afresh: at the first
/// session, at a replay with nothing to replay from, and at every reconnect under `snapshot`.
/// Under `gap`, a reconnect takes the live flow as it comes (natural refresh).
pub fn session_request(
    config: &DatabentoConfig,
    schemas: &[String],
    symbols: &[String],
    starts: &[Option<u64>],
    first: bool,
    id: u64,
) -> String {
    let mut text = String::with_capacity(128 * schemas.len() + 16 * symbols.len());
    for (index, schema) in schemas.iter().enumerate() {
        let start = starts.get(index).copied().flatten();
        let snapshot = schema == "mbo"
            && match config.recovery {
                Recovery::Snapshot => true,
                Recovery::Replay => start.is_none(),
                Recovery::Gap => first,
            };
        gateway::subscription_lines(
            &Subscription {
                schema,
                stype_in: &config.stype_in,
                symbols,
                snapshot,
                start_ns: if snapshot { None } else { start },
                id: Some(id as u32),
            },
            &mut text,
        );
    }
    text.push_str(gateway::START_SESSION);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_request_per_connection_with_every_schema_and_the_start() {
        let symbols: Vec<String> = ["ESZ6", "NQZ6"].map(String::from).to_vec();
        let schemas: Vec<String> = ["mbo", "trades"].map(String::from).to_vec();
        let planned = shards(&symbols, &schemas, 1024).unwrap();
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].requests.len(), 1);
        assert_eq!(
            planned[0].requests[0],
            ["mbo:ESZ6", "trades:ESZ6", "mbo:NQZ6", "trades:NQZ6"]
        );
        let config = DatabentoConfig {
            dataset: "GLBX.MDP3".to_owned(),
            stype_in: "raw_symbol".to_owned(),
            recovery: Recovery::Snapshot,
            heartbeat_interval_s: None,
            slow_reader_behavior: None,
            max_orders_per_book: None,
            max_instrument_mappings: None,
        };
        let text = session_request(
            &config,
            &schemas,
            &symbols,
            &[Some(5), Some(7)],
            false,
            9 | 3 << 32,
        );
        assert_eq!(
            text,
            "schema=mbo|stype_in=raw_symbol|symbols=ESZ6,NQZ6|snapshot=1|is_last=1|id=9\n\
             schema=trades|stype_in=raw_symbol|symbols=ESZ6,NQZ6|snapshot=0|is_last=1|start=7|id=9\n\
             start_session\n"
        );
    }
}
