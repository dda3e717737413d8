//! The seeds of the `itch_mold` and `pcap` fuzz targets (fuzz/seeds/itch_mold/, fuzz/seeds/pcap/),
//! made from the generated market (`venue::nasdaq_itch::generate`), never from captures. Under
//! `TICKWIRE_WRITE_SEEDS=1` this writes them; otherwise it checks that every committed seed still
//! reads as its target reads it, so that the fuzzer starts from inputs it can go deep into.

#[path = "../../../tests/support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use tickwire::venue::nasdaq_itch::generate::{mold_packet, Generator, MAX_GENERATED_LEN};
use tickwire::venue::nasdaq_itch::itch;
use tickwire::venue::nasdaq_itch::mold::{Packet, Request, Session, END_OF_SESSION};
use tickwire::venue::nasdaq_itch::pcap::{Capture, RawItch};

const S1: Session = Session(*b"SEED000001");
const S2: Session = Session(*b"SEED000002");

fn seeds(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target)
}

/// `packets` MoldUDP64 packets of 1 to 4 generated messages, from sequence 1.
fn packets(seed: u64, session: Session, packets: usize) -> Vec<Vec<u8>> {
    let mut generator = Generator::new(seed, 8, 24);
    let mut out = Vec::new();
    let mut sequence = 1;
    for n in 0..packets {
        let count = 1 + n % 4;
        let mut buffers = vec![[0u8; MAX_GENERATED_LEN]; count];
        let lens: Vec<usize> = buffers
            .iter_mut()
            .map(|b| generator.next_message(b))
            .collect();
        let mut packet = Vec::new();
        assert!(mold_packet(
            session,
            sequence,
            buffers.iter().zip(&lens).map(|(b, l)| &b[..*l]),
            &mut packet
        ));
        out.push(packet);
        sequence += count as u64;
    }
    out
}

/// One `itch_mold` input record: control byte (line, time), length, packet.
fn record(out: &mut Vec<u8>, line: u8, micros: u8, packet: &[u8]) {
    out.push(line | (micros << 2));
    out.extend_from_slice(&(packet.len() as u16).to_be_bytes());
    out.extend_from_slice(packet);
}

/// A target's seeds: (file name, bytes).
type Seeds = Vec<(&'static str, Vec<u8>)>;

fn itch_mold_seeds() -> Seeds {
    let stream = packets(3, S1, 24);
    let mut clean = Vec::new();
    for packet in &stream {
        record(&mut clean, 0, 1, packet);
        record(&mut clean, 1, 0, packet);
    }
    // Losses: packet 3 on A, 5 on B, 8 on both (answered), 12 on both (never answered).
    let mut lossy = Vec::new();
    for (n, packet) in stream.iter().enumerate() {
        if n != 3 && n != 8 && n != 12 {
            record(&mut lossy, 0, 1, packet);
        }
        if n != 5 && n != 8 && n != 12 {
            record(&mut lossy, 1, 0, packet);
        }
        if n == 10 {
            record(&mut lossy, 2, 5, &stream[8]);
        }
    }
    record(
        &mut lossy,
        0,
        63,
        &Request {
            session: S1,
            sequence: 200,
            count: 0,
        }
        .encode(),
    );
    // A session that ends and another that begins.
    let mut sessions = Vec::new();
    for packet in &stream[..6] {
        record(&mut sessions, 0, 1, packet);
    }
    let end = Request {
        session: S1,
        sequence: 1 + 1 + 2 + 3 + 4 + 1 + 2,
        count: END_OF_SESSION,
    };
    record(&mut sessions, 0, 1, &end.encode());
    for packet in packets(4, S2, 6) {
        record(&mut sessions, 1, 1, &packet);
    }
    vec![
        ("clean_ab", clean),
        ("losses_and_rerequest", lossy),
        ("session_change", sessions),
    ]
}

fn frame(payload: &[u8], vlan: bool) -> Vec<u8> {
    let mut out = vec![0x01, 0x00, 0x5E, 0x36, 0x0C, 0x6F, 0x02, 0, 0, 0, 0, 1];
    if vlan {
        out.extend_from_slice(&[0x81, 0x00, 0x00, 0x8D]);
    }
    out.extend_from_slice(&[0x08, 0x00]);
    let total = (28 + payload.len()) as u16;
    out.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        16,
        17,
        0,
        0,
    ]);
    out.extend_from_slice(&[10, 0, 0, 1, 233, 54, 12, 111]);
    out.extend_from_slice(&26477u16.to_be_bytes());
    out.extend_from_slice(&26477u16.to_be_bytes());
    out.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    out
}

