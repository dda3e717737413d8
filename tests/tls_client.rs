//! `tls::TlsClient` against a rustls server: in memory (bytes shuttled between the two in a loop)
//! for the handshake, data and every failure a venue can cause, and once over a loopback TCP
//! socket pair to show the buffer-driving API over a real socket.
//!
//! Certificates are generated with rcgen for each test: a throwaway CA whose PEM file is written
//! to a temporary directory and given to the client as `tls.extra_ca_file`, as a simulator's CA
//! would be.

use proptest::prelude::*;
use rcgen::{date_time_ymd, BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    AlertDescription, ClientConfig, ProtocolVersion, RootCertStore, ServerConfig, ServerConnection,
    SupportedProtocolVersion,
};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use tickwire::tls::{
    server_name, ReadOutcome, TlsClient, TlsConfigError, TlsError, TlsSettings, TlsVersions,
};

const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
const BOTH: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A throwaway certificate authority.
struct Ca {
    certificate: rcgen::Certificate,
    key: KeyPair,
}

/// When a server certificate is valid.
#[derive(Clone, Copy)]
enum Validity {
    /// rcgen's default: 1975 to 4096.
    Always,
    /// 2000 to 2001.
    Expired,
    /// 2090 to 2100.
    NotYet,
}

/// A server's certificate chain and key.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key_pkcs8: Vec<u8>,
}

impl Ca {
    /// A CA with a name of its own, as distinct CAs have.
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::named(&format!("tickwire test CA {} {number}", std::process::id()))
    }

    fn named(common_name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        let certificate = params.self_signed(&key).expect("CA certificate");
        Self { certificate, key }
    }

    /// A server certificate for `names` (DNS names or IP addresses, as rcgen reads them).
    fn issue(&self, names: &[&str], validity: Validity) -> Identity {
        let key = KeyPair::generate().expect("server key");
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("server params");
        match validity {
            Validity::Always => {}
            Validity::Expired => {
                params.not_before = date_time_ymd(2000, 1, 1);
                params.not_after = date_time_ymd(2001, 1, 1);
            }
            Validity::NotYet => {
                params.not_before = date_time_ymd(2090, 1, 1);
                params.not_after = date_time_ymd(2100, 1, 1);
            }
        }
        let certificate = params
            .signed_by(&key, &self.certificate, &self.key)
            .expect("server certificate");
        Identity {
            chain: vec![certificate.der().clone()],
            key_pkcs8: key.serialize_der(),
        }
    }

    fn pem(&self) -> String {
        self.certificate.pem()
    }
}

/// A CA PEM file in a temporary directory, removed when dropped.
struct CaFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn write_ca_file(contents: &str) -> CaFile {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("venue-ca.pem");
    std::fs::write(&path, contents).expect("write CA file");
    CaFile { _dir: dir, path }
}

/// A client configuration that trusts `ca` through an extra CA file.
fn client_config(ca: &Ca, versions: TlsVersions) -> Arc<ClientConfig> {
    let file = write_ca_file(&ca.pem());
    TlsSettings::new()
        .extra_ca_file(&file.path)
        .versions(versions)
        .build()
        .expect("client config")
}

fn server_config(
    identity: &Identity,
    versions: &[&'static SupportedProtocolVersion],
) -> Arc<ServerConfig> {
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .expect("server versions")
        .with_no_client_auth()
        .with_single_cert(
            identity.chain.clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_pkcs8.clone())),
        )
        .expect("server config");
    Arc::new(config)
}

fn name(text: &str) -> ServerName<'static> {
    server_name(text, None).expect("a valid server name")
}

/// Client and server, connected by a loop that moves bytes between them.
struct Pair {
    client: TlsClient,
    server: ServerConnection,
    server_error: Option<rustls::Error>,
}

impl Pair {
    /// A client and server for `localhost` under a fresh CA, TLS 1.2 or 1.3, handshake done.
    fn connected() -> Self {
        let ca = Ca::new();
        let identity = ca.issue(&["localhost"], Validity::Always);
        let mut pair = Pair::new(
            client_config(&ca, TlsVersions::default()),
            "localhost",
            server_config(&identity, BOTH),
        );
        pair.run(&mut Vec::new()).expect("handshake");
        pair
    }

    fn new(client_config: Arc<ClientConfig>, server_name: &str, server: Arc<ServerConfig>) -> Self {
        Self {
            client: TlsClient::new(client_config, name(server_name)).expect("client"),
            server: ServerConnection::new(server).expect("server"),
            server_error: None,
        }
    }

    /// Moves bytes both ways until neither side has anything to send, or the client fails.
    /// Plaintext the client receives is appended to `received`.
    fn run(&mut self, received: &mut Vec<u8>) -> Result<(), TlsError> {
        let mut wire = Vec::new();
        let mut plaintext = vec![0_u8; 16 * 1024];
        for _ in 0..10_000 {
            wire.clear();
            self.client.write_tls_to_vec(&mut wire);
            let client_sent = !wire.is_empty();
            let mut rest = &wire[..];
            while !rest.is_empty() && self.server_error.is_none() {
                match self.server.read_tls(&mut rest) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if let Err(error) = self.server.process_new_packets() {
                            self.server_error = Some(error);
                        }
                    }
                }
            }

