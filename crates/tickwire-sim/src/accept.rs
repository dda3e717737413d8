//! The accept thread every simulator runs, and the registry of its connection threads: one
//! thread per accepted socket (blocking I/O, as everywhere in the simulators), each socket kept
//! so that stopping can shut it down and so wake the thread blocked on it.
//!
//! Stopping is the owner's stop flag plus [`stop_accepting`]: the accept thread checks the flag
//! after every accept(2), and a connection of our own wakes it from the last one.

use super::wire::lock;
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The sockets of the live connection threads, and the threads to join.
#[derive(Default)]
pub struct Sockets {
    next_socket_id: u64,
    /// Every connection thread's socket, so that `shut_down` can wake each thread.
    open: HashMap<u64, Arc<TcpStream>>,
    threads: Vec<JoinHandle<()>>,
}

impl Sockets {
    /// Forgets a socket whose connection thread is done with it.
    pub fn remove(&mut self, socket_id: u64) {
        self.open.remove(&socket_id);
    }

    /// Shuts every open socket down, which wakes its thread, and hands over the threads to join
    /// (outside the lock: a finishing thread takes it to unregister its socket).
    pub fn shut_down(&mut self) -> Vec<JoinHandle<()>> {
        for socket in self.open.values() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        std::mem::take(&mut self.threads)
    }
}

/// What a simulator keeps under the lock its accept loop registers sockets under: the
/// [`Sockets`], and whatever else that simulator guards with them.
pub trait Registry {
    fn sockets(&mut self) -> &mut Sockets;
}

impl Registry for Sockets {
    fn sockets(&mut self) -> &mut Sockets {
        self
    }
}

/// Accepts connections until `stopping()` says so, each served on a thread of its own named
/// `<thread_prefix>-<socket id>`, running what `connection(socket, peer, socket_id)` returns; that
/// closure is called under the registry's lock, once the socket is registered, and the thread it
/// makes must [`Sockets::remove`] the socket when done. After a failed accept (out of
/// descriptors, say) the loop calls `back_off`, which waits rather than spin on the error and
/// answers false to stop.
pub fn accept_loop<R: Registry, C: FnOnce() + Send + 'static>(
    listener: &TcpListener,
    registry: &Mutex<R>,
    stopping: &dyn Fn() -> bool,
    back_off: &dyn Fn() -> bool,
    thread_prefix: &str,
    mut connection: impl FnMut(Arc<TcpStream>, SocketAddr, u64) -> C,
) {
    loop {
        let accepted = listener.accept();
        if stopping() {
            return;
        }
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "sim: accept failed");
                if !back_off() {
                    return;
                }
                continue;
            }
        };
        let mut guard = lock(registry);
        // Checked under the lock `stop` shuts the sockets down under: a socket registered here
        // is either shut down by `stop` or never served.
        if stopping() {
            return;
        }
        let sockets = guard.sockets();
        let socket_id = sockets.next_socket_id;
        sockets.next_socket_id += 1;
        let tcp = Arc::new(tcp);
        sockets.open.insert(socket_id, Arc::clone(&tcp));
        let serve = connection(tcp, peer, socket_id);
        let sockets = guard.sockets();
        sockets.threads.retain(|thread| !thread.is_finished());
        let spawned = std::thread::Builder::new()
            .name(format!("{thread_prefix}-{socket_id}"))
            .spawn(serve);
        match spawned {
            Ok(thread) => sockets.threads.push(thread),
            Err(error) => {
                tracing::warn!(%error, %peer, "sim: cannot start a connection thread");
                sockets.open.remove(&socket_id);
            }
        }
    }
}

/// The wait after a failed accept for a simulator with nothing better to wait on.
pub fn pause_after_failed_accept() -> bool {
    std::thread::sleep(Duration::from_millis(100));
    true
}

/// Stops an accept thread blocked in accept(2) on `addr`: a connection of our own wakes it (the
/// thread checks its stop flag first), then it is joined.
pub fn stop_accepting(addr: SocketAddr, accept: JoinHandle<()>) {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let wake_addr = match addr {
        SocketAddr::V4(addr) if addr.ip().is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        SocketAddr::V6(addr) if addr.ip().is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        addr => addr,
    };
    let _ = TcpStream::connect_timeout(&wake_addr, Duration::from_secs(1));
    let _ = accept.join();
}