fn classic_pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xA1B2_3C4Du32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (n, frame) in frames.iter().enumerate() {
        out.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        out.extend_from_slice(&(n as u32 * 1000).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(frame);
    }
    out
}

fn pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while body.len() % 4 != 0 {
            body.push(0);
        }
        let len = (12 + body.len()) as u32;
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&body);
        out.extend_from_slice(&len.to_be_bytes());
    }
    let mut out = Vec::new();
    let mut shb = 0x1A2B_3C4Du32.to_be_bytes().to_vec();
    shb.extend_from_slice(&[0, 1, 0, 0]);
    shb.extend_from_slice(&[0xFF; 8]);
    block(&mut out, 0x0A0D_0D0A, &shb);
    let mut idb = vec![0, 1, 0, 0];
    idb.extend_from_slice(&65535u32.to_be_bytes());
    idb.extend_from_slice(&[0, 9, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0]);
    block(&mut out, 1, &idb);
    for (n, frame) in frames.iter().enumerate() {
        let mut epb = vec![0; 4];
        let ts = 1_700_000_000_000_000_000u64 + n as u64;
        epb.extend_from_slice(&((ts >> 32) as u32).to_be_bytes());
        epb.extend_from_slice(&(ts as u32).to_be_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        epb.extend_from_slice(frame);
        block(&mut out, 6, &epb);
    }
    out
}

fn pcap_seeds() -> Seeds {
    let stream = packets(5, S1, 12);
    let frames: Vec<Vec<u8>> = stream
        .iter()
        .enumerate()
        .map(|(n, p)| frame(p, n % 2 == 0))
        .collect();
    let mut raw = Vec::new();
    let mut generator = Generator::new(6, 8, 24);
    for _ in 0..40 {
        let mut buffer = [0u8; MAX_GENERATED_LEN];
        let len = generator.next_message(&mut buffer);
        raw.extend_from_slice(&(len as u16).to_be_bytes());
        raw.extend_from_slice(&buffer[..len]);
    }
    vec![
        ("classic_ns_vlan.pcap", classic_pcap(&frames)),
        ("big_endian.pcapng", pcapng(&frames)),
        ("raw.itch", raw),
    ]
}

#[test]
fn fuzz_seeds() {
    let targets: [(&str, Seeds); 2] = [("itch_mold", itch_mold_seeds()), ("pcap", pcap_seeds())];
    if std::env::var_os("TICKWIRE_WRITE_SEEDS").is_some() {
        for (target, files) in &targets {
            std::fs::create_dir_all(seeds(target)).expect("make the seeds folder");
            for (name, bytes) in files {
                std::fs::write(seeds(target).join(name), bytes).expect("write a seed");
            }
        }
    }
    if !seeds("itch_mold").is_dir() {
        skip::skipped(format_args!(
            "{} is not here (a checkout without fuzz/)",
            seeds("itch_mold").display()
        ));
        return;
    }
    for (target, files) in &targets {
        for (name, bytes) in files {
            let committed = std::fs::read(seeds(target).join(name)).expect("a committed seed");
            assert_eq!(
                &committed, bytes,
                "{target}/{name} is what the generator makes"
            );
        }
    }
    // The itch_mold seeds are whole packets of valid messages.
    for (_, bytes) in itch_mold_seeds() {
        let mut rest = &bytes[..];
        while let [_, hi, lo, tail @ ..] = rest {
            let len = usize::from(u16::from_be_bytes([*hi, *lo]));
            let packet = Packet::parse(&tail[..len]).expect("packet");
            for (_, message) in packet.messages() {
                itch::parse(message).expect("message");
            }
            rest = &tail[len..];
        }
    }
    // The pcap seeds read whole, every datagram a packet.
    for (name, bytes) in pcap_seeds() {
        if name.ends_with(".itch") {
            assert_eq!(
                RawItch::new(&bytes)
                    .filter(|m| m.as_ref().is_ok_and(|m| itch::parse(m).is_ok()))
                    .count(),
                40
            );
            continue;
        }
        let datagrams: Vec<_> = Capture::new(&bytes)
            .expect("header")
            .collect::<Result<_, _>>()
            .expect("whole");
        assert_eq!(datagrams.len(), 12, "{name}");
        for datagram in datagrams {
            Packet::parse(datagram.payload).expect("packet");
        }
    }
}