            wire.clear();
            while self.server.wants_write() {
                self.server.write_tls(&mut wire).expect("server write");
            }
            let server_sent = !wire.is_empty();
            let mut rest = &wire[..];
            loop {
                let taken = self.client.feed_tls(rest)?;
                rest = &rest[taken..];
                drain(&mut self.client, &mut plaintext, received)?;
                if rest.is_empty() {
                    break;
                }
            }
            if !client_sent && !server_sent {
                return Ok(());
            }
        }
        panic!("the in-memory exchange did not settle");
    }

    /// Server plaintext to the client, then the exchange.
    fn server_sends(&mut self, data: &[u8], received: &mut Vec<u8>) -> Result<(), TlsError> {
        self.server.writer().write_all(data).expect("server write");
        self.run(received)
    }

    /// What the server has received so far.
    fn server_received(&mut self) -> Vec<u8> {
        let mut received = Vec::new();
        match self.server.reader().read_to_end(&mut received) {
            Ok(_) => {}
            Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::WouldBlock),
        }
        received
    }
}

/// Reads the client's plaintext until it has none.
fn drain(
    client: &mut TlsClient,
    plaintext: &mut [u8],
    received: &mut Vec<u8>,
) -> Result<(), TlsError> {
    while let ReadOutcome::Data(count) = client.read_plaintext(plaintext)? {
        received.extend_from_slice(&plaintext[..count]);
    }
    Ok(())
}

/// The client's error for a server with `identity`, reached as `server_name`.
fn handshake_error(ca: &Ca, identity: &Identity, server_name: &str) -> TlsError {
    let mut pair = Pair::new(
        client_config(ca, TlsVersions::default()),
        server_name,
        server_config(identity, BOTH),
    );
    pair.run(&mut Vec::new())
        .expect_err("the handshake should fail")
}

#[test]
fn handshake_then_data_both_ways_on_tls13_and_tls12() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    for (versions, expected) in [
        (TLS13, ProtocolVersion::TLSv1_3),
        (TLS12, ProtocolVersion::TLSv1_2),
    ] {
        let mut pair = Pair::new(
            client_config(&ca, TlsVersions::default()),
            "localhost",
            server_config(&identity, versions),
        );
        // Written before the handshake, as the WebSocket upgrade is: held until it may go.
        let request = b"GET /stream HTTP/1.1\r\nHost: localhost\r\n\r\n";
        assert_eq!(pair.client.write_plaintext(request), Ok(request.len()));
        assert!(pair.client.is_handshaking());
        let mut received = Vec::new();
        pair.run(&mut received).expect("handshake");
        assert!(!pair.client.is_handshaking());
        assert_eq!(pair.client.protocol_version(), Some(expected));
        assert_eq!(pair.server.server_name(), Some("localhost"), "SNI is sent");
        assert_eq!(pair.server_received(), request);

        let response = b"HTTP/1.1 101 Switching Protocols\r\n\r\n";
        pair.server_sends(response, &mut received).expect("data");
        assert_eq!(received, response);

        pair.client.write_plaintext(b"ping").expect("write");
        pair.run(&mut received).expect("data");
        assert_eq!(pair.server_received(), b"ping");
    }
}

#[test]
fn ten_mib_arrive_intact_through_small_reads_and_odd_buffers() {
    let mut pair = Pair::connected();
    pair.server.set_buffer_limit(None);

    // Counter bytes with a multiplier, so that a dropped, repeated or reordered piece shows.
    let stream: Vec<u8> = (0..10 * 1024 * 1024_u32)
        .map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    pair.server
        .writer()
        .write_all(&stream)
        .expect("server write");
    pair.server.send_close_notify();
    let mut ciphertext = Vec::new();
    while pair.server.wants_write() {
        pair.server
            .write_tls(&mut ciphertext)
            .expect("server write");
    }
    assert!(
        ciphertext.len() > stream.len(),
        "records are 16 KiB, split by the server"
    );

    // Socket reads that cut records anywhere; a plaintext buffer smaller than a record.
    let mut received = Vec::with_capacity(stream.len());
    let mut plaintext = vec![0_u8; 7001];
    let mut outcome = ReadOutcome::WouldBlock;
    for mut piece in ciphertext.chunks(65_521) {
        while !piece.is_empty() {
            let taken = pair.client.feed_tls(piece).expect("feed");
            piece = &piece[taken..];
            loop {
                outcome = pair.client.read_plaintext(&mut plaintext).expect("read");
                match outcome {
                    ReadOutcome::Data(count) => received.extend_from_slice(&plaintext[..count]),
                    _ => break,
                }
            }
        }
    }
    assert_eq!(outcome, ReadOutcome::CloseNotify);
    assert!(
        received == stream,
        "the 10 MiB read back differ from those sent"
    );
    // Bytes after close_notify are taken and ignored.
    assert_eq!(pair.client.feed_tls(b"ignored"), Ok(7));
}

#[test]
fn a_large_write_goes_out_piece_by_piece() {
    let mut pair = Pair::connected();

    // More than the session holds (16 KiB unsent, 64 KiB of ciphertext): the writer takes what
    // fits, the caller sends and comes back, as the network loop would.
    let message: Vec<u8> = (0..1024 * 1024_u32)
        .map(|index| (index % 253) as u8)
        .collect();
    let mut rest = &message[..];
    let mut wire = [0_u8; 4096];
    let mut received = Vec::new();
    while !rest.is_empty() || pair.client.wants_write() {
        let taken = pair.client.write_plaintext(rest).expect("write");
        rest = &rest[taken..];
        let count = pair.client.write_tls(&mut wire);
        let mut ciphertext = &wire[..count];
        while !ciphertext.is_empty() {
            pair.server.read_tls(&mut ciphertext).expect("server read");
            pair.server.process_new_packets().expect("server");
        }
        received.extend_from_slice(&pair.server_received());
        assert!(taken > 0 || count > 0, "no progress");
    }
    assert_eq!(received.len(), message.len());
    assert!(
        received == message,
        "the server received other bytes than those written"
    );
}

