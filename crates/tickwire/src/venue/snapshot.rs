//! REST depth snapshots, fetched off the hot path.
//!
//! A [`SnapshotFetcher`] owns one worker thread that performs the blocking HTTPS calls, so that
//! neither a hot thread nor the control thread's report loop ever waits on a venue's REST API.
//! The control thread hands it requests and collects replies without blocking.
//!
//! Where a venue's snapshots are and how their body reads is its [`SnapshotApi`] (a path, a body
//! parser and, optionally, its instrument list's path and parser), which the venue's own
//! `Protocol::snapshot_target` names, in the venue's folder. A venue whose books start from the
//! stream's own snapshots has none. This file names no venue: whatever is a venue's own is in its
//! `SnapshotApi`.

use super::feed::{DepthSnapshot, SnapshotReply, SnapshotRequest};
use super::rest::RestClient;
use crate::clock::Clock;
use std::sync::mpsc;

/// A venue's REST depth endpoint: its path (the query `?symbol=..&limit=..` is added) and the
/// parser of its body.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotApi {
    pub path: &'static str,
    pub parse: fn(&[u8]) -> Result<DepthSnapshot, String>,
    /// The venue's instrument list, which the configured symbols are checked against at start
    /// ([`check_listed`]); `None` when the venue has none small enough to fetch.
    pub listing: Option<ListingApi>,
}

/// A venue's instrument list: `GET {path}` (no query), whose body `parse` reads into the symbols
/// it lists, as the REST API spells them.
#[derive(Clone, Copy, Debug)]
pub struct ListingApi {
    pub path: &'static str,
    pub parse: fn(&[u8]) -> Result<Vec<String>, String>,
}

/// How to fetch one venue's snapshots.
#[derive(Clone)]
pub struct SnapshotTarget {
    pub client: RestClient,
    /// Where the snapshots are and how they read.
    pub api: SnapshotApi,
    /// Symbols by instrument id, as the REST API spells them.
    pub symbols: Vec<String>,
    /// Levels per side (`limit`).
    pub depth: u32,
    /// The instrument id of `symbols[0]`.
    pub instrument_base: u32,
}

/// The worker thread and its channels.
pub struct SnapshotFetcher {
    requests: Option<mpsc::Sender<SnapshotRequest>>,
    replies: mpsc::Receiver<SnapshotReply>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl SnapshotFetcher {
    /// Starts the worker. `targets[venue]` serves requests for that venue id; a venue without a
    /// target gets an error reply. Each reply is followed by a `wakeup.notify()`, so that the
    /// control thread relays it at once rather than at its next tick.
    pub fn start(
        targets: Vec<Option<SnapshotTarget>>,
        clock: Clock,
        wakeup: Option<crate::thread::ControlWakeup>,
    ) -> std::io::Result<Self> {
        let (request_tx, request_rx) = mpsc::channel::<SnapshotRequest>();
        let (reply_tx, replies) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("tw-snapshots".to_owned())
            .spawn(move || {
                for request in request_rx {
                    let result = match targets.get(request.venue as usize).and_then(Option::as_ref)
                    {
                        Some(target) => fetch(
                            target,
                            request.instrument.wrapping_sub(target.instrument_base) as usize,
                        ),
                        None => Err("this venue has no REST endpoint for snapshots".to_owned()),
                    };
                    let reply = SnapshotReply {
                        venue: request.venue,
                        instrument: request.instrument,
                        result,
                        recv_ts_ns: clock.now_ns(),
                    };
                    if reply_tx.send(reply).is_err() {
                        break;
                    }
                    if let Some(wakeup) = &wakeup {
                        wakeup.notify();
                    }
                }
            })?;
        Ok(SnapshotFetcher {
            requests: Some(request_tx),
            replies,
            worker: Some(worker),
        })
    }

    pub fn request(&self, request: SnapshotRequest) {
        if let Some(requests) = &self.requests {
            // The worker only stops when this fetcher is dropped.
            let _ = requests.send(request);
        }
    }

    /// Replies ready now.
    pub fn take_replies(&self) -> Vec<SnapshotReply> {
        self.replies.try_iter().collect()
    }
}

impl Drop for SnapshotFetcher {
    fn drop(&mut self) {
        // Closing the request channel ends the worker's loop after its current call.
        self.requests.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// What the venue's instrument list says of the configured symbols.
#[derive(Debug, PartialEq, Eq)]
pub enum Listing {
    /// Every configured symbol is listed (or the venue has no list to check against).
    Listed,
    /// These configured symbols are not in the list.
    Unlisted {
        path: &'static str,
        symbols: Vec<String>,
    },
    /// The list could not be fetched or read: why.
    Unavailable(String),
}

/// Checks the configured symbols against the venue's instrument list (`api.listing`), one
/// blocking call, made by the control thread at start before any hot thread runs. Symbols
/// compare without regard to case (the REST API spells them upper case).
pub fn check_listed(target: &SnapshotTarget) -> Listing {
    let Some(ListingApi { path, parse }) = target.api.listing else {
        return Listing::Listed;
    };
    let response = match target.client.get(path) {
        Ok(response) => response,
        Err(error) => return Listing::Unavailable(error.to_string()),
    };
    if response.status != 200 {
        let body = String::from_utf8_lossy(&response.body);
        let body: String = body.chars().take(200).collect();
        return Listing::Unavailable(format!("{path}: HTTP {}: {body}", response.status));
    }
    let listed: std::collections::HashSet<String> = match parse(&response.body) {
        Ok(symbols) => symbols
            .into_iter()
            .map(|symbol| symbol.to_ascii_uppercase())
            .collect(),
        Err(error) => return Listing::Unavailable(format!("{path}: {error}")),
    };
    let symbols: Vec<String> = target
        .symbols
        .iter()
        .filter(|symbol| !listed.contains(&symbol.to_ascii_uppercase()))
        .cloned()
        .collect();
    if symbols.is_empty() {
        Listing::Listed
    } else {
        Listing::Unlisted { path, symbols }
    }
}

/// One blocking fetch of `GET {api.path}?symbol=..&limit=..`.
pub fn fetch(target: &SnapshotTarget, instrument: usize) -> Result<DepthSnapshot, String> {
    let symbol = target
        .symbols
        .get(instrument)
        .ok_or_else(|| format!("no symbol for instrument {instrument}"))?;
    let path = format!("{}?symbol={symbol}&limit={}", target.api.path, target.depth);
    let response = target
        .client
        .get(&path)
        .map_err(|error| error.to_string())?;
    if response.status != 200 {
        let body = String::from_utf8_lossy(&response.body);
        let body: String = body.chars().take(200).collect();
        return Err(format!("{path}: HTTP {}: {body}", response.status));
    }
    (target.api.parse)(&response.body).map_err(|error| format!("{path}: {error}"))
}
