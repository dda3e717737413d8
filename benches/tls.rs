//! TLS benchmarks: decrypting a market-data stream, and the handshake, all in memory.
//!
//! - `tls_decrypt_bytes/*` and `tls_decrypt_records/*`: the same runs, reported as plaintext
//!   bytes per second and as records per second. A server (rustls `ServerConnection`, TLS 1.3,
//!   the `ring` provider's preferred suite) encrypts a stream beforehand; the timed part feeds its
//!   ciphertext to a fresh `TlsClient` in 64 KiB pieces, as socket reads would hand it over, and
//!   reads the plaintext into a 64 KiB buffer. Two streams: `16k`, 16 KiB records as a server
//!   sends a burst, and `small`, one ~180-byte Binance message per record (about 200 bytes on the
//!   wire), as Binance sends a quiet stream.
//! - `tls_handshake/*`: a full TLS 1.3 handshake (ECDHE, certificate verification) and a resumed
//!   one, both ends in this thread, so the time covers client and server work.
//!
//! The messages are the first of the real capture `../shared/data/binance-futures/
//! btcusdt_20240808.gz` when it is present, else generated `bookTicker` messages of the same size.
//! Every run checks, before timing, that the plaintext read back equals the plaintext sent.
//! Run with `cargo bench --bench tls` (or `tuning/bench -- --bench tls` on tuned cores).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig, ServerConnection};
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;
use tickwire::tls::unbuffered::UnbufferedTlsClient;
use tickwire::tls::{ReadOutcome, TlsClient, TlsSettings};

/// The size of one socket read handed to the client, and of the plaintext buffer.
const CHUNK_BYTES: usize = 64 * 1024;
/// The largest TLS plaintext record (RFC 8446 section 5.1).
const RECORD_BYTES: usize = 16 * 1024;
/// Messages per iteration: about 1 MB of plaintext.
const MESSAGES: usize = 6000;

/// A CA, a server certificate for `localhost` it signed, and the configs of both ends.
struct Pki {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
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

    let server =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("server versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(server_cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
            )
            .expect("server config");
    Pki {
        client,
        server: Arc::new(server),
        _ca_dir: ca_dir,
    }
}

/// The two client implementations under comparison.
trait Client: Sized {
    fn start(config: Arc<ClientConfig>) -> Self;
    fn feed(&mut self, ciphertext: &[u8]) -> usize;
    fn read(&mut self, plaintext: &mut [u8]) -> ReadOutcome;
    fn take_tls(&mut self, out: &mut Vec<u8>);
    fn handshaking(&self) -> bool;
}

fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").expect("valid name")
}

impl Client for TlsClient {
    fn start(config: Arc<ClientConfig>) -> Self {
        TlsClient::new(config, localhost()).expect("client")
    }
    fn feed(&mut self, ciphertext: &[u8]) -> usize {
        self.feed_tls(ciphertext).expect("feed")
    }
    fn read(&mut self, plaintext: &mut [u8]) -> ReadOutcome {
        self.read_plaintext(plaintext).expect("read")
    }
    fn take_tls(&mut self, out: &mut Vec<u8>) {
        self.write_tls_to_vec(out);
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
}

impl Client for UnbufferedTlsClient {
    fn start(config: Arc<ClientConfig>) -> Self {
        UnbufferedTlsClient::new(config, localhost()).expect("client")
    }
    fn feed(&mut self, ciphertext: &[u8]) -> usize {
        self.feed_tls(ciphertext).expect("feed")
    }
    fn read(&mut self, plaintext: &mut [u8]) -> ReadOutcome {
        self.read_plaintext(plaintext).expect("read")
    }
    fn take_tls(&mut self, out: &mut Vec<u8>) {
        self.write_tls_to_vec(out);
    }
    fn handshaking(&self) -> bool {
        self.is_handshaking()
    }
}

/// Feeds all of `ciphertext` in socket-sized pieces and reads the plaintext; calls `sink` with
/// each piece of plaintext. Returns the plaintext byte count.
fn drain<C: Client>(client: &mut C, ciphertext: &[u8], mut sink: impl FnMut(&[u8])) -> usize {
    let mut plaintext = vec![0_u8; CHUNK_BYTES];
    let mut total = 0;
    for mut chunk in ciphertext.chunks(CHUNK_BYTES) {
        while !chunk.is_empty() {
            let taken = client.feed(chunk);
            chunk = &chunk[taken..];
            while let ReadOutcome::Data(count) = client.read(&mut plaintext) {
                sink(&plaintext[..count]);
                total += count;
            }
        }
    }
    total
}

/// Runs the handshake to completion in memory, including the server's session tickets, so that
/// what the server writes next is application data only.
fn connect<C: Client>(pki: &Pki, client_config: Arc<ClientConfig>) -> (C, ServerConnection) {
    let mut client = C::start(client_config);
    let mut server = ServerConnection::new(Arc::clone(&pki.server)).expect("server");
    let mut wire = Vec::new();
    for _ in 0..16 {
        wire.clear();
        client.take_tls(&mut wire);
        let mut rest = &wire[..];
        while !rest.is_empty() {
            server.read_tls(&mut rest).expect("server read");
            server.process_new_packets().expect("server handshake");
        }
        wire.clear();
        while server.wants_write() {
            server.write_tls(&mut wire).expect("server write");
        }
        let mut sink = [0_u8; 1];
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let taken = client.feed(rest);
            rest = &rest[taken..];
            assert_eq!(client.read(&mut sink), ReadOutcome::WouldBlock);
        }
        if !client.handshaking() && !server.is_handshaking() && wire.is_empty() {
            return (client, server);
        }
    }
    panic!("the in-memory handshake did not finish");
}

