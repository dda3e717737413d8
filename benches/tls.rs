//! TLS benchmarks: decrypting a market-data stream, and the handshake, all in memory.
//!
//! - `tls_decrypt_bytes/*` and `tls_decrypt_records/*`: the same runs, reported as plaintext
//!   bytes per second and as records per second. A server (rustls `ServerConnection`, TLS 1.3,
//!   the `ring` provider's preferred suite, AES-256-GCM) encrypts a stream beforehand; the timed
//!   part feeds its ciphertext to a fresh `TlsClient` and reads the plaintext into a 64 KiB
//!   buffer, as the network loop does. Two streams of the same ~1 MB of Binance messages:
//!   `16k`, 16 KiB records (a server's burst), and `small`, one ~180-byte message per record,
//!   about 200 bytes on the wire (Binance's usual stream). Two ways of feeding them: `64k_reads`
//!   (socket reads of 64 KiB, cutting records anywhere) and `record_reads` (one record per
//!   read, a quiet market).
//! - `tls_handshake/*`: a full TLS 1.3 handshake (X25519, ECDSA P-256 certificate verified
//!   against an extra CA), the same over TLS 1.2, and a resumed TLS 1.3 one; both ends run in
//!   this thread, so the time covers client and server work.
//!
//! The messages are the first of the real capture `../shared/data/binance-futures/
//! btcusdt_20240808.gz` when it is present, else generated `bookTicker` messages of the same size.
//! Every stream is decrypted once and compared with what was sent before anything is timed.
//! Run with `cargo bench --bench tls` (or `tuning/bench -- --bench tls` on tuned cores); the
//! numbers and the comparison that chose this client are in `src/tls/mod.rs`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig, ServerConnection, SupportedProtocolVersion};
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;
use tickwire::tls::{ReadOutcome, TlsClient, TlsSettings};

/// The size of one socket read handed to the client in `64k_reads`, and of the plaintext buffer.
const CHUNK_BYTES: usize = 64 * 1024;
/// The largest TLS plaintext record (RFC 8446 section 5.1).
const RECORD_BYTES: usize = 16 * 1024;
/// Messages per iteration: about 1 MB of plaintext.
const MESSAGES: usize = 6000;

/// A CA, a server certificate for `localhost` it signed, and the configurations of both ends.
struct Pki {
    client: Arc<ClientConfig>,
    server_key: Vec<u8>,
    server_chain: Vec<CertificateDer<'static>>,
    _ca_dir: tempfile::TempDir,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let server_key = KeyPair::generate().expect("server key");
    let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("server params")
        .signed_by(&server_key, &ca, &ca_key)
        .expect("server certificate");

    let ca_dir = tempfile::tempdir().expect("temporary directory");
    let ca_path = ca_dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).expect("write CA file");
    let client = TlsSettings::new()
        .extra_ca_file(&ca_path)
        .build()
        .expect("client config");
    Pki {
        client,
        server_key: server_key.serialize_der(),
        server_chain: vec![server_cert.der().clone()],
        _ca_dir: ca_dir,
    }
}

fn server_config(pki: &Pki, versions: &[&'static SupportedProtocolVersion]) -> Arc<ServerConfig> {
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(versions)
            .expect("server versions")
            .with_no_client_auth()
            .with_single_cert(
                pki.server_chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
            )
            .expect("server config");
    Arc::new(config)
}

/// Runs the handshake to completion in memory, including the server's session tickets, so that
/// what the server writes next is application data only.
fn connect(
    client_config: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
) -> (TlsClient, ServerConnection) {
    let name = ServerName::try_from("localhost").expect("valid name");
    let mut client = TlsClient::new(client_config, name).expect("client");
    let mut server = ServerConnection::new(server).expect("server");
    let mut wire = Vec::new();
    let mut sink = [0_u8; 1];
    for _ in 0..16 {
        wire.clear();
        client.write_tls_to_vec(&mut wire);
        let mut rest = &wire[..];
        while !rest.is_empty() {
            server.read_tls(&mut rest).expect("server read");
            server.process_new_packets().expect("server handshake");
        }
        wire.clear();
        while server.wants_write() {
            server.write_tls(&mut wire).expect("server write");
        }
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let taken = client.feed_tls(rest).expect("client handshake");
            rest = &rest[taken..];
            assert_eq!(
                client.read_plaintext(&mut sink),
                Ok(ReadOutcome::WouldBlock)
            );
        }
        if !client.is_handshaking() && !server.is_handshaking() && wire.is_empty() {
            return (client, server);
        }
    }
    panic!("the in-memory handshake did not finish");
}

