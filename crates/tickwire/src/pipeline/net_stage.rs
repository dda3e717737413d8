//! The network stage: the only stage that does I/O. It owns a [`NetEngine`] over the configured
//! backend, built on the network thread itself by [`StagePoll::start`] (io_uring's
//! SINGLE_ISSUER ties the ring to the thread that made it), writes each received message into
//! the frame ring of its connection's decoder ([`FrameRoutes`]; a full ring refuses without
//! blocking, and the other decoders' rings are untouched), publishing each read's frames and
//! waking their decoder as soon as that read is handled (not at the end of the round), takes [`NetCommand`]s from the control thread (open a prepared stream, close,
//! abort, send, ping) and reports each stream's steps back as [`NetStatus`]es. It stores each
//! slot's last-read time where the control thread loads it without a lock
//! ([`super::Runtime::last_read_ns`]).
//!
//! Every status carries the generation of the `Open` command it belongs to, so that a late
//! report about a slot's previous stream is never taken for one about its new stream.

use super::rings::NetEnds;
use super::StagePoll;
use crate::clock::Clock;
use crate::config::{NetBackend, NetConfig, NetWait};
use crate::lifecycle::{self, Reason};
use crate::net::engine::{FrameRoutes, NetEngine, StreamEvent, StreamSpec};
use crate::net::{BackendChoice, ConnId, SocketOptions, Transport, TransportConfig, WaitMode};
use crate::ring;
use crate::thread::Wakeup;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request from the control thread to the network thread.
pub enum NetCommand {
    /// Open stream slot `conn`; its statuses carry `generation`, so that a late report about a
    /// slot's previous stream is never taken for one about the new one.
    Open {
        conn: ConnId,
        generation: u32,
        spec: Box<StreamSpec>,
    },
    /// Start the WebSocket closing handshake (code 1000).
    Close { conn: ConnId },
    /// Drop the socket at once, without an event.
    Abort { conn: ConnId },
    /// Send a text message (a subscription request) on an open stream.
    Send { conn: ConnId, text: String },
    /// Send a WebSocket ping on an open stream (a venue whose heartbeat is the client's ping);
    /// nothing when the slot has no open WebSocket stream.
    Ping { conn: ConnId },
    /// The connection in slot `conn` went down: write `notice` into its frame ring, behind its
    /// last frame, for its decoder (`NetEngine::notify_disconnect`).
    Disconnected {
        conn: ConnId,
        notice: crate::net::engine::DisconnectNotice,
    },
    /// Open a datagram venue's sockets in slot `conn` (`NetEngine::open_datagrams`); its
    /// statuses carry `generation` as an `Open`'s do.
    OpenDatagrams {
        conn: ConnId,
        generation: u32,
        spec: Box<crate::net::udp::DatagramSpec>,
    },
    /// Send one datagram (a re-request) on socket `line` of datagram slot `conn`; nothing when
    /// the slot is gone or the socket's buffer is full (the venue's recovery retries).
    SendDatagram {
        conn: ConnId,
        line: crate::net::udp::DatagramLine,
        datagram: crate::net::udp::OutDatagram,
    },
}

/// A stream state change, from the network thread to the control thread.
#[derive(Debug)]
pub struct NetStatus {
    pub conn: ConnId,
    pub generation: u32,
    pub kind: NetStatusKind,
}

#[derive(Debug)]
pub enum NetStatusKind {
    Connected,
    Secured,
    Open,
    Closed {
        close_code: Option<u16>,
        /// The lifecycle's name for how it ended.
        reason: Reason,
        error: Option<String>,
    },
    /// An `Open` command the engine refused.
    OpenFailed {
        error: String,
    },
}

/// What the network stage needs to build its engine on its own thread.
struct NetSetup {
    backend: BackendChoice,
    wait: WaitMode,
    transport: TransportConfig,
    clock: Clock,
    /// One frame ring per decoder, and each slot's.
    frames: FrameRoutes,
    /// Per slot: the engine's last-read times, shared with `Runtime::last_read_ns`.
    last_read: Arc<[AtomicU64]>,
}

