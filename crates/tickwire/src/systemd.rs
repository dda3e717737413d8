//! systemd's notify protocol (sd_notify(3)), without libsystemd: one datagram per message to the
//! socket named by `$NOTIFY_SOCKET`.
//!
//! The control thread sends `READY=1` once the appliance is up, `STATUS=` lines as its state
//! changes, `WATCHDOG=1` while the hot threads' heartbeats advance (a wedged hot thread therefore
//! lets the watchdog fire and systemd restart the service), and `STOPPING=1` on the way out.
//! Outside systemd (`$NOTIFY_SOCKET` unset) every call does nothing.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to systemd's notify socket, or nothing when not run by systemd.
pub struct Notifier {
    socket: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

/// Why the notify socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET={path:?} is not a usable socket address: {source}")]
    Address { path: String, source: io::Error },
    #[error("cannot create a socket to notify systemd: {0}")]
    Socket(io::Error),
}

impl Notifier {
    /// Reads `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID` as systemd sets them.
    pub fn from_env() -> Result<Notifier, NotifyError> {
        let watchdog = watchdog_from_env();
        let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
            return Ok(Notifier {
                socket: None,
                watchdog,
            });
        };
        let path = path.to_string_lossy().into_owned();
        let address = socket_address(&path).map_err(|source| NotifyError::Address {
            path: path.clone(),
            source,
        })?;
        let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
        Ok(Notifier {
            socket: Some((socket, address)),
            watchdog,
        })
    }

    /// A notifier that sends nothing.
    pub fn disabled() -> Notifier {
        Notifier {
            socket: None,
            watchdog: None,
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// The watchdog interval systemd expects pings within, if it set one for this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends one message (`KEY=value` lines). A failure is returned for the caller to log; the
    /// appliance keeps running either way.
    pub fn notify(&self, message: &str) -> io::Result<()> {
        match &self.socket {
            Some((socket, address)) => socket.send_to_addr(message.as_bytes(), address).map(|_| ()),
            None => Ok(()),
        }
    }

    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.notify(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    pub fn status(&self, status: &str) -> io::Result<()> {
        self.notify(&format!("STATUS={}", one_line(status)))
    }

    pub fn watchdog_ping(&self) -> io::Result<()> {
        self.notify("WATCHDOG=1")
    }

    pub fn stopping(&self, status: &str) -> io::Result<()> {
        self.notify(&format!("STOPPING=1\nSTATUS={}", one_line(status)))
    }
}

/// A `STATUS=` value must be one line.
fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

/// `WATCHDOG_USEC`, if set and meant for this process (`WATCHDOG_PID` absent or ours).
fn watchdog_from_env() -> Option<Duration> {
    if let Some(pid) = std::env::var_os("WATCHDOG_PID") {
        if pid.to_string_lossy().parse::<u32>().ok() != Some(std::process::id()) {
            return None;
        }
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// A path, or `@name` for an abstract socket (sd_notify(3)).
fn socket_address(path: &str) -> io::Result<SocketAddr> {
    if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())
    } else if path.starts_with('/') {
        SocketAddr::from_pathname(path)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "expected an absolute path or @abstract-name",
        ))
    }
}

/// Decides when to ping the watchdog: only when every hot thread's heartbeat moved since the last
/// check, so a wedged thread stops the pings and systemd's watchdog restarts the service.
pub struct HeartbeatCheck {
    last: Vec<u64>,
}

impl HeartbeatCheck {
    pub fn new(beats: Vec<u64>) -> HeartbeatCheck {
        HeartbeatCheck { last: beats }
    }

    /// `Ok` when all advanced; otherwise the indexes of those that did not.
    pub fn advance(&mut self, beats: Vec<u64>) -> Result<(), Vec<usize>> {
        let stuck: Vec<usize> = beats
            .iter()
            .zip(&self.last)
            .enumerate()
            .filter(|(_, (now, before))| now <= before)
            .map(|(index, _)| index)
            .collect();
        self.last = beats;
        if stuck.is_empty() {
            Ok(())
        } else {
            Err(stuck)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_on_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier {
            socket: Some((
                UnixDatagram::unbound().unwrap(),
                socket_address(path.to_str().unwrap()).unwrap(),
            )),
            watchdog: None,
        };
        notifier.ready("up\nand running").unwrap();
        notifier.watchdog_ping().unwrap();
        let mut buf = [0u8; 256];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=up and running");
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
    }

    #[test]
    fn abstract_and_bad_addresses() {
        assert!(socket_address("@tickwire-test").is_ok());
        assert!(socket_address("relative/path").is_err());
        assert!(!Notifier::disabled().is_enabled());
        assert!(Notifier::disabled().notify("READY=1").is_ok());
    }

    #[test]
    fn heartbeat_check_names_stuck_threads() {
        let mut check = HeartbeatCheck::new(vec![1, 1, 1]);
        assert_eq!(check.advance(vec![2, 5, 9]), Ok(()));
        assert_eq!(check.advance(vec![3, 5, 10]), Err(vec![1]));
        assert_eq!(check.advance(vec![4, 6, 11]), Ok(()));
    }
}
