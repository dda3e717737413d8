//! TLS client over byte buffers (rustls).

mod client;
mod error;
mod settings;
#[doc(hidden)]
pub mod unbuffered;

pub use client::{ReadOutcome, TlsClient};
pub use error::{TlsConfigError, TlsError};
pub use settings::{server_name, TlsSettings, TlsVersions, TrustAnchorCounts};
