//! How often a `TlsClient` allocates in steady state, counted by a global allocator that
//! wraps the system one. A test binary of its own, because the allocator is process-wide.
//!
//! tickwire's code allocates nothing after `TlsClient::new`. rustls 0.23 allocates once per
//! record in each direction: a received record's plaintext is moved into a `Vec`
//! (`CommonState::take_received_plaintext`, `Payload::into_vec`) before the unbuffered API
//! hands it over, and a sent record is encrypted into a `Vec` (`RecordLayer::encrypt_outgoing`)
//! before it is copied into the caller's buffer. This test pins both numbers, so that a change
//! on either side shows.

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::sync::Arc;
use tickwire::tls::{ReadOutcome, TlsClient, TlsSettings};

use crate::support::counting_alloc;

use counting_alloc::allocations;

const RECORDS: u64 = 1000;

#[test]
fn steady_state_allocations_are_rustls_one_per_record() {
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
    let client_config = TlsSettings::new()
        .extra_ca_file(&ca_path)
        .build()
        .expect("client config");
    let server_config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(server_cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
            )
            .expect("server config");

    let mut client = TlsClient::new(
        client_config,
        ServerName::try_from("localhost").expect("name"),
    )
    .expect("client");
    let mut server = ServerConnection::new(Arc::new(server_config)).expect("server");
    server.set_buffer_limit(None);

    // The handshake, and the server's session tickets, in memory.
    let mut wire = Vec::new();
    let mut plaintext = vec![0_u8; 64 * 1024];
    for _ in 0..8 {
        wire.clear();
        client.write_tls_to_vec(&mut wire);
        server.read_tls(&mut &wire[..]).expect("server read");
        server.process_new_packets().expect("server");
        wire.clear();
        server.write_tls(&mut wire).expect("server write");
        assert_eq!(client.feed_tls(&wire), Ok(wire.len()));
        assert_eq!(
            client.read_plaintext(&mut plaintext),
            Ok(ReadOutcome::WouldBlock)
        );
    }
    assert!(!client.is_handshaking());

    // Receiving: RECORDS records of one 180-byte message each, fed in one piece, after one
    // record that warms up (rustls's plaintext queue allocates its ring on first use).
    let message = [b'x'; 180];
    for _ in 0..=RECORDS {
        server.writer().write_all(&message).expect("server write");
    }
    wire.clear();
    while server.wants_write() {
        server.write_tls(&mut wire).expect("server write");
    }
    let warm_up = 5 + 180 + 1 + 16;
    assert_eq!(client.feed_tls(&wire[..warm_up]), Ok(warm_up));
    assert_eq!(
        client.read_plaintext(&mut plaintext),
        Ok(ReadOutcome::Data(180))
    );
    let before = allocations();
    let mut rest = &wire[warm_up..];
    let mut received = 0;
    while !rest.is_empty() {
        let taken = client.feed_tls(rest).expect("feed");
        rest = &rest[taken..];
        while let ReadOutcome::Data(count) = client.read_plaintext(&mut plaintext).expect("read") {
            received += count;
        }
    }
    let receive_allocations = allocations() - before;
    assert_eq!(received as u64, RECORDS * 180);
    println!("receiving {RECORDS} records: {receive_allocations} allocations");
    assert_eq!(
        receive_allocations, RECORDS,
        "one per record, inside rustls"
    );

    // Sending: RECORDS writes of one message each, taken out through a fixed buffer into a
    // vector reserved beforehand (so that keeping the bytes allocates nothing).
    let mut outgoing = vec![0_u8; 64 * 1024];
    let mut sent = Vec::with_capacity(1024 * 1024);
    let before = allocations();
    for _ in 0..RECORDS {
        assert_eq!(client.write_plaintext(&message), Ok(message.len()));
        let count = client.write_tls(&mut outgoing);
        sent.extend_from_slice(&outgoing[..count]);
    }
    let send_allocations = allocations() - before;
    println!("sending {RECORDS} records: {send_allocations} allocations");
    assert_eq!(send_allocations, RECORDS, "one per record, inside rustls");

    // The bytes sent are what was written (checked after counting: the server allocates).
    let mut rest = &sent[..];
    let mut delivered = Vec::new();
    while !rest.is_empty() {
        server.read_tls(&mut rest).expect("server read");
        server.process_new_packets().expect("server");
        let _would_block = server.reader().read_to_end(&mut delivered);
    }
    assert_eq!(delivered.len() as u64, RECORDS * 180);
    assert!(delivered.iter().all(|byte| *byte == b'x'));
}
