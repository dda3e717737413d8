//! TLS client over byte buffers (rustls): the session the network thread drives, the
//! configuration the control thread builds, and errors a venue operator can act on.
//!
//! - `settings.rs`: [`TlsSettings`] builds one `Arc<rustls::ClientConfig>` per venue: the `ring`
//!   provider, TLS 1.3 and 1.2, trust anchors from the platform store, `webpki-roots` and the
//!   venue's `tls.extra_ca_file`, optional ALPN `http/1.1`. [`server_name`] turns the URL's host
//!   or `tls.sni` into the name to send and verify (an IP address is verified against the
//!   certificate's IP addresses and not sent as SNI).
//! - `client.rs`: [`TlsClient`], one session fed and drained with byte slices: the handshake
//!   through rustls's unbuffered API, then the session's own record layer.
//! - `records.rs`: that record layer: records unprotected and protected in place in the
//!   session's buffers with the traffic keys rustls hands over (its `KernelConnection`, which
//!   still derives the keys of a KeyUpdate and stores session tickets).
//! - `error.rs`: [`TlsConfigError`] (control thread) and [`TlsError`] (session).
//!
//! **Invariant:** certificate verification is always on; there is no setting to turn it off.
//! **Invariant:** `tls/` does no I/O except reading CA files while a configuration is built.
//!
//! # Driving a session (the network loop's side)
//!
//! - After [`TlsClient::new`], and after every other call, send what
//!   [`TlsClient::write_tls`] (or `write_tls_to_vec`) gives while [`TlsClient::wants_write`]:
//!   the ClientHello is ready at once, and reads can produce handshake replies, key updates and
//!   alerts. A buffer of [`MAX_RECORD_WIRE_BYTES`] takes a whole record per call.
//! - Received bytes go to [`TlsClient::feed_tls`], then [`TlsClient::read_plaintext`] until it
//!   stops returning `Data`. After the handshake, decryption happens in `read_plaintext`, into
//!   the caller's buffer; give it at least [`MAX_RECORD_PLAINTEXT_BYTES`] (64 KiB is a good size)
//!   so that no record is split through the session's stash. `feed_tls` takes fewer bytes than
//!   given when the session already holds [`INCOMING_BYTES`] received and unread: read, then
//!   feed the rest. Any socket read size works.
//! - `read_plaintext` says `WouldBlock` (wait for the socket), `CloseNotify` (the server ended
//!   cleanly), or `Eof` (after [`TlsClient::feed_eof`]: the transport ended without
//!   close_notify). A socket read of zero bytes goes to `feed_eof`, whose error during the
//!   handshake is the one to report (peer closed, or the server does not speak TLS).
//! - Plaintext to send (the WebSocket upgrade, frames) goes to [`TlsClient::write_plaintext`],
//!   also during the handshake (held, up to [`UNSENT_BYTES`], until the handshake allows it).
//!   Fewer bytes taken than given means: drain `write_tls`, then write the rest.
//! - Any error is terminal: send what `write_tls` still gives (the alert), then close.
//! - Memory: about 280 KiB per session, allocated in `new`. In steady state nothing is
//!   allocated in either direction (`tests/tls_alloc.rs`, every suite, before and after a
//!   KeyUpdate); the handshake, a KeyUpdate and a session ticket may allocate, inside rustls.
//!
//! # Why the session protects records itself (issue 32)
//!
//! rustls 0.23's record layer allocates once per record in each direction, unbuffered API
//! included: `ReadTraffic::next_record` pops a `Vec` that `CommonState::
//! take_received_plaintext` filled (`Payload::into_vec`), and `WriteTraffic::encrypt` goes
//! through `MessageEncrypter::encrypt`, which builds each record in a new `PrefixedPayload`;
//! neither is replaceable by a crypto provider. So once the handshake is over (and rustls holds
//! nothing unprocessed) the session takes the traffic keys and sequence numbers from rustls
//! (`dangerous_into_kernel_connection`, the kTLS interface; `TlsSettings::build` turns on
//! `enable_secret_extraction` for it) and protects records with `ring`'s AEADs in place. What
//! rustls checked per record is checked there too (`records.rs` lists it); the tests in
//! `tests/tls_client.rs` send it the records rustls would not (fragmented tickets, a misplaced
//! KeyUpdate, damaged records, warnings, renegotiation requests).
//!
//! # Why rustls's unbuffered API: the measurement
//!
//! Both rustls APIs were written behind this same `TlsClient` interface: `ClientConnection`
//! (`read_tls`, `process_new_packets`, `reader().read`) and `UnbufferedClientConnection`
//! (`process_tls_records` over a buffer the session owns). Both were checked byte for byte on
//! the benchmark's streams, then timed decrypting ~1 MB of real Binance messages (TLS 1.3,
//! AES-256-GCM, in memory) with the two clients alternated round by round (400 rounds per run,
//! median of the per-round ratios) so that the load from other work on the machine fell on both
//! alike. Three runs, 2-vCPU Intel Xeon VM (AES-NI, VAES, AVX2), Linux 6.18, no frequency
//! governor exposed, load average 0.6 to 1.5 from other builds:
//!
//! | stream, socket reads                     | buffered       | unbuffered     | unbuffered / buffered |
//! |------------------------------------------|----------------|----------------|-----------------------|
//! | 16 KiB records, 64 KiB reads             | 3.1-3.6 GiB/s  | 3.3-3.6 GiB/s  | 0.970, 0.974, 0.983   |
//! | 16 KiB records, one record per read      | 2.8-3.7 GiB/s  | 3.2-4.0 GiB/s  | 0.906, 0.934, 0.932   |
//! | ~200 B records (one 180 B message each), 64 KiB reads | 2.35-3.08 M rec/s | 2.81-3.41 M rec/s | 0.840, 0.897, 0.901 |
//! | ~200 B records, one record per read      | 3.27-3.51 M rec/s | 3.32-3.47 M rec/s | 0.959, 1.011, 1.011 |
//!
//! (Measured before issue 32, with rustls's record layer; the session's own record layer
//! drops the per-record `Vec` that both clients went through.)
//!
//! The unbuffered client is 10-16% faster on a burst of small records, 7-9% faster on large
//! records arriving one per read, and equal within noise otherwise; it is never slower, so it
//! is the one kept (the buffered one was deleted after measuring). The difference is in the
//! buffered API's input path: `read_tls` copies at most 4 KiB per call into rustls's own
//! buffer and, after every record, moves the rest of that buffer to its front; the unbuffered
//! API decrypts in place in the session's buffer, which only advances an offset. Both copy
//! each record's plaintext once into a rustls `Vec` and once into the caller's buffer.
//! The price is this module's driving of rustls's state machine (`client.rs`) and fixed
//! buffers. One finding shaped `client.rs`: asking rustls for its next state costs about as
//! much as decrypting a small record, so the session does not ask when no complete record has
//! arrived (`TlsClient::may_progress`); before that, one record per read measured 1.17-1.20
//! times the buffered client's time.
//!
//! The chosen client alone (`cargo bench --bench tls`, the quieter of two runs on the same
//! machine; the noisier one measured up to twice these times):
//! 16 KiB records 4.0 GiB/s (64 KiB reads) and 4.2 GiB/s (one per read); ~200 B records
//! 611 MiB/s, 3.6 M records/s (64 KiB reads) and 572 MiB/s, 3.4 M records/s (one per read);
//! handshake in memory, both ends in one thread: full TLS 1.3 537 us, full TLS 1.2 536 us,
//! resumed TLS 1.3 318 us.

mod client;
mod error;
mod records;
mod settings;

pub use client::{
    ReadOutcome, TlsClient, INCOMING_BYTES, MAX_RECORD_PLAINTEXT_BYTES, MAX_RECORD_WIRE_BYTES,
    OUTGOING_BYTES, UNSENT_BYTES,
};
pub use error::{TlsConfigError, TlsError};
pub use settings::{server_name, TlsSettings, TlsVersions, TrustAnchorCounts};
