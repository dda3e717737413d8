//! The effect side of the control plane: carries out the link logic's [`LinkCommand`]s on the
//! [`Runtime`]. It decides nothing; it holds the prepared streams (TLS settings, WebSocket
//! targets) and the resolver, so that the link logic need not.
//!
//! An `Open` starts an attempt by resolving the venue's host: a literal IP address at once, a
//! name on the resolver's worker thread (`venue::resolve`), whose answer comes back through
//! `Venues::on_resolved` as a `Connect` (or as the attempt's failure, `dns-failed`). So every
//! attempt uses the address DNS gives now, and the control thread never blocks on a lookup.

use super::links::LinkCommand;
use crate::net::ConnId;
use crate::pipeline::{Runtime, RuntimeError};
use crate::venue::resolve::{self, ResolveRequest, Resolved, ResolverWorker};
use crate::venue::PreparedStream;
use std::net::SocketAddr;

/// Carries out link commands.
pub struct Applier {
    /// By venue index: its prepared stream (`None`: it could not be prepared, the error was
    /// logged, and the link logic never opens it).
    streams: Vec<Option<PreparedStream>>,
    /// By slot: its shard's own WebSocket path, where the venue has several entry points.
    paths: Vec<Option<String>>,
    /// By venue index: the address its last attempt connected to, so that a change is logged.
    addrs: Vec<Option<SocketAddr>>,
    /// By venue index: its name, for the log.
    names: Vec<String>,
    resolver: ResolverWorker,
}

impl Applier {
    /// `streams` and `names` by venue index, `paths` by slot (`Venues::slot_paths`).
    pub fn new(
        streams: Vec<Option<PreparedStream>>,
        paths: Vec<Option<String>>,
        names: Vec<String>,
        resolver: ResolverWorker,
    ) -> Applier {
        Applier {
            addrs: vec![None; streams.len()],
            streams,
            paths,
            names,
            resolver,
        }
    }

    /// Applies `commands` in order, leaving the vector empty for reuse. Stops at the first
    /// command the runtime cannot take (its threads are gone).
    pub fn apply(
        &mut self,
        runtime: &mut Runtime,
        commands: &mut Vec<LinkCommand>,
    ) -> Result<(), RuntimeError> {
        for command in commands.drain(..) {
            match command {
                LinkCommand::Open {
                    venue,
                    slot,
                    generation,
                } => {
                    let Some(Some(stream)) = self.streams.get(venue) else {
                        continue;
                    };
                    match resolve::literal(&stream.host, stream.port) {
                        Some(addr) => self.connect(runtime, venue, slot, generation, addr)?,
                        None => self.resolver.request(ResolveRequest {
                            venue,
                            slot,
                            generation,
                            host: stream.host.clone(),
                            port: stream.port,
                        }),
                    }
                }
                LinkCommand::Connect {
                    venue,
                    slot,
                    generation,
                    addr,
                } => self.connect(runtime, venue, slot, generation, addr)?,
                LinkCommand::Send { slot, text } => runtime.send_text(slot, text)?,
                LinkCommand::Ping { slot } => runtime.ping(slot)?,
                LinkCommand::SendDatagram {
                    slot,
                    line,
                    datagram,
                } => runtime.send_datagram(slot, line, datagram)?,
                LinkCommand::Close { slot } => runtime.close_stream(slot)?,
                LinkCommand::Abort { slot } => runtime.abort_stream(slot)?,
                LinkCommand::Disconnected {
                    venue,
                    slot,
                    instruments,
                } => runtime.notify_disconnect(venue, slot, instruments)?,
                LinkCommand::Event(event) => runtime.send_status(event)?,
            }
        }
        Ok(())
    }

    /// The lookups answered since the last call.
    pub fn take_resolved(&self) -> Vec<Resolved> {
        self.resolver.take_replies()
    }

    fn connect(
        &mut self,
        runtime: &mut Runtime,
        venue: usize,
        slot: ConnId,
        generation: u32,
        addr: SocketAddr,
    ) -> Result<(), RuntimeError> {
        let Some(Some(stream)) = self.streams.get(venue) else {
            return Ok(());
        };
        if let Some(spec) = stream.datagram() {
            // A datagram venue: its sockets join groups rather than connect to `addr`.
            return runtime.open_datagrams(slot, generation, *spec);
        }
        let path = self.paths.get(slot as usize).and_then(Option::as_deref);
        let spec = stream.at_path(addr, path);
        if let Some(last) = self.addrs.get_mut(venue) {
            if *last != Some(addr) {
                let name = self.names.get(venue).map_or("?", String::as_str);
                match last {
                    None => {
                        tracing::info!(venue = %name, host = %stream.host, %addr, "connecting")
                    }
                    Some(before) => tracing::warn!(
                        venue = %name,
                        host = %stream.host,
                        %before,
                        %addr,
                        "the venue's host resolves to a new address: connecting there"
                    ),
                }
                *last = Some(addr);
            }
        }
        runtime.open_stream(slot, generation, spec)
    }
}