#[test]
fn writing_while_received_data_waits_unread_loses_nothing() {
    let mut pair = Pair::connected();

    // 80 KiB arrive and are fed, but not read, when the client has to answer (a pong).
    let data: Vec<u8> = (0..80 * 1024_u32)
        .map(|index| (index % 241) as u8)
        .collect();
    pair.server.set_buffer_limit(None);
    pair.server.writer().write_all(&data).expect("server write");
    let mut ciphertext = Vec::new();
    while pair.server.wants_write() {
        pair.server
            .write_tls(&mut ciphertext)
            .expect("server write");
    }
    let mut rest = &ciphertext[..];
    let mut fed = 0;
    while !rest.is_empty() {
        let taken = pair.client.feed_tls(rest).expect("feed");
        if taken == 0 {
            break;
        }
        fed += taken;
        rest = &rest[taken..];
    }
    assert!(fed > 0);
    assert_eq!(pair.client.write_plaintext(b"pong"), Ok(4));
    let mut wire = Vec::new();
    assert!(
        pair.client.write_tls_to_vec(&mut wire) > 0,
        "the pong goes out at once"
    );
    pair.server.read_tls(&mut &wire[..]).expect("server read");
    pair.server.process_new_packets().expect("server");
    assert_eq!(pair.server_received(), b"pong");

    // Then everything received reads back in order.
    let mut received = Vec::new();
    let mut plaintext = vec![0_u8; 3000];
    loop {
        while let ReadOutcome::Data(count) =
            pair.client.read_plaintext(&mut plaintext).expect("read")
        {
            received.extend_from_slice(&plaintext[..count]);
        }
        if rest.is_empty() {
            break;
        }
        let taken = pair.client.feed_tls(rest).expect("feed");
        rest = &rest[taken..];
    }
    assert!(
        received == data,
        "the data read back differ from those sent"
    );
}

#[test]
fn a_key_update_from_the_server_is_answered() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let mut pair = Pair::new(
        client_config(&ca, TlsVersions::default()),
        "localhost",
        server_config(&identity, TLS13),
    );
    let mut received = Vec::new();
    pair.run(&mut received).expect("handshake");
    // The server's KeyUpdate asks the client to update its keys too (RFC 8446 section 4.6.3).
    pair.server.refresh_traffic_keys().expect("key update");
    pair.server_sends(b"after the update", &mut received)
        .expect("data");
    assert_eq!(received, b"after the update");
    pair.client.write_plaintext(b"reply").expect("write");
    pair.run(&mut received).expect("data");
    assert_eq!(pair.server_received(), b"reply");
    assert!(pair.server_error.is_none(), "{:?}", pair.server_error);
}

#[test]
fn an_ip_address_is_verified_against_ip_sans_and_not_sent_as_sni() {
    let ca = Ca::new();
    let identity = ca.issue(&["127.0.0.1"], Validity::Always);
    let mut pair = Pair::new(
        client_config(&ca, TlsVersions::default()),
        "127.0.0.1",
        server_config(&identity, BOTH),
    );
    pair.run(&mut Vec::new()).expect("handshake");
    assert!(!pair.client.is_handshaking());
    assert_eq!(pair.server.server_name(), None, "no SNI for an IP address");
}

#[test]
fn an_ip_address_missing_from_the_certificate_is_a_name_mismatch() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let error = handshake_error(&ca, &identity, "127.0.0.1");
    assert_eq!(
        error,
        TlsError::NameMismatch {
            expected: "127.0.0.1".to_owned(),
            presented: vec!["localhost".to_owned()],
        }
    );
}

#[test]
fn a_certificate_for_another_name_says_both_names() {
    let ca = Ca::new();
    let identity = ca.issue(&["wrong.example", "10.1.2.3"], Validity::Always);
    let error = handshake_error(&ca, &identity, "localhost");
    assert!(matches!(error, TlsError::NameMismatch { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the server's certificate is not valid for \"localhost\" (the name this client verifies: \
         the URL's host or tls.sni); it is valid for \"wrong.example\", \"10.1.2.3\""
    );
}

#[test]
fn an_expired_certificate_says_when_it_expired() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Expired);
    let error = handshake_error(&ca, &identity, "localhost");
    assert!(
        matches!(
            error,
            TlsError::CertificateExpired {
                not_after_unix_s: Some(978_307_200),
                now_unix_s: Some(_)
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("the server's certificate expired at 2001-01-01 00:00:00 UTC;"),
        "{message}"
    );
}

#[test]
fn a_certificate_not_valid_yet_points_at_the_clock() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::NotYet);
    let error = handshake_error(&ca, &identity, "localhost");
    assert!(
        matches!(error, TlsError::CertificateNotYetValid { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("check this host's clock"),
        "{error}"
    );
}

#[test]
fn a_certificate_from_another_ca_is_untrusted() {
    let trusted = Ca::new();
    let other = Ca::new();
    let identity = other.issue(&["localhost"], Validity::Always);
    let error = handshake_error(&trusted, &identity, "localhost");
    assert_eq!(error, TlsError::UntrustedCertificate);
    assert_eq!(
        error.to_string(),
        "the server's certificate is not signed by a trusted CA; for a local simulator set \
         tls.extra_ca_file to the simulator's CA certificate (PEM)"
    );
}

#[test]
fn a_regenerated_ca_with_the_same_name_is_a_key_mismatch() {
    let old = Ca::named("tickwire simulator CA");
    let regenerated = Ca::named("tickwire simulator CA");
    let identity = regenerated.issue(&["localhost"], Validity::Always);
    let error = handshake_error(&old, &identity, "localhost");
    assert_eq!(error, TlsError::CaKeyMismatch);
    assert!(error.to_string().contains("tls.extra_ca_file"), "{error}");
}

#[test]
fn without_the_extra_ca_a_private_ca_is_untrusted() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let config = TlsSettings::new()
        .build()
        .expect("platform and webpki roots");
    let mut pair = Pair::new(config, "localhost", server_config(&identity, BOTH));
    let error = pair.run(&mut Vec::new()).expect_err("untrusted");
    assert_eq!(error, TlsError::UntrustedCertificate);
    // The server is told why (RFC 8446 section 6.2: unknown_ca).
    let mut alert = Vec::new();
    assert!(
        pair.client.write_tls_to_vec(&mut alert) > 0,
        "an alert is queued"
    );
    pair.server.read_tls(&mut &alert[..]).expect("server read");
    pair.server_error = pair.server.process_new_packets().err();
    assert!(
        matches!(
            pair.server_error,
            Some(rustls::Error::AlertReceived(AlertDescription::UnknownCA))
        ),
        "{:?}",
        pair.server_error
    );
}

