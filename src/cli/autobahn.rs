//! `tickwire autobahn`: runs the Autobahn|Testsuite client cases over the appliance's own network
//! stack (transport, WebSocket client, frame ring), echoing every message back as the suite
//! expects. The run and its verdicts come from `../shared/tools/autobahn/run-client-suite.sh`.

use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tickwire::clock::Clock;
use tickwire::config::Endpoint;
use tickwire::net::engine::{
    split_frame, split_tag, FrameKind, NetEngine, StreamEvent, StreamSpec, WebSocketTarget,
};
use tickwire::net::{BackendChoice, Transport, TransportConfig, WaitMode};
use tickwire::ring::{frame_ring, FrameConsumer};
use tickwire::ws::MessageKind;

/// The largest message in the suite is 16 MiB (cases 9.1.6, 9.2.6); the ring holds two.
const MAX_MESSAGE_BYTES: usize = 16 << 20;
const RING_BYTES: usize = 64 << 20;
/// A case that has not closed by then is abandoned (the suite then reports it).
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

pub fn autobahn(url: &str, agent: &str, backend: BackendChoice, wait: WaitMode) -> ExitCode {
    match run(url, agent, backend, wait) {
        Ok(cases) => {
            eprintln!("autobahn: ran {cases} cases as agent {agent:?}; reports updated");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("autobahn: {error:#}");
            ExitCode::FAILURE
        }
    }
}

struct Runner {
    engine: NetEngine,
    frames: FrameConsumer,
    endpoint: Endpoint,
    addr: std::net::SocketAddr,
}

fn run(url: &str, agent: &str, backend: BackendChoice, wait: WaitMode) -> anyhow::Result<usize> {
    let endpoint = Endpoint::parse(url).map_err(|error| anyhow::anyhow!("{url}: {error}"))?;
    if endpoint.scheme.is_tls() {
        anyhow::bail!("{url}: the Autobahn fuzzing server speaks plain ws://");
    }
    let addr = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{url}: no address"))?;
    let config = TransportConfig {
        max_connections: 1,
        ..TransportConfig::default()
    };
    let (transport, why) = Transport::open(backend, config, Clock::calibrate())?;
    eprintln!("autobahn: {why}; wait mode {wait:?}");
    let (producer, frames) = frame_ring(RING_BYTES);
    let mut runner = Runner {
        engine: NetEngine::new(transport, producer, wait, 1),
        frames,
        endpoint,
        addr,
    };
    let count_text = runner.session("/getCaseCount", false)?;
    let count: usize = count_text
        .first()
        .and_then(|text| std::str::from_utf8(text).ok())
        .and_then(|text| text.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("getCaseCount answered {count_text:?}"))?;
    for case in 1..=count {
        runner.session(&format!("/runCase?case={case}&agent={agent}"), true)?;
    }
    runner.session(&format!("/updateReports?agent={agent}"), false)?;
    Ok(count)
}

impl Runner {
    /// One connection to `path`: echo (or collect) messages until it closes.
    fn session(&mut self, path: &str, echo: bool) -> anyhow::Result<Vec<Vec<u8>>> {
        let spec = StreamSpec {
            addr: self.addr,
            tls: None,
            preamble: None,
            websocket: Some(WebSocketTarget {
                host: self.endpoint.host.clone(),
                port: self.endpoint.port,
                path: path.to_owned(),
                secure: false,
                max_message_bytes: MAX_MESSAGE_BYTES,
                headers: Vec::new(),
            }),
        };
        self.engine.open(0, spec)?;
        let started = Instant::now();
        let mut collected = Vec::new();
        let mut closed = false;
        let mut closing = false;
        while !closed {
            if !closing && started.elapsed() > CASE_TIMEOUT {
                eprintln!("autobahn: {path}: no close after {CASE_TIMEOUT:?}; closing");
                self.engine.close(0, 1000);
                closing = true;
            }
            let mut events = Vec::new();
            self.engine.poll(&mut |_, event| events.push(event))?;
            let engine = &mut self.engine;
            self.frames.drain(usize::MAX, |tag, frame| {
                let (_, kind) = split_tag(tag);
                let Some((_, payload)) = split_frame(frame) else {
                    return;
                };
                if echo {
                    let kind = match kind {
                        FrameKind::Binary => MessageKind::Binary,
                        _ => MessageKind::Text,
                    };
                    // A send on a stream that is closing fails: nothing to echo then.
                    let _ = engine.send_message(0, kind, payload);
                } else {
                    collected.push(payload.to_vec());
                }
            });
            for event in events {
                if let StreamEvent::Closed { error, .. } = event {
                    if let Some(error) = error {
                        eprintln!("autobahn: {path}: {error}");
                    }
                    closed = true;
                }
            }
        }
        Ok(collected)
    }
}
