//! What can go wrong for a consumer, each with a message that says what to do.

use std::path::PathBuf;
use std::time::Duration;
use tickwire_bus::{BusError, ReadError};

/// Why a client could not attach, read or ask for snapshots.
#[derive(Debug)]
pub enum ClientError {
    /// The bus could not be opened: none at the path ([`BusError::NotFound`]), no permission,
    /// another layout version ([`BusError::LayoutVersion`], naming both), a file of an owner the
    /// client does not trust ([`BusError::Untrusted`], naming it), a damaged file. Also
    /// what [`Client::poll`](crate::Client::poll) reports once when an appliance made a new bus
    /// this client cannot read (it then waits for the next one).
    Bus(BusError),
    /// [`Client::attach_wait`](crate::Client::attach_wait) waited this long and no bus appeared.
    NoBusWithin { path: PathBuf, waited: Duration },
    /// The bus failed under the reader: the file was truncated ([`ReadError::Truncated`]: an
    /// error, never a SIGBUS) or damaged. Reported once; the client then waits for an appliance
    /// to make a new bus at the path and reports it as a new epoch.
    Read(ReadError),
    /// A snapshot request could not be sent: no appliance listens on the request socket
    /// (`ENOENT`: no socket; `ECONNREFUSED`: nobody bound to it), or another socket error.
    Request {
        socket: PathBuf,
        source: std::io::Error,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Bus(error) => error.fmt(f),
            ClientError::NoBusWithin { path, waited } => write!(
                f,
                "no bus appeared at {} within {:.1} s: no appliance made one there (is it \
                 running, with [bus] in its tickwire.toml naming this path?)",
                path.display(),
                waited.as_secs_f64()
            ),
            ClientError::Read(error) => error.fmt(f),
            ClientError::Request { socket, source } => match source.kind() {
                std::io::ErrorKind::NotFound => write!(
                    f,
                    "no appliance takes snapshot requests at {}: the socket does not exist \
                         (is the appliance running with [bus]?)",
                    socket.display()
                ),
                std::io::ErrorKind::ConnectionRefused => write!(
                    f,
                    "no appliance takes snapshot requests at {}: connection refused (the \
                         appliance that made it has stopped)",
                    socket.display()
                ),
                _ => write!(
                    f,
                    "sending a snapshot request to {}: {source}",
                    socket.display()
                ),
            },
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Bus(error) => Some(error),
            ClientError::Read(error) => Some(error),
            ClientError::Request { source, .. } => Some(source),
            ClientError::NoBusWithin { .. } => None,
        }
    }
}

impl From<BusError> for ClientError {
    fn from(error: BusError) -> ClientError {
        ClientError::Bus(error)
    }
}

impl From<ReadError> for ClientError {
    fn from(error: ReadError) -> ClientError {
        ClientError::Read(error)
    }
}