#[test]
fn a_ca_file_with_several_certificates_trusts_each() {
    let first = Ca::new();
    let second = Ca::new();
    let file = write_ca_file(&format!("{}\n{}", first.pem(), second.pem()));
    let settings = TlsSettings::new().extra_ca_file(&file.path);
    let (_, counts) = settings.trust_anchors().expect("two CAs");
    assert_eq!(counts.extra, 2);
    let identity = second.issue(&["localhost"], Validity::Always);
    let mut pair = Pair::new(
        settings.build().expect("config"),
        "localhost",
        server_config(&identity, BOTH),
    );
    pair.run(&mut Vec::new()).expect("handshake");
}

#[test]
fn server_tls12_against_client_tls13_only_is_a_protocol_version_alert() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let mut pair = Pair::new(
        client_config(&ca, TlsVersions::Tls13Only),
        "localhost",
        server_config(&identity, TLS12),
    );
    let error = pair.run(&mut Vec::new()).expect_err("no common version");
    assert_eq!(
        error,
        TlsError::AlertReceived {
            alert: AlertDescription::ProtocolVersion
        }
    );
    assert_eq!(
        error.to_string(),
        "the server sent the TLS alert ProtocolVersion; the server and this client have no TLS \
         version in common"
    );
}

#[test]
fn a_server_requiring_a_client_certificate_sends_an_alert() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let mut client_roots = RootCertStore::empty();
    client_roots
        .add(ca.certificate.der().clone())
        .expect("CA as client root");
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(client_roots), provider())
        .build()
        .expect("client verifier");
    let server = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(TLS13)
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            identity.chain.clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_pkcs8.clone())),
        )
        .expect("server config");
    let mut pair = Pair::new(
        client_config(&ca, TlsVersions::default()),
        "localhost",
        Arc::new(server),
    );
    let error = pair
        .run(&mut Vec::new())
        .expect_err("client certificate required");
    assert_eq!(
        error,
        TlsError::AlertReceived {
            alert: AlertDescription::CertificateRequired
        }
    );
    assert!(
        error.to_string().contains("requires a client certificate"),
        "{error}"
    );
}

