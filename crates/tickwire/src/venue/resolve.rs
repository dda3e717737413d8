//! A venue's address, looked up at every connection attempt, off the control thread.
//!
//! An address resolved once at start is never followed when a venue moves, and a host that did
//! not resolve at start left the venue idle for ever (issue 24). So each attempt asks again: the
//! control side hands a [`ResolveRequest`] to a [`ResolverWorker`], whose thread makes the
//! blocking lookup (`getaddrinfo` through [`std::net::ToSocketAddrs`], which can take seconds when
//! a name server does not answer) and sends the [`Resolved`] reply back, waking the control thread.
//! A literal IP address needs no lookup: [`literal`] answers it at once, on the caller's thread.
//!
//! What resolves a name is a [`Resolve`], [`SystemResolver`] unless the session is given another
//! (the tests inject one that fails, or that answers a different address after a while).

use crate::net::ConnId;
use crate::thread::ControlWakeup;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;

/// Turns a host and port into the address to connect to. Called on the resolver's worker
/// thread, so it may block.
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String>;
}

/// The system's resolver (`getaddrinfo`): its first address.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        (host, port)
            .to_socket_addrs()
            .map_err(|error| error.to_string())?
            .next()
            .ok_or_else(|| "no address".to_owned())
    }
}

/// `host` as an address when it is an IP literal (no lookup needed).
pub fn literal(host: &str, port: u16) -> Option<SocketAddr> {
    host.parse::<IpAddr>()
        .ok()
        .map(|ip| SocketAddr::new(ip, port))
}

/// One attempt's lookup.
#[derive(Clone, Debug)]
pub struct ResolveRequest {
    /// The venue's index in the appliance file.
    pub venue: usize,
    pub slot: ConnId,
    /// The attempt's generation, so a late answer is never taken for a newer attempt's.
    pub generation: u32,
    pub host: String,
    pub port: u16,
}

/// The answer to a [`ResolveRequest`].
#[derive(Clone, Debug)]
pub struct Resolved {
    pub venue: usize,
    pub slot: ConnId,
    pub generation: u32,
    pub result: Result<SocketAddr, String>,
}

/// The worker thread and its channels.
pub struct ResolverWorker {
    requests: Option<mpsc::Sender<ResolveRequest>>,
    replies: mpsc::Receiver<Resolved>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl ResolverWorker {
    /// Starts the worker on `resolver`; each reply is followed by a `wakeup.notify()`.
    pub fn start(
        resolver: Arc<dyn Resolve>,
        wakeup: Option<ControlWakeup>,
    ) -> std::io::Result<ResolverWorker> {
        let (request_tx, request_rx) = mpsc::channel::<ResolveRequest>();
        let (reply_tx, replies) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("tw-resolver".to_owned())
            .spawn(move || {
                for request in request_rx {
                    let result = resolver.resolve(&request.host, request.port);
                    let reply = Resolved {
                        venue: request.venue,
                        slot: request.slot,
                        generation: request.generation,
                        result,
                    };
                    if reply_tx.send(reply).is_err() {
                        break;
                    }
                    if let Some(wakeup) = &wakeup {
                        wakeup.notify();
                    }
                }
            })?;
        Ok(ResolverWorker {
            requests: Some(request_tx),
            replies,
            worker: Some(worker),
        })
    }

    pub fn request(&self, request: ResolveRequest) {
        if let Some(requests) = &self.requests {
            // The worker only stops when this handle is dropped.
            let _ = requests.send(request);
        }
    }

    /// Replies ready now.
    pub fn take_replies(&self) -> Vec<Resolved> {
        self.replies.try_iter().collect()
    }
}

impl Drop for ResolverWorker {
    fn drop(&mut self) {
        // Closing the request channel ends the worker's loop after its current lookup. A lookup
        // stuck in getaddrinfo would hold the join for as long as the system's resolver takes
        // (its timeout and attempts, from resolv.conf), so the worker is left to finish alone.
        self.requests.take();
        if let Some(worker) = self.worker.take() {
            if worker.is_finished() {
                let _ = worker.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_literal_needs_no_lookup() {
        assert_eq!(
            literal("127.0.0.1", 443),
            Some("127.0.0.1:443".parse().unwrap())
        );
        assert_eq!(literal("::1", 80), Some("[::1]:80".parse().unwrap()));
        assert_eq!(literal("localhost", 80), None);
        assert_eq!(literal("fstream.example", 443), None);
    }

    struct Scripted;

    impl Resolve for Scripted {
        fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
            match host {
                "venue.test" => Ok(SocketAddr::from(([127, 0, 0, 9], port))),
                _ => Err(format!("{host}: no such host")),
            }
        }
    }

    #[test]
    fn the_worker_answers_each_request_with_its_tags() {
        let worker = ResolverWorker::start(Arc::new(Scripted), None).unwrap();
        worker.request(ResolveRequest {
            venue: 1,
            slot: 4,
            generation: 7,
            host: "venue.test".to_owned(),
            port: 9443,
        });
        worker.request(ResolveRequest {
            venue: 0,
            slot: 2,
            generation: 3,
            host: "gone.test".to_owned(),
            port: 1,
        });
        let mut replies = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while replies.len() < 2 && std::time::Instant::now() < deadline {
            match worker.replies.recv_timeout(Duration::from_secs(1)) {
                Ok(reply) => replies.push(reply),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        assert_eq!(replies.len(), 2, "{replies:?}");
        let first = &replies[0];
        assert_eq!((first.venue, first.slot, first.generation), (1, 4, 7));
        assert_eq!(first.result, Ok("127.0.0.9:9443".parse().unwrap()));
        let second = &replies[1];
        assert_eq!((second.venue, second.slot, second.generation), (0, 2, 3));
        assert_eq!(second.result, Err("gone.test: no such host".to_owned()));
    }

    #[test]
    fn the_system_resolver_reads_a_literal() {
        assert_eq!(
            SystemResolver.resolve("127.0.0.1", 80),
            Ok("127.0.0.1:80".parse().unwrap())
        );
    }
}