/// The server's ciphertext for `records` (each written as one TLS record).
fn encrypt(server: &mut ServerConnection, records: &[&[u8]]) -> Vec<u8> {
    let mut wire = Vec::new();
    for record in records {
        let written = server.writer().write(record).expect("server encrypt");
        assert_eq!(written, record.len());
        while server.wants_write() {
            server.write_tls(&mut wire).expect("server write");
        }
    }
    wire
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

fn prepare<C: Client>(pki: &Pki, stream: &Stream) -> (C, Vec<u8>) {
    let (client, mut server) = connect::<C>(pki, Arc::clone(&pki.client));
    let records: Vec<&[u8]> = stream.records.iter().map(Vec::as_slice).collect();
    let ciphertext = encrypt(&mut server, &records);
    (client, ciphertext)
}

/// Checks, before any timing, that the client gives back exactly the plaintext sent.
fn verify<C: Client>(pki: &Pki, stream: &Stream) {
    let (mut client, ciphertext) = prepare::<C>(pki, stream);
    let mut received = Vec::with_capacity(stream.plaintext.len());
    drain(&mut client, &ciphertext, |piece| {
        received.extend_from_slice(piece)
    });
    assert!(
        received == stream.plaintext,
        "{}: the plaintext read back differs from what was sent",
        stream.name
    );
}

/// Times one decrypt of a prepared stream.
fn time_drain<C: Client>(pki: &Pki, stream: &Stream) -> f64 {
    let (mut client, ciphertext) = prepare::<C>(pki, stream);
    let start = std::time::Instant::now();
    let total = drain(&mut client, &ciphertext, |piece| {
        black_box(piece);
    });
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(total, stream.plaintext.len());
    elapsed
}

/// Buffered and unbuffered alternated round by round, so that load from other processes falls
/// on both alike; prints the medians and the median per-round ratio.
fn paired(pki: &Pki, streams: &[Stream]) {
    const ROUNDS: usize = 400;
    for stream in streams {
        let mut buffered = Vec::with_capacity(ROUNDS);
        let mut unbuffered = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                buffered.push(time_drain::<TlsClient>(pki, stream));
                unbuffered.push(time_drain::<UnbufferedTlsClient>(pki, stream));
            } else {
                unbuffered.push(time_drain::<UnbufferedTlsClient>(pki, stream));
                buffered.push(time_drain::<TlsClient>(pki, stream));
            }
        }
        let mut ratios: Vec<f64> = unbuffered
            .iter()
            .zip(&buffered)
            .map(|(u, b)| u / b)
            .collect();
        let median = |values: &mut Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let (b, u, r) = (
            median(&mut buffered),
            median(&mut unbuffered),
            median(&mut ratios),
        );
        let bytes = stream.plaintext.len() as f64;
        let records = stream.records.len() as f64;
        eprintln!(
            "paired {}: buffered {:.1} us ({:.0} MiB/s, {:.2} M records/s), unbuffered {:.1} us \
             ({:.0} MiB/s, {:.2} M records/s), median unbuffered/buffered {:.3}",
            stream.name,
            b * 1e6,
            bytes / b / 1048576.0,
            records / b / 1e6,
            u * 1e6,
            bytes / u / 1048576.0,
            records / u / 1e6,
            r
        );
    }
}

fn decrypt(c: &mut Criterion) {
    let pki = pki();
    let streams = streams();
    if std::env::var("TLS_PAIRED").is_ok() {
        paired(&pki, &streams);
        return;
    }
    for stream in &streams {
        verify::<TlsClient>(&pki, stream);
        verify::<UnbufferedTlsClient>(&pki, stream);
        eprintln!(
            "{}: {} records, {} plaintext bytes per iteration",
            stream.name,
            stream.records.len(),
            stream.plaintext.len()
        );
    }
    for (group_name, per_bytes) in [("tls_decrypt_bytes", true), ("tls_decrypt_records", false)] {
        let mut group = c.benchmark_group(group_name);
        for stream in &streams {
            group.throughput(if per_bytes {
                Throughput::Bytes(stream.plaintext.len() as u64)
            } else {
                Throughput::Elements(stream.records.len() as u64)
            });
            let expected = stream.plaintext.len();
            group.bench_function(format!("buffered_{}", stream.name), |b| {
                b.iter_batched(
                    || prepare::<TlsClient>(&pki, stream),
                    |(mut client, ciphertext)| {
                        let total = drain(&mut client, &ciphertext, |piece| {
                            black_box(piece);
                        });
                        assert_eq!(total, expected);
                        client
                    },
                    BatchSize::PerIteration,
                )
            });
            group.bench_function(format!("unbuffered_{}", stream.name), |b| {
                b.iter_batched(
                    || prepare::<UnbufferedTlsClient>(&pki, stream),
                    |(mut client, ciphertext)| {
                        let total = drain(&mut client, &ciphertext, |piece| {
                            black_box(piece);
                        });
                        assert_eq!(total, expected);
                        client
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        group.finish();
    }
}

fn handshake(c: &mut Criterion) {
    let pki = pki();
    let mut group = c.benchmark_group("tls_handshake");
    let mut full = (*pki.client).clone();
    full.resumption = Resumption::disabled();
    let full = Arc::new(full);
    group.bench_function("full_tls13", |b| {
        b.iter(|| connect::<TlsClient>(&pki, Arc::clone(&full)))
    });
    // The first connection fills the session cache; every later one resumes.
    let resuming = Arc::clone(&pki.client);
    drop(connect::<TlsClient>(&pki, Arc::clone(&resuming)));
    group.bench_function("resumed_tls13", |b| {
        b.iter(|| connect::<TlsClient>(&pki, Arc::clone(&resuming)))
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