#[test]
fn an_http_answer_is_not_tls() {
    let ca = Ca::new();
    let mut client = TlsClient::new(
        client_config(&ca, TlsVersions::default()),
        name("localhost"),
    )
    .expect("client");
    let mut hello = Vec::new();
    assert!(
        client.write_tls_to_vec(&mut hello) > 0,
        "the ClientHello is ready"
    );
    let error = client
        .feed_tls(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        .expect_err("not TLS");
    assert!(matches!(error, TlsError::NotTls { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message
            .starts_with("the server did not answer with TLS (it sent \"HTTP/1.1 400 Bad Request"),
        "{message}"
    );
    // The session stays failed.
    assert!(client.feed_tls(b"more").is_err());
}

#[test]
fn a_few_non_tls_bytes_are_not_tls_at_once_or_at_eof() {
    let ca = Ca::new();
    let config = client_config(&ca, TlsVersions::default());
    // rustls rejects the first byte (no such record type) without waiting for more.
    let mut client = TlsClient::new(Arc::clone(&config), name("localhost")).expect("client");
    let not_tls = TlsError::NotTls {
        first_bytes: "SSH".to_owned(),
    };
    assert_eq!(client.feed_tls(b"SSH"), Err(not_tls.clone()));
    assert_eq!(client.feed_eof(), Err(not_tls));

    // A valid record type that no server sends first, then the end: only the bytes tell.
    let mut client = TlsClient::new(config, name("localhost")).expect("client");
    assert_eq!(client.feed_tls(&[23]), Ok(1));
    assert_eq!(
        client.feed_eof(),
        Err(TlsError::NotTls {
            first_bytes: "\\x17".to_owned()
        })
    );
}

#[test]
fn eof_during_the_handshake_is_reported_as_such() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    // Silence, then the end of the stream.
    let mut client = TlsClient::new(
        client_config(&ca, TlsVersions::default()),
        name("localhost"),
    )
    .expect("client");
    assert_eq!(client.feed_eof(), Err(TlsError::PeerClosedDuringHandshake));

    // Half of the server's first flight, then the end.
    let mut client = TlsClient::new(
        client_config(&ca, TlsVersions::default()),
        name("localhost"),
    )
    .expect("client");
    let mut server = ServerConnection::new(server_config(&identity, BOTH)).expect("server");
    let mut wire = Vec::new();
    client.write_tls_to_vec(&mut wire);
    server.read_tls(&mut &wire[..]).expect("server read");
    server.process_new_packets().expect("server");
    wire.clear();
    server.write_tls(&mut wire).expect("server write");
    let half = wire.len() / 2;
    assert_eq!(client.feed_tls(&wire[..half]), Ok(half));
    assert!(client.is_handshaking());
    assert_eq!(client.feed_eof(), Err(TlsError::PeerClosedDuringHandshake));
    assert!(TlsError::PeerClosedDuringHandshake
        .to_string()
        .contains("closed the connection during the TLS handshake"));
}

#[test]
fn eof_without_close_notify_after_data_is_eof_not_close_notify() {
    let mut pair = Pair::connected();
    pair.server
        .writer()
        .write_all(b"last")
        .expect("server write");
    let mut wire = Vec::new();
    pair.server.write_tls(&mut wire).expect("server write");
    assert_eq!(pair.client.feed_tls(&wire), Ok(wire.len()));
    assert_eq!(pair.client.feed_eof(), Ok(()));
    let mut plaintext = [0_u8; 64];
    assert_eq!(
        pair.client.read_plaintext(&mut plaintext),
        Ok(ReadOutcome::Data(4))
    );
    assert_eq!(&plaintext[..4], b"last");
    assert_eq!(
        pair.client.read_plaintext(&mut plaintext),
        Ok(ReadOutcome::Eof)
    );
}

#[test]
fn close_notify_from_the_client_reaches_the_server() {
    let mut pair = Pair::connected();
    pair.client.send_close_notify();
    assert!(pair.client.wants_write());
    // Taken through a buffer smaller than the alert record, a few bytes at a time.
    let mut wire = Vec::new();
    let mut small = [0_u8; 5];
    loop {
        let count = pair.client.write_tls(&mut small);
        if count == 0 {
            break;
        }
        wire.extend_from_slice(&small[..count]);
    }
    assert!(!pair.client.wants_write());
    pair.server.read_tls(&mut &wire[..]).expect("server read");
    let state = pair.server.process_new_packets().expect("server");
    assert!(state.peer_has_closed());
}

#[test]
fn ca_file_errors_name_the_file() {
    let missing = TlsSettings::new()
        .extra_ca_file("/nonexistent/venue-ca.pem")
        .build()
        .expect_err("missing file");
    assert!(matches!(missing, TlsConfigError::CaFileUnreadable { .. }));
    assert!(missing
        .to_string()
        .starts_with("tls.extra_ca_file /nonexistent/venue-ca.pem: cannot read it: "));

    let empty = write_ca_file("");
    let error = TlsSettings::new()
        .extra_ca_file(&empty.path)
        .build()
        .expect_err("empty file");
    assert!(matches!(error, TlsConfigError::CaFileEmpty { .. }));
    assert_eq!(
        error.to_string(),
        format!(
            "tls.extra_ca_file {}: no certificate in it; expected one or more PEM blocks \
             starting with -----BEGIN CERTIFICATE-----",
            empty.path.display()
        )
    );

    // A key alone is no certificate.
    let key_only = write_ca_file(&KeyPair::generate().expect("key").serialize_pem());
    let error = TlsSettings::new()
        .extra_ca_file(&key_only.path)
        .build()
        .expect_err("no certificate");
    assert!(
        matches!(error, TlsConfigError::CaFileEmpty { .. }),
        "{error:?}"
    );

    let truncated = write_ca_file("-----BEGIN CERTIFICATE-----\nMIIB\n");
    let error = TlsSettings::new()
        .extra_ca_file(&truncated.path)
        .build()
        .expect_err("truncated PEM");
    assert!(
        matches!(error, TlsConfigError::CaFileNotPem { .. }),
        "{error:?}"
    );
    assert!(error
        .to_string()
        .contains(&truncated.path.display().to_string()));

    let not_der = write_ca_file("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    let error = TlsSettings::new()
        .extra_ca_file(&not_der.path)
        .build()
        .expect_err("not a certificate");
    assert!(
        matches!(
            error,
            TlsConfigError::CaCertificateUnusable { number: 1, .. }
        ),
        "{error:?}"
    );
}

proptest! {
    // No regression file: this test may only write under tests/tls_*.rs; a failure prints its
    // input, to be pinned as a plain test.
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever a server sends, during the handshake or after it, the client answers with a
    /// value (data, nothing, or an error), never a panic.
    #[test]
    fn arbitrary_server_bytes_never_panic(
        first in proptest::collection::vec(any::<u8>(), 0..600),
        tls_header in any::<bool>(),
        after_handshake in any::<bool>(),
    ) {
        let mut bytes = first;
        if tls_header && bytes.len() >= 5 {
            // Make it look like a record so that the parser gets past the header.
            bytes[0] = 22;
            bytes[1] = 3;
            bytes[2] = 3;
        }
        let mut client = if after_handshake {
            Pair::connected().client
        } else {
            let ca = Ca::new();
            TlsClient::new(client_config(&ca, TlsVersions::default()), name("localhost"))
                .expect("client")
        };
        let mut plaintext = [0_u8; 256];
        let mut rest = &bytes[..];
        while let Ok(taken) = client.feed_tls(rest) {
            rest = &rest[taken..];
            let _ = client.read_plaintext(&mut plaintext);
            if rest.is_empty() || taken == 0 {
                break;
            }
        }
        let _ = client.feed_eof();
        let _ = client.read_plaintext(&mut plaintext);
        client.write_tls_to_vec(&mut Vec::new());
    }
}

/// The loopback test: a rustls server on a thread with a blocking `StreamOwned`, and the client
/// driven by hand over a blocking `TcpStream` the way the network loop drives it: flush
/// `write_tls`, read the socket, `feed_tls`, `read_plaintext`.
#[test]
fn loopback_tcp_socket_pair() {
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    let ca = Ca::new();
    let identity = ca.issue(&["localhost", "127.0.0.1"], Validity::Always);
    let server_config = server_config(&identity, BOTH);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("address");
    const BODY_BYTES: usize = 1 << 20;

    let server = std::thread::spawn(move || {
        let (socket, _) = listener.accept().expect("accept");
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let connection = ServerConnection::new(server_config).expect("server");
        let mut stream = rustls::StreamOwned::new(connection, socket);
        let mut request = [0_u8; 5];
        stream.read_exact(&mut request).expect("request");
        assert_eq!(&request, b"hello");
        let body: Vec<u8> = (0..BODY_BYTES).map(|index| (index % 251) as u8).collect();
        stream.write_all(&body).expect("body");
        stream.conn.send_close_notify();
        stream.flush().expect("flush");
    });

    let mut socket = TcpStream::connect(address).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut client = TlsClient::new(
        client_config(&ca, TlsVersions::default()),
        name(&address.ip().to_string()),
    )
    .expect("client");
    client.write_plaintext(b"hello").expect("request");

    let mut outgoing = vec![0_u8; 16 * 1024];
    let mut incoming = vec![0_u8; 64 * 1024];
    let mut plaintext = vec![0_u8; 64 * 1024];
    let mut body = Vec::with_capacity(BODY_BYTES);
    'connection: loop {
        while client.wants_write() {
            let count = client.write_tls(&mut outgoing);
            socket.write_all(&outgoing[..count]).expect("send");
        }
        let received = socket.read(&mut incoming).expect("receive");
        if received == 0 {
            client.feed_eof().expect("the handshake was over");
        }
        let mut rest = &incoming[..received];
        loop {
            let taken = client.feed_tls(rest).expect("feed");
            rest = &rest[taken..];
            loop {
                match client.read_plaintext(&mut plaintext).expect("read") {
                    ReadOutcome::Data(count) => body.extend_from_slice(&plaintext[..count]),
                    ReadOutcome::WouldBlock => break,
                    ReadOutcome::CloseNotify => break 'connection,
                    ReadOutcome::Eof => panic!("the server closed without close_notify"),
                }
            }
            if rest.is_empty() {
                break;
            }
        }
    }
    server.join().expect("server thread");
    assert_eq!(body.len(), BODY_BYTES);
    assert!(body
        .iter()
        .enumerate()
        .all(|(index, byte)| *byte == (index % 251) as u8));
}

/// The server's end of a session after its handshake, taken from rustls with its traffic keys,
/// so that tests can send records rustls would not (fragmented or misplaced handshake messages,
/// warnings, padding, damaged records) to the client's own record layer, and read what the
/// client sends back. AES-GCM only (the suites these tests choose).
struct RawServer {
    tls13: bool,
    seal: ring::aead::LessSafeKey,
    seal_iv: [u8; 12],
    seal_seq: u64,
    open: ring::aead::LessSafeKey,
    open_iv: [u8; 12],
    open_seq: u64,
}

impl RawServer {
    /// A client connected to a rustls server offering `suite` only, then the server's keys.
    fn connect(suite: rustls::SupportedCipherSuite) -> (TlsClient, RawServer) {
        let ca = Ca::new();
        let identity = ca.issue(&["localhost"], Validity::Always);
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: vec![suite],
            ..rustls::crypto::ring::default_provider()
        };
        let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                identity.chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_pkcs8.clone())),
            )
            .expect("server config");
        // No tickets: the server's record sequence numbers then stay where the handshake left
        // them, and nothing waits unsent when the keys are taken.
        config.send_tls13_tickets = 0;
        config.enable_secret_extraction = true;
        let mut pair = Pair::new(
            client_config(&ca, TlsVersions::default()),
            "localhost",
            Arc::new(config),
        );
        pair.run(&mut Vec::new()).expect("handshake");
        let tls13 = pair.server.protocol_version() == Some(ProtocolVersion::TLSv1_3);
        let secrets = pair.server.dangerous_extract_secrets().expect("secrets");
        let key = |(seq, secrets): (u64, rustls::ConnectionTrafficSecrets)| {
            let (algorithm, key, iv) = match secrets {
                rustls::ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                    (&ring::aead::AES_128_GCM, key, iv)
                }
                rustls::ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                    (&ring::aead::AES_256_GCM, key, iv)
                }
                _ => panic!("an AES-GCM suite"),
            };
            let key = ring::aead::UnboundKey::new(algorithm, key.as_ref()).expect("key");
            let iv: [u8; 12] = iv.as_ref().try_into().expect("IV");
            (ring::aead::LessSafeKey::new(key), iv, seq)
        };
        let (seal, seal_iv, seal_seq) = key(secrets.tx);
        let (open, open_iv, open_seq) = key(secrets.rx);
        let server = RawServer {
            tls13,
            seal,
            seal_iv,
            seal_seq,
            open,
            open_iv,
            open_seq,
        };
        (pair.client, server)
    }

    fn nonce(iv: [u8; 12], seq: u64) -> [u8; 12] {
        let mut nonce = iv;
        for (byte, seq_byte) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
            *byte ^= seq_byte;
        }
        nonce
    }

    /// One record of `content_type` holding `content` (and, in TLS 1.3, `padding` zeros).
    fn record(&mut self, content_type: u8, content: &[u8], padding: usize) -> Vec<u8> {
        use ring::aead::{Aad, Nonce};
        let seq = self.seal_seq;
        self.seal_seq += 1;
        let nonce = Self::nonce(self.seal_iv, seq);
        if self.tls13 {
            let mut inner = content.to_vec();
            inner.push(content_type);
            inner.resize(inner.len() + padding, 0);
            let length = (inner.len() + 16) as u16;
            let header = [23, 3, 3, (length >> 8) as u8, length as u8];
            self.seal
                .seal_in_place_append_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(header),
                    &mut inner,
                )
                .expect("seal");
            [&header[..], &inner].concat()
        } else {
            let mut aad = [0_u8; 13];
            aad[..8].copy_from_slice(&seq.to_be_bytes());
            aad[8] = content_type;
            aad[9..11].copy_from_slice(&[3, 3]);
            aad[11..].copy_from_slice(&(content.len() as u16).to_be_bytes());
            let mut body = content.to_vec();
            self.seal
                .seal_in_place_append_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(aad),
                    &mut body,
                )
                .expect("seal");
            let length = (8 + body.len()) as u16;
            let header = [content_type, 3, 3, (length >> 8) as u8, length as u8];
            [&header[..], &nonce[4..], &body].concat()
        }
    }

    /// The records the client sent, unprotected: `(content type, content)` each.
    fn read(&mut self, mut wire: &[u8]) -> Vec<(u8, Vec<u8>)> {
        use ring::aead::{Aad, Nonce};
        let mut records = Vec::new();
        while let [outer, 3, 3, high, low, ref rest @ ..] = *wire {
            let length = usize::from(u16::from_be_bytes([high, low]));
            let mut body = rest[..length].to_vec();
            wire = &rest[length..];
            let seq = self.open_seq;
            self.open_seq += 1;
            if self.tls13 {
                let header = [outer, 3, 3, high, low];
                let nonce = Nonce::assume_unique_for_key(Self::nonce(self.open_iv, seq));
                let inner = self
                    .open
                    .open_in_place(nonce, Aad::from(header), &mut body)
                    .expect("the client's record decrypts");
                let end = inner.iter().rposition(|&byte| byte != 0).expect("type");
                records.push((inner[end], inner[..end].to_vec()));
            } else {
                let mut nonce = [0_u8; 12];
                nonce[..4].copy_from_slice(&self.open_iv[..4]);
                nonce[4..].copy_from_slice(&body[..8]);
                let mut aad = [0_u8; 13];
                aad[..8].copy_from_slice(&seq.to_be_bytes());
                aad[8] = outer;
                aad[9..11].copy_from_slice(&[3, 3]);
                aad[11..].copy_from_slice(&((length - 24) as u16).to_be_bytes());
                let plain = self
                    .open
                    .open_in_place(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(aad),
                        &mut body[8..],
                    )
                    .expect("the client's record decrypts");
                records.push((outer, plain.to_vec()));
            }
        }
        assert!(wire.is_empty(), "whole records");
        records
    }
}