/// The network stage: a `NetEngine` over the configured backend, fed by the command ring.
pub(super) struct NetStage {
    setup: Option<NetSetup>,
    engine: Option<NetEngine>,
    commands: ring::Consumer<NetCommand>,
    statuses: ring::Producer<NetStatus>,
    /// The backend line for the log, filled in by `start`.
    backend: Arc<Mutex<String>>,
    /// Per slot: the generation of its current stream.
    generations: Vec<u32>,
    /// Wakes the control thread after a round that reported a status.
    control_wakeup: Option<crate::thread::ControlWakeup>,
}

/// What the control thread keeps of the network stage.
pub(super) struct NetReaders {
    /// The backend in use and why, written by the stage's `start` on its own thread.
    pub backend: Arc<Mutex<String>>,
    /// Per slot: the engine's last-read times.
    pub last_read: Arc<[AtomicU64]>,
}

impl NetStage {
    /// The stage as `config` describes it, with its rings; the engine itself is built by
    /// `start`, on the thread that will poll it.
    pub(super) fn new(
        config: &NetConfig,
        clock: Clock,
        rings: NetEnds,
        routes: Vec<u8>,
        control_wakeup: Option<crate::thread::ControlWakeup>,
    ) -> (NetStage, NetReaders) {
        let backend = Arc::new(Mutex::new(String::new()));
        let last_read: Arc<[AtomicU64]> = (0..config.max_connections)
            .map(|_| AtomicU64::new(0))
            .collect();
        let stage = NetStage {
            setup: Some(NetSetup {
                backend: match config.backend {
                    NetBackend::Auto => BackendChoice::Auto,
                    NetBackend::IoUring => BackendChoice::IoUring,
                    NetBackend::Epoll => BackendChoice::Epoll,
                },
                wait: match config.wait {
                    NetWait::BusyPoll => WaitMode::BusyPoll,
                    NetWait::Block => WaitMode::Block {
                        timeout: Duration::from_micros(config.block_timeout_us),
                    },
                },
                transport: TransportConfig {
                    max_connections: config.max_connections,
                    recv_buffer_bytes: config.recv_buffer_bytes,
                    recv_buffers: config.recv_buffers,
                    connect_timeout: Duration::from_millis(config.connect_timeout_ms),
                    socket: SocketOptions {
                        rcvbuf_bytes: config.rcvbuf_bytes,
                        busy_poll_us: config.busy_poll_us,
                    },
                },
                clock,
                frames: FrameRoutes::new(rings.frames, routes),
                last_read: last_read.clone(),
            }),
            engine: None,
            commands: rings.commands,
            statuses: rings.statuses,
            backend: backend.clone(),
            generations: vec![0; config.max_connections as usize],
            control_wakeup,
        };
        (stage, NetReaders { backend, last_read })
    }

    /// Has each publish of a decoder's frame ring wake that decoder (by decoder index; `None`
    /// for a decoder on this thread). Called before the stage starts.
    pub(super) fn wake_decoders_with(&mut self, wakeups: Vec<Option<Wakeup>>) {
        if let Some(setup) = self.setup.as_mut() {
            setup.frames.wake_with(wakeups);
        }
    }
}

impl StagePoll for NetStage {
    fn start(&mut self) -> Result<(), String> {
        let setup = self.setup.take().ok_or("network stage started twice")?;
        let (transport, why) = Transport::open(setup.backend, setup.transport, setup.clock)
            .map_err(|error| error.to_string())?;
        if let Ok(mut backend) = self.backend.lock() {
            *backend = why;
        }
        self.engine = Some(NetEngine::with_routes(
            transport,
            setup.frames,
            setup.wait,
            setup.last_read,
        ));
        Ok(())
    }