/// Feeds every piece, reading all the plaintext after each; calls `sink` with each read.
/// Returns the plaintext byte count.
fn drain<'a>(
    client: &mut TlsClient,
    pieces: impl IntoIterator<Item = &'a [u8]>,
    mut sink: impl FnMut(&[u8]),
) -> usize {
    let mut plaintext = vec![0_u8; CHUNK_BYTES];
    let mut total = 0;
    for mut piece in pieces {
        while !piece.is_empty() {
            let taken = client.feed_tls(piece).expect("feed");
            piece = &piece[taken..];
            while let ReadOutcome::Data(count) =
                client.read_plaintext(&mut plaintext).expect("read")
            {
                sink(&plaintext[..count]);
                total += count;
            }
        }
    }
    total
}

/// Splits ciphertext at record boundaries (5-byte headers, RFC 8446 section 5.1).
fn records_of(mut ciphertext: &[u8]) -> Vec<&[u8]> {
    let mut records = Vec::new();
    while ciphertext.len() >= 5 {
        let length = 5 + usize::from(u16::from_be_bytes([ciphertext[3], ciphertext[4]]));
        let (record, rest) = ciphertext.split_at(length.min(ciphertext.len()));
        records.push(record);
        ciphertext = rest;
    }
    records
}

/// Real Binance messages from the shared capture, else generated ones of the same size.
fn messages() -> Vec<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/binance-futures/btcusdt_20240808.gz");
    if let Ok(file) = std::fs::File::open(&path) {
        let lines = std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines();
        let messages: Vec<Vec<u8>> = lines
            .map_while(Result::ok)
            .filter_map(|line| {
                line.split_once(' ')
                    .map(|(_, json)| json.as_bytes().to_vec())
            })
            // bookTicker and trade: the ~180-byte messages that arrive one per record.
            .filter(|json| json.len() <= 256)
            .take(MESSAGES)
            .collect();
        if messages.len() == MESSAGES {
            eprintln!(
                "messages: the first {MESSAGES} bookTicker/trade of {}",
                path.display()
            );
            return messages;
        }
    }
    eprintln!("messages: generated ({} not found)", path.display());
    (0..MESSAGES as u64)
        .map(|index| {
            format!(
                "{{\"stream\":\"btcusdt@bookTicker\",\"data\":{{\"e\":\"bookTicker\",\
                 \"u\":{},\"s\":\"BTCUSDT\",\"b\":\"61800.20\",\"B\":\"2.507\",\
                 \"a\":\"61800.30\",\"A\":\"2.510\",\"T\":{},\"E\":{}}}}}",
                5_123_107_839_020 + index,
                1_723_161_256_313 + index,
                1_723_161_256_313 + index
            )
            .into_bytes()
        })
        .collect()
}

/// A stream of records and what it decrypts to.
struct Stream {
    name: &'static str,
    records: Vec<Vec<u8>>,
    plaintext: Vec<u8>,
}

fn streams() -> Vec<Stream> {
    let messages = messages();
    let plaintext: Vec<u8> = messages.concat();
    let big_records = plaintext.chunks(RECORD_BYTES).map(<[u8]>::to_vec).collect();
    vec![
        Stream {
            name: "16k",
            records: big_records,
            plaintext: plaintext.clone(),
        },
        Stream {
            name: "small",
            records: messages,
            plaintext,
        },
    ]
}