const APPLICATION_DATA: u8 = 23;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;

/// Feeds `wire` to the client and reads what it gives: the data, and the error if any.
fn feed(client: &mut TlsClient, wire: &[u8]) -> (Vec<u8>, Option<TlsError>) {
    let mut received = Vec::new();
    let mut plaintext = [0_u8; 4096];
    if let Err(error) = client.feed_tls(wire) {
        return (received, Some(error));
    }
    loop {
        match client.read_plaintext(&mut plaintext) {
            Ok(ReadOutcome::Data(count)) => received.extend_from_slice(&plaintext[..count]),
            Ok(_) => return (received, None),
            Err(error) => return (received, Some(error)),
        }
    }
}

fn sent(client: &mut TlsClient) -> Vec<u8> {
    let mut wire = Vec::new();
    client.write_tls_to_vec(&mut wire);
    wire
}

/// A NewSessionTicket body (RFC 8446 section 4.6.1): a one-minute ticket "abcd".
const TICKET: [u8; 18] = [
    0, 0, 0, 60, 0, 0, 0, 1, 1, 7, 0, 4, b'a', b'b', b'c', b'd', 0, 0,
];

#[test]
fn the_record_layer_takes_padding_fragmented_tickets_and_key_updates() {
    let (mut client, mut server) =
        RawServer::connect(rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256);
    let mut wire = server.record(APPLICATION_DATA, b"padded", 100);
    // A NewSessionTicket in two records, the second with a KeyUpdate that asks for one back.
    let mut ticket = vec![4, 0, 0, TICKET.len() as u8];
    ticket.extend_from_slice(&TICKET);
    wire.extend(server.record(HANDSHAKE, &ticket[..7], 0));
    let mut rest = ticket[7..].to_vec();
    rest.extend_from_slice(&[24, 0, 0, 1, 1]);
    wire.extend(server.record(HANDSHAKE, &rest, 3));
    // Then data under the server's next key: the test derives none, so the client's failure
    // to read it shows it switched; its KeyUpdate and a reply show the other direction.
    let (received, error) = feed(&mut client, &wire);
    assert_eq!(received, b"padded");
    assert_eq!(error, None);
    client.write_plaintext(b"reply").expect("write");
    let wire = sent(&mut client);
    let first = 5 + usize::from(u16::from_be_bytes([wire[3], wire[4]]));
    assert_eq!(
        server.read(&wire[..first]),
        vec![(HANDSHAKE, vec![24, 0, 0, 1, 0])],
        "the client's KeyUpdate (update_not_requested), under its old key"
    );
    assert_eq!(
        wire.len() - first,
        5 + b"reply".len() + 1 + 16,
        "then the reply, under its new key"
    );
    // The server's old key no longer opens anything.
    let (_, error) = feed(&mut client, &server.record(APPLICATION_DATA, b"old key", 0));
    assert_eq!(
        error,
        Some(TlsError::Other {
            message: "cannot decrypt peer's message".to_owned()
        })
    );
}