    fn poll(&mut self) -> bool {
        // Borrowed in place: the engine (its transport's rings and buffers) is never moved.
        let NetStage {
            engine,
            commands,
            statuses: status_ring,
            generations,
            control_wakeup,
            ..
        } = self;
        let Some(engine) = engine.as_mut() else {
            return false;
        };
        // The status ring is sized for every stream's changes between two control ticks; a full
        // ring means the control thread is wedged, and the watchdog will say so.
        let mut reported = false;
        let mut report = |status: NetStatus| {
            reported = true;
            let _ = status_ring.try_push(status);
        };
        let mut commanded = false;
        while let Some(command) = commands.try_pop() {
            commanded = true;
            match command {
                NetCommand::Open {
                    conn,
                    generation,
                    spec,
                } => {
                    if let Some(slot) = generations.get_mut(conn as usize) {
                        *slot = generation;
                    }
                    if let Err(error) = engine.open(conn, *spec) {
                        report(NetStatus {
                            conn,
                            generation,
                            kind: NetStatusKind::OpenFailed {
                                error: error.to_string(),
                            },
                        });
                    }
                }
                NetCommand::Close { conn } => engine.close(conn, 1000),
                NetCommand::Abort { conn } => engine.abort(conn),
                // A stream that closed meanwhile cannot take it; its Closed status says why.
                NetCommand::Send { conn, text } => {
                    let _ = engine.send_text(conn, &text);
                }
                // Likewise: a ping that finds its stream gone (a stale command after a close)
                // is dropped; there is nothing to keep alive.
                NetCommand::Ping { conn } => {
                    let _ = engine.ping(conn);
                }
                NetCommand::Disconnected { conn, notice } => {
                    engine.notify_disconnect(conn, notice);
                }
                NetCommand::OpenDatagrams {
                    conn,
                    generation,
                    spec,
                } => {
                    if let Some(slot) = generations.get_mut(conn as usize) {
                        *slot = generation;
                    }
                    // Logged here, once per open (not a steady-state path): how AF_XDP lines
                    // run, or the one line that says why they fell back to kernel sockets.
                    match engine.open_datagrams(conn, &spec) {
                        Ok(notes) => {
                            if let Some(info) = notes.info {
                                tracing::info!(conn, "{info}");
                            }
                            if let Some(warning) = notes.warning {
                                tracing::warn!(conn, "{warning}");
                            }
                        }
                        Err(error) => report(NetStatus {
                            conn,
                            generation,
                            kind: NetStatusKind::OpenFailed {
                                error: error.to_string(),
                            },
                        }),
                    }
                }
                NetCommand::SendDatagram {
                    conn,
                    line,
                    datagram,
                } => {
                    let _ = engine.send_datagram(conn, line, datagram.bytes());
                }
            }
        }
        let mut statuses = Vec::new();
        let worked = match engine.poll(&mut |conn, event| statuses.push((conn, event))) {
            Ok(count) => count > 0,
            Err(_) => false,
        };
        for (conn, event) in statuses {
            let kind = match event {
                StreamEvent::Connected => NetStatusKind::Connected,
                StreamEvent::Secured => NetStatusKind::Secured,
                StreamEvent::Open => NetStatusKind::Open,
                StreamEvent::Closed { close_code, error } => NetStatusKind::Closed {
                    close_code,
                    reason: lifecycle::reason_of(error.as_ref()),
                    error: error.map(|error| error.to_string()),
                },
            };
            let generation = generations.get(conn as usize).copied().unwrap_or(0);
            report(NetStatus {
                conn,
                generation,
                kind,
            });
        }
        // Once per round, after the statuses are published: the control thread acts on them
        // now (the next step of a connection waits on it), not at its next tick.
        if reported {
            if let Some(wakeup) = control_wakeup {
                wakeup.wake();
            }
        }
        worked || commanded
    }
}