/// A connected client and the server's ciphertext of `stream` for it.
fn prepare(pki: &Pki, server: &Arc<ServerConfig>, stream: &Stream) -> (TlsClient, Vec<u8>) {
    let (client, mut server) = connect(Arc::clone(&pki.client), Arc::clone(server));
    let mut ciphertext = Vec::new();
    for record in &stream.records {
        let written = server.writer().write(record).expect("server encrypt");
        assert_eq!(written, record.len(), "one write, one record");
        while server.wants_write() {
            server.write_tls(&mut ciphertext).expect("server write");
        }
    }
    (client, ciphertext)
}

/// How the ciphertext is cut into socket reads.
#[derive(Clone, Copy)]
enum Reads {
    Chunks64k,
    OneRecordEach,
}

impl Reads {
    fn name(self) -> &'static str {
        match self {
            Reads::Chunks64k => "64k_reads",
            Reads::OneRecordEach => "record_reads",
        }
    }

    fn pieces(self, ciphertext: &[u8]) -> Vec<&[u8]> {
        match self {
            Reads::Chunks64k => ciphertext.chunks(CHUNK_BYTES).collect(),
            Reads::OneRecordEach => records_of(ciphertext),
        }
    }
}

fn decrypt(c: &mut Criterion) {
    let pki = pki();
    let server = server_config(&pki, &[&rustls::version::TLS13]);
    let streams = streams();
    let reads = [Reads::Chunks64k, Reads::OneRecordEach];
    for stream in &streams {
        for read in reads {
            let (mut client, ciphertext) = prepare(&pki, &server, stream);
            let mut received = Vec::with_capacity(stream.plaintext.len());
            drain(&mut client, read.pieces(&ciphertext), |piece| {
                received.extend_from_slice(piece)
            });
            assert!(
                received == stream.plaintext,
                "{} {}: the plaintext read back differs from what was sent",
                stream.name,
                read.name()
            );
        }
        eprintln!(
            "{}: {} records, {} plaintext bytes per iteration",
            stream.name,
            stream.records.len(),
            stream.plaintext.len()
        );
    }
    for (group_name, per_byte) in [("tls_decrypt_bytes", true), ("tls_decrypt_records", false)] {
        let mut group = c.benchmark_group(group_name);
        for stream in &streams {
            group.throughput(if per_byte {
                Throughput::Bytes(stream.plaintext.len() as u64)
            } else {
                Throughput::Elements(stream.records.len() as u64)
            });
            for read in reads {
                let expected = stream.plaintext.len();
                group.bench_function(format!("{}/{}", stream.name, read.name()), |b| {
                    b.iter_batched(
                        || prepare(&pki, &server, stream),
                        |(mut client, ciphertext)| {
                            let total = drain(&mut client, read.pieces(&ciphertext), |piece| {
                                black_box(piece);
                            });
                            assert_eq!(total, expected);
                            client
                        },
                        BatchSize::PerIteration,
                    )
                });
            }
        }
        group.finish();
    }
}

fn handshake(c: &mut Criterion) {
    let pki = pki();
    let tls13 = server_config(&pki, &[&rustls::version::TLS13]);
    let tls12 = server_config(&pki, &[&rustls::version::TLS12]);
    let mut full = (*pki.client).clone();
    full.resumption = Resumption::disabled();
    let full = Arc::new(full);
    let mut group = c.benchmark_group("tls_handshake");
    group.bench_function("full_tls13", |b| {
        b.iter(|| connect(Arc::clone(&full), Arc::clone(&tls13)))
    });
    group.bench_function("full_tls12", |b| {
        b.iter(|| connect(Arc::clone(&full), Arc::clone(&tls12)))
    });
    // The first connection fills the session cache; every later one resumes.
    drop(connect(Arc::clone(&pki.client), Arc::clone(&tls13)));
    group.bench_function("resumed_tls13", |b| {
        b.iter(|| connect(Arc::clone(&pki.client), Arc::clone(&tls13)))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
}

criterion_group! {
    name = benches;
    config = config();
    targets = decrypt, handshake
}
criterion_main!(benches);