#[test]
fn misplaced_damaged_and_refused_records_end_the_session_with_the_right_alert() {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    };
    // (suite, what the server sends, the error, the alert the client sends back)
    type Case = (
        rustls::SupportedCipherSuite,
        fn(&mut RawServer) -> Vec<u8>,
        fn(&TlsError) -> bool,
        Option<AlertDescription>,
    );
    let cases: [Case; 7] = [
        // A KeyUpdate with data after it in its record.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| server.record(HANDSHAKE, &[24, 0, 0, 1, 0, 4, 0, 0, 0], 0),
            |error| error.to_string().contains("KeyEpochWithPendingFragment"),
            Some(AlertDescription::UnexpectedMessage),
        ),
        // A damaged record.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| {
                let mut record = server.record(APPLICATION_DATA, b"data", 0);
                let last = record.len() - 1;
                record[last] ^= 1;
                record
            },
            |error| error.to_string().contains("cannot decrypt"),
            Some(AlertDescription::BadRecordMac),
        ),
        // A warning other than user_canceled, which TLS 1.3 outlaws.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| server.record(ALERT, &[1, 80], 0),
            |error| {
                *error
                    == TlsError::AlertReceived {
                        alert: AlertDescription::InternalError,
                    }
            },
            Some(AlertDescription::DecodeError),
        ),
        // A fatal alert: reported, not answered.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| server.record(ALERT, &[2, 40], 0),
            |error| {
                *error
                    == TlsError::AlertReceived {
                        alert: AlertDescription::HandshakeFailure,
                    }
            },
            None,
        ),
        // Too many empty records in a row.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| {
                (0..33)
                    .flat_map(|_| server.record(APPLICATION_DATA, b"", 0))
                    .collect()
            },
            |error| error.to_string().contains("TooManyEmptyFragments"),
            Some(AlertDescription::UnexpectedMessage),
        ),
        // A handshake message TLS 1.3 never sends after the handshake.
        (
            TLS13_AES_256_GCM_SHA384,
            |server| server.record(HANDSHAKE, &[2, 0, 0, 0], 0),
            |error| error.to_string().contains("ServerHello"),
            Some(AlertDescription::UnexpectedMessage),
        ),
        // TLS 1.2: a second renegotiation request.
        (
            TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            |server| {
                let mut wire = server.record(HANDSHAKE, &[0, 0, 0, 0], 0);
                wire.extend(server.record(HANDSHAKE, &[0, 0, 0, 0], 0));
                wire
            },
            |error| error.to_string().contains("TooManyRenegotiationRequests"),
            Some(AlertDescription::NoRenegotiation),
        ),
    ];
    for (index, (suite, send, expected, alert)) in cases.into_iter().enumerate() {
        let (mut client, mut server) = RawServer::connect(suite);
        let wire = send(&mut server);
        let (_, error) = feed(&mut client, &wire);
        let error = error.unwrap_or_else(|| panic!("case {index}: no error"));
        assert!(expected(&error), "case {index}: {error:?}");
        let records = server.read(&sent(&mut client));
        let fatal: Vec<_> = records
            .iter()
            .filter(|(content_type, content)| *content_type == ALERT && content[0] == 2)
            .map(|(_, content)| AlertDescription::from(content[1]))
            .collect();
        assert_eq!(fatal, Vec::from_iter(alert), "case {index}: {records:?}");
        // The session stays failed.
        assert_eq!(client.write_plaintext(b"x"), Err(error), "case {index}");
    }
}

