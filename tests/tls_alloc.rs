//! A `TlsClient` allocates nothing in steady state, in either direction, counted by the
//! integration binary's global allocator (`support::counting_alloc`, which counts the calling
//! thread's allocations only, so other tests running beside this one do not add to it).
//!
//! Until issue 32 rustls 0.23's record layer allocated once per record in each direction: a
//! received record's plaintext was moved into a `Vec` (`CommonState::take_received_plaintext`,
//! `Payload::into_vec`, popped by `ReadTraffic::next_record`), and a sent record was encrypted
//! into one (`MessageEncrypter::encrypt` builds a `PrefixedPayload`, `RecordLayer::
//! encrypt_outgoing`). The session now protects records itself after the handshake
//! (`tls/records.rs`), and this test pins zero for every cipher suite the client offers, after a
//! KeyUpdate too (the KeyUpdate itself, like the handshake and session tickets, may allocate).

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::crypto::ring::cipher_suite;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ProtocolVersion, ServerConfig, ServerConnection, SupportedCipherSuite};
use std::io::{Read, Write};
use std::sync::Arc;
use tickwire::tls::{ReadOutcome, TlsClient, TlsSettings};

use crate::support::counting_alloc::allocations;

const RECORDS: u64 = 1000;

/// A client config trusting a fresh CA, and a server identity that CA signed (ECDSA P-256,
/// which every suite below can use).
struct Pki {
    client: Arc<rustls::ClientConfig>,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
    _dir: tempfile::TempDir,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let server_key = KeyPair::generate().expect("server key");
    let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .signed_by(&server_key, &ca, &ca_key)
        .expect("server certificate");
    let dir = tempfile::tempdir().expect("temporary directory");
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).expect("CA file");
    Pki {
        client: TlsSettings::new()
            .extra_ca_file(&ca_path)
            .build()
            .expect("client config"),
        chain: vec![CertificateDer::from(server_cert.der().to_vec())],
        key: server_key.serialize_der(),
        _dir: dir,
    }
}

/// A server that offers `suite` only.
fn server(pki: &Pki, suite: SupportedCipherSuite) -> ServerConnection {
    let provider = CryptoProvider {
        cipher_suites: vec![suite],
        ..rustls::crypto::ring::default_provider()
    };
    let config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            pki.chain.clone(),
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key.clone())),
        )
        .expect("server config");
    let mut server = ServerConnection::new(Arc::new(config)).expect("server");
    server.set_buffer_limit(None);
    server
}

/// Moves bytes both ways until neither side has anything to send.
fn exchange(client: &mut TlsClient, server: &mut ServerConnection, plaintext: &mut [u8]) {
    let mut wire = Vec::new();
    for _ in 0..16 {
        wire.clear();
        client.write_tls_to_vec(&mut wire);
        let client_sent = !wire.is_empty();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            server.read_tls(&mut rest).expect("server read");
            server.process_new_packets().expect("server");
        }
        wire.clear();
        while server.wants_write() {
            server.write_tls(&mut wire).expect("server write");
        }
        let server_sent = !wire.is_empty();
        assert_eq!(client.feed_tls(&wire), Ok(wire.len()));
        while let ReadOutcome::Data(_) = client.read_plaintext(plaintext).expect("read") {}
        if !client_sent && !server_sent {
            return;
        }
    }
    panic!("the exchange did not settle");
}

/// `RECORDS` server records of one 180-byte message each, fed in one piece and read; then
/// `RECORDS` client writes of one message, each taken out through a fixed buffer (a ping, a
/// subscription). Returns the allocations of each direction.
fn steady_state(client: &mut TlsClient, server: &mut ServerConnection) -> (u64, u64) {
    let message = [b'x'; 180];
    let mut plaintext = vec![0_u8; 64 * 1024];
    for _ in 0..RECORDS {
        server.writer().write_all(&message).expect("server write");
    }
    let mut wire = Vec::new();
    while server.wants_write() {
        server.write_tls(&mut wire).expect("server write");
    }
    let before = allocations();
    let mut rest = &wire[..];
    let mut received = 0;
    while !rest.is_empty() {
        let taken = client.feed_tls(rest).expect("feed");
        rest = &rest[taken..];
        while let ReadOutcome::Data(count) = client.read_plaintext(&mut plaintext).expect("read") {
            assert!(plaintext[..count].iter().all(|&byte| byte == b'x'));
            received += count;
        }
    }
    let receiving = allocations() - before;
    assert_eq!(received as u64, RECORDS * 180);

    let mut outgoing = vec![0_u8; 64 * 1024];
    let mut sent = Vec::with_capacity(1024 * 1024);
    let before = allocations();
    for _ in 0..RECORDS {
        assert_eq!(client.write_plaintext(&message), Ok(message.len()));
        let count = client.write_tls(&mut outgoing);
        sent.extend_from_slice(&outgoing[..count]);
    }
    let sending = allocations() - before;

    // The server reads what was sent (after counting: the server allocates).
    let mut rest = &sent[..];
    let mut delivered = Vec::new();
    while !rest.is_empty() {
        server.read_tls(&mut rest).expect("server read");
        server.process_new_packets().expect("server");
        let _would_block = server.reader().read_to_end(&mut delivered);
    }
    assert_eq!(delivered.len() as u64, RECORDS * 180);
    assert!(delivered.iter().all(|&byte| byte == b'x'));
    (receiving, sending)
}

#[test]
fn steady_state_allocates_nothing_on_any_suite_in_either_direction() {
    let pki = pki();
    for (suite, version) in [
        (
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            ProtocolVersion::TLSv1_3,
        ),
        (
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            ProtocolVersion::TLSv1_3,
        ),
        (
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            ProtocolVersion::TLSv1_3,
        ),
        (
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ProtocolVersion::TLSv1_2,
        ),
        (
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ProtocolVersion::TLSv1_2,
        ),
        (
            cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ProtocolVersion::TLSv1_2,
        ),
    ] {
        let name = format!("{:?}", suite.suite());
        let mut client = TlsClient::new(
            Arc::clone(&pki.client),
            ServerName::try_from("localhost").expect("name"),
        )
        .expect("client");
        let mut server = server(&pki, suite);
        // The handshake and the server's session tickets, in memory: these may allocate.
        let mut plaintext = vec![0_u8; 64 * 1024];
        exchange(&mut client, &mut server, &mut plaintext);
        assert!(!client.is_handshaking(), "{name}");
        assert_eq!(client.protocol_version(), Some(version), "{name}");
        assert_eq!(
            server.negotiated_cipher_suite().map(|s| s.suite()),
            Some(suite.suite())
        );

        let (receiving, sending) = steady_state(&mut client, &mut server);
        println!("{name}: {RECORDS} records received: {receiving} allocations; sent: {sending}");
        assert_eq!(receiving, 0, "{name}: receiving allocated");
        assert_eq!(sending, 0, "{name}: sending allocated");

        if version == ProtocolVersion::TLSv1_3 {
            // A KeyUpdate that asks for one back (which may allocate), then steady state again
            // under the new keys.
            server.refresh_traffic_keys().expect("key update");
            server.writer().write_all(b"after").expect("server write");
            exchange(&mut client, &mut server, &mut plaintext);
            let (receiving, sending) = steady_state(&mut client, &mut server);
            assert_eq!(
                (receiving, sending),
                (0, 0),
                "{name}: after a KeyUpdate, allocations receiving and sending"
            );
        }
    }
}