#[test]
fn a_tls12_renegotiation_request_is_refused_with_a_warning_and_data_goes_on() {
    let (mut client, mut server) = RawServer::connect(
        rustls::crypto::ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    );
    let mut wire = server.record(HANDSHAKE, &[0, 0, 0, 0], 0);
    wire.extend(server.record(APPLICATION_DATA, b"still here", 0));
    let (received, error) = feed(&mut client, &wire);
    assert_eq!((received.as_slice(), error), (&b"still here"[..], None));
    client.write_plaintext(b"and here").expect("write");
    assert_eq!(
        server.read(&sent(&mut client)),
        vec![
            (ALERT, vec![1, 100]),
            (APPLICATION_DATA, b"and here".to_vec())
        ],
        "no_renegotiation (a warning), then data"
    );
}

#[test]
fn tickets_the_record_layer_takes_resume_the_next_session() {
    let ca = Ca::new();
    let identity = ca.issue(&["localhost"], Validity::Always);
    let client = client_config(&ca, TlsVersions::default());
    let server = server_config(&identity, TLS13);
    let mut first = Pair::new(Arc::clone(&client), "localhost", Arc::clone(&server));
    first.run(&mut Vec::new()).expect("handshake");
    // The tickets arrive after the client's Finished, so the client's own record layer took
    // them; rustls's session cache, shared through the config, has them.
    first.server_sends(b"data", &mut Vec::new()).expect("data");
    let mut second = Pair::new(client, "localhost", server);
    second.run(&mut Vec::new()).expect("handshake");
    assert_eq!(
        second.server.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
}
