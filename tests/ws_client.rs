//! The WebSocket client's framing, checked against a plain reference encoder and decoder written
//! here from RFC 6455 section 5.2 (not the crate's codec), fed in every split the network can
//! produce.

use proptest::prelude::*;
use tickwire::ws::frame::MaskRng;
use tickwire::ws::{Client, Config, Error, Event, MessageKind, SendError, State};

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CONTINUATION: u8 = 0x0;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// A server frame, unmasked, with the minimal length encoding.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | opcode];
    match payload.len() {
        len @ 0..=125 => out.push(len as u8),
        len @ 126..=65535 => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

fn close_frame(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(reason);
    frame(true, CLOSE, &payload)
}

/// One frame our client sent, unmasked: (first byte, payload).
#[derive(Debug, PartialEq, Eq)]
struct Sent {
    first_byte: u8,
    payload: Vec<u8>,
}

/// Decodes the client's output, checking that every frame is masked.
fn sent_frames(mut bytes: &[u8]) -> Vec<Sent> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        assert_eq!(bytes[1] & 0x80, 0x80, "client frames must be masked");
        let (len, mut at) = match bytes[1] & 0x7F {
            126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
                10,
            ),
            len => (len as usize, 2),
        };
        let mask = &bytes[at..at + 4];
        at += 4;
        let payload = bytes[at..at + len]
            .iter()
            .enumerate()
            .map(|(index, byte)| byte ^ mask[index % 4])
            .collect();
        frames.push(Sent {
            first_byte: bytes[0],
            payload,
        });
        bytes = &bytes[at + len..];
    }
    frames
}

/// The close code of the single close frame in the client's output.
fn queued_close_code(client: &Client) -> Option<u16> {
    let frames = sent_frames(client.output());
    let close = frames.iter().find(|sent| sent.first_byte == 0x80 | CLOSE)?;
    Some(u16::from_be_bytes([close.payload[0], close.payload[1]]))
}

fn new_client() -> Client {
    client_with(Config::default())
}

fn client_with(config: Config) -> Client {
    Client::with_mask_rng(config, MaskRng::from_seed(42))
}

/// What a driving loop hands on, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Message(MessageKind, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
}

/// Feeds `wire` to the client in pieces cut at `cuts` (sorted offsets), as a receive loop does:
/// received bytes accumulate, consumed bytes are dropped. Returns what came out, or the error.
fn drive(client: &mut Client, wire: &[u8], cuts: &[usize]) -> (Vec<Out>, Option<Error>) {
    let mut outs = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut fed = 0;
    for &end in cuts.iter().chain(std::iter::once(&wire.len())) {
        let end = end.clamp(fed, wire.len());
        pending.extend_from_slice(&wire[fed..end]);
        fed = end;
        loop {
            let read = match client.read(&pending) {
                Ok(read) => read,
                Err(error) => return (outs, Some(error)),
            };
            let consumed = read.consumed;
            let stop = match read.event {
                Event::NeedMore | Event::Closed => true,
                Event::Message { kind, payload } => {
                    outs.push(Out::Message(kind, payload.to_vec()));
                    false
                }
                Event::Ping { payload } => {
                    outs.push(Out::Ping(payload.to_vec()));
                    false
                }
                Event::Pong { payload } => {
                    outs.push(Out::Pong(payload.to_vec()));
                    false
                }
                Event::Close { code, reason } => {
                    outs.push(Out::Close(code, reason.to_owned()));
                    false
                }
                Event::Partial | Event::Discarded => false,
            };
            assert_eq!(
                consumed == 0,
                stop,
                "consumed is zero exactly for NeedMore and Closed"
            );
            pending.drain(..consumed);
            if stop {
                break;
            }
        }
    }
    (outs, None)
}

fn binance_book_ticker() -> &'static [u8] {
    br#"{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":5123107843163,"s":"BTCUSDT","b":"61653.30","B":"3.462","a":"61653.40","A":"7.123","T":1723161256302,"E":1723161256302}}"#
}

#[test]
fn every_length_class_in_every_split() {
    for len in [0, 1, 125, 126, 127, 1000, 65535, 65536, 70_000] {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let wire = frame(true, BINARY, &payload);
        let expected = vec![Out::Message(MessageKind::Binary, payload.clone())];
        // Every two-piece split of the small frames; for the long ones, every split in the
        // header and a stride through the payload (every split would be quadratic).
        let cuts: Vec<usize> = if wire.len() < 2000 {
            (0..=wire.len()).collect()
        } else {
            (0..=16).chain((16..wire.len()).step_by(997)).collect()
        };
        for cut in cuts {
            let mut client = new_client();
            assert_eq!(
                drive(&mut client, &wire, &[cut]),
                (expected.clone(), None),
                "len {len} cut {cut}"
            );
        }
    }
}

#[test]
fn byte_by_byte_borrowed_and_streamed() {
    let payload: Vec<u8> = (0..3000).map(|i| (i % 7) as u8 + b'a').collect();
    let mut wire = frame(true, TEXT, &payload);
    wire.extend(frame(true, BINARY, b"second"));
    let cuts: Vec<usize> = (1..wire.len()).collect();
    let expected = vec![
        Out::Message(MessageKind::Text, payload.clone()),
        Out::Message(MessageKind::Binary, b"second".to_vec()),
    ];
    for max_borrowed_payload_bytes in [usize::MAX, 100, 0] {
        let mut client = client_with(Config {
            max_borrowed_payload_bytes,
            ..Config::default()
        });
        assert_eq!(
            drive(&mut client, &wire, &cuts),
            (expected.clone(), None),
            "borrow limit {max_borrowed_payload_bytes}"
        );
    }
}

#[test]
fn unfragmented_payload_borrows_the_input() {
    let mut wire = frame(true, TEXT, binance_book_ticker());
    wire.extend(frame(true, BINARY, &[7; 70_000]));
    let mut client = new_client();
    let read = client.read(&wire).unwrap();
    let Event::Message { kind, payload } = read.event else {
        panic!("expected a message, got {:?}", read.event);
    };
    assert_eq!(kind, MessageKind::Text);
    assert_eq!(payload, binance_book_ticker());
    // 179 bytes take the 16-bit length: a 4-byte header.
    assert_eq!(
        payload.as_ptr(),
        wire[4..].as_ptr(),
        "no copy: same address"
    );
    let consumed = read.consumed;
    let read = client.read(&wire[consumed..]).unwrap();
    let Event::Message { payload, .. } = read.event else {
        panic!("expected a message, got {:?}", read.event);
    };
    assert_eq!(payload.as_ptr(), wire[consumed + 10..].as_ptr());
    assert_eq!(payload.len(), 70_000);
}

#[test]
fn fragments_with_an_interleaved_ping() {
    let mut wire = frame(false, TEXT, b"Hel");
    wire.extend(frame(true, PING, b"are you there"));
    wire.extend(frame(false, CONTINUATION, b""));
    wire.extend(frame(false, CONTINUATION, b"lo, "));
    wire.extend(frame(true, PONG, b"yes"));
    wire.extend(frame(true, CONTINUATION, "wörld".as_bytes()));
    for cut in 0..=wire.len() {
        let mut client = new_client();
        let (outs, error) = drive(&mut client, &wire, &[cut]);
        assert_eq!(error, None);
        assert_eq!(
            outs,
            vec![
                Out::Ping(b"are you there".to_vec()),
                Out::Pong(b"yes".to_vec()),
                Out::Message(MessageKind::Text, "Hello, wörld".as_bytes().to_vec()),
            ],
            "cut {cut}"
        );
        assert_eq!(
            sent_frames(client.output()),
            vec![Sent {
                first_byte: 0x80 | PONG,
                payload: b"are you there".to_vec()
            }],
            "the pong echoes the ping's payload"
        );
    }
}

#[test]
fn the_pong_is_queued_in_the_same_call() {
    let mut client = new_client();
    let wire = frame(true, PING, b"1723161256302");
    let read = client.read(&wire).unwrap();
    assert_eq!(
        read.event,
        Event::Ping {
            payload: b"1723161256302"
        }
    );
    let sent = sent_frames(client.output());
    assert_eq!(sent[0].payload, b"1723161256302");
}

/// Each protocol error, the close code it must queue, and the error.
#[test]
fn protocol_errors_queue_the_right_close_code() {
    let mut top_bit = vec![0x82, 127];
    top_bit.extend_from_slice(&(1_u64 << 63).to_be_bytes());
    let mut fragmented_then_new = frame(false, TEXT, b"a");
    fragmented_then_new.extend(frame(true, TEXT, b"b"));
    let mut bad_second_fragment = frame(false, TEXT, b"ok ");
    bad_second_fragment.extend(frame(false, CONTINUATION, b"\xce\xba\xe1\xbd"));
    bad_second_fragment.extend(frame(false, CONTINUATION, b"\xff"));
    let cases: Vec<(&str, Vec<u8>, Error)> = vec![
        (
            "RSV1",
            vec![0xC1, 0x00],
            Error::ReservedBits { bits: 0b100 },
        ),
        (
            "RSV3",
            vec![0x91, 0x00],
            Error::ReservedBits { bits: 0b001 },
        ),
        (
            "reserved data opcode",
            vec![0x83, 0x00],
            Error::ReservedOpcode { opcode: 3 },
        ),
        (
            "reserved control opcode",
            vec![0x8B, 0x00],
            Error::ReservedOpcode { opcode: 0xB },
        ),
        (
            "masked",
            vec![0x81, 0x81, 1, 2, 3, 4, 5],
            Error::MaskedFrame,
        ),
        (
            "long ping",
            frame(true, PING, &[0; 126]),
            Error::ControlFrameTooLong,
        ),
        (
            "fragmented ping",
            frame(false, PING, b""),
            Error::FragmentedControlFrame,
        ),
        (
            "continuation first",
            frame(true, CONTINUATION, b"x"),
            Error::UnexpectedContinuation,
        ),
        (
            "new message mid-fragments",
            fragmented_then_new,
            Error::ExpectedContinuation,
        ),
        ("length top bit", top_bit, Error::LengthTopBit),
        (
            "1-byte close",
            frame(true, CLOSE, &[3]),
            Error::CloseLength1,
        ),
        (
            "close 1005",
            close_frame(1005, b""),
            Error::InvalidCloseCode { code: 1005 },
        ),
        (
            "close 999",
            close_frame(999, b""),
            Error::InvalidCloseCode { code: 999 },
        ),
        (
            "close 2999",
            close_frame(2999, b""),
            Error::InvalidCloseCode { code: 2999 },
        ),
        (
            "close 5000",
            close_frame(5000, b""),
            Error::InvalidCloseCode { code: 5000 },
        ),
        (
            "close reason not UTF-8",
            close_frame(1000, b"\xce\xba\xed\xa0\x80"),
            Error::InvalidUtf8,
        ),
        (
            "text not UTF-8",
            frame(true, TEXT, b"caf\xe9"),
            Error::InvalidUtf8,
        ),
        (
            "text ends mid-character",
            frame(true, TEXT, b"\xe2\x82"),
            Error::InvalidUtf8,
        ),
        (
            "fragment not UTF-8",
            bad_second_fragment,
            Error::InvalidUtf8,
        ),
    ];
    for (name, wire, expected) in cases {
        for cut in [wire.len(), 1, wire.len() / 2] {
            let mut client = new_client();
            let (_, error) = drive(&mut client, &wire, &[cut]);
            assert_eq!(error, Some(expected), "{name} (cut {cut})");
            assert_eq!(
                queued_close_code(&client),
                Some(expected.close_code()),
                "{name}"
            );
            assert_eq!(client.state(), State::Closed, "{name}");
            assert_eq!(
                client.read(&wire).unwrap().event,
                Event::Closed,
                "{name}: nothing is read after a failure"
            );
            assert_eq!(sent_frames(client.output()).len(), 1, "{name}: one close");
        }
    }
}

#[test]
fn invalid_utf8_fails_before_the_frame_or_message_is_complete() {
    // Autobahn 6.4.x: the bad byte arrives first, the rest of the frame later.
    let mut payload = b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5".to_vec();
    payload.extend_from_slice(b"\xf4\x90\x80\x80");
    payload.extend_from_slice(b"edited");
    let wire = frame(true, TEXT, &payload);
    let cut = 2 + 13;
    for max_borrowed_payload_bytes in [usize::MAX, 4] {
        let mut client = client_with(Config {
            max_borrowed_payload_bytes,
            ..Config::default()
        });
        let mut input = &wire[..cut];
        let error = loop {
            match client.read(input) {
                Ok(read) if read.event == Event::NeedMore => panic!("should fail before more"),
                Ok(read) => input = &input[read.consumed..],
                Err(error) => break error,
            }
        };
        assert_eq!(error, Error::InvalidUtf8);
        assert_eq!(queued_close_code(&client), Some(1007));
    }
    // A valid prefix that ends mid-character keeps waiting.
    let wire = frame(true, TEXT, "€".as_bytes());
    let mut client = new_client();
    assert_eq!(client.read(&wire[..3]).unwrap().event, Event::NeedMore);
    assert!(matches!(
        client.read(&wire).unwrap().event,
        Event::Message { .. }
    ));
}

#[test]
fn size_limits_close_with_1009() {
    let config = Config {
        max_frame_bytes: 1000,
        max_message_bytes: 1500,
        ..Config::default()
    };
    let mut client = client_with(config);
    assert!(matches!(
        client.read(&frame(true, BINARY, &[0; 1000])).unwrap().event,
        Event::Message { .. }
    ));
    let error = client.read(&frame(true, BINARY, &[0; 1001])).unwrap_err();
    assert_eq!(
        error,
        Error::FrameTooLarge {
            len_bytes: 1001,
            max_bytes: 1000
        }
    );
    assert_eq!(queued_close_code(&client), Some(1009));

    let mut client = client_with(config);
    let mut wire = frame(false, BINARY, &[0; 1000]);
    wire.extend(frame(true, CONTINUATION, &[0; 501]));
    let (outs, error) = drive(&mut client, &wire, &[]);
    assert!(outs.is_empty());
    assert_eq!(
        error,
        Some(Error::MessageTooLarge {
            len_bytes: 1501,
            max_bytes: 1500
        })
    );
    assert_eq!(queued_close_code(&client), Some(1009));

    // The limit is checked on the header: a 2^62-byte frame fails before any payload arrives,
    // with no overflow anywhere.
    let mut huge = vec![0x82, 127];
    huge.extend_from_slice(&(1_u64 << 62).to_be_bytes());
    let mut client = new_client();
    assert_eq!(
        client.read(&huge).unwrap_err(),
        Error::FrameTooLarge {
            len_bytes: 1 << 62,
            max_bytes: 16 << 20
        }
    );
    let mut client = client_with(Config {
        max_frame_bytes: usize::MAX,
        max_message_bytes: usize::MAX,
        max_borrowed_payload_bytes: 1 << 20,
    });
    let mut message = frame(false, BINARY, &[1; 10]);
    message.push(0x00); // a continuation that is not final
    message.extend_from_slice(&huge[1..]);
    let (_, error) = drive(&mut client, &message, &[]);
    // With no limits a 2^62-byte fragment is accepted and streamed: nothing overflowed, and
    // the client is simply waiting for the payload.
    assert_eq!(error, None);
    assert_eq!(client.state(), State::Open);
}

#[test]
fn server_close_is_echoed_with_its_code() {
    for (wire, code, echoed) in [
        (close_frame(1001, b"going away"), Some(1001), 1001),
        (close_frame(3000, b""), Some(3000), 3000),
        (frame(true, CLOSE, b""), None, 1000),
    ] {
        let mut client = new_client();
        let read = client.read(&wire).unwrap();
        let reason = if code == Some(1001) { "going away" } else { "" };
        assert_eq!(read.event, Event::Close { code, reason });
        assert_eq!(read.consumed, wire.len());
        assert_eq!(client.state(), State::Closed);
        assert_eq!(queued_close_code(&client), Some(echoed));
        assert!(!client.is_finished(), "the echo is not sent yet");
        let pending = client.output().len();
        client.consume_output(pending);
        assert!(client.is_finished());
        assert_eq!(client.read(&wire).unwrap().event, Event::Closed);
        assert_eq!(
            client.send(MessageKind::Text, b"late"),
            Err(SendError::Closed)
        );
    }
}

#[test]
fn our_close_discards_data_until_the_server_closes() {
    let mut client = new_client();
    client.close(1000, "bye").unwrap();
    assert_eq!(client.state(), State::Closing);
    assert_eq!(
        sent_frames(client.output()),
        vec![Sent {
            first_byte: 0x80 | CLOSE,
            payload: b"\x03\xe8bye".to_vec()
        }]
    );
    assert_eq!(
        client.send(MessageKind::Binary, b"x"),
        Err(SendError::Closed)
    );
    assert_eq!(client.close(1000, ""), Err(SendError::Closed));

    let mut wire = frame(true, TEXT, b"still streaming");
    wire.extend(frame(false, BINARY, &[1; 300]));
    wire.extend(frame(true, PING, b"p"));
    wire.extend(frame(true, CONTINUATION, &[2; 300]));
    wire.extend(close_frame(1000, b""));
    let output_before = client.output().len();
    let (outs, error) = drive(&mut client, &wire, &[5, 400]);
    assert_eq!(error, None);
    assert_eq!(
        outs,
        vec![
            Out::Ping(b"p".to_vec()),
            Out::Close(Some(1000), String::new())
        ]
    );
    assert_eq!(client.state(), State::Closed);
    assert_eq!(
        client.output().len(),
        output_before,
        "no pong and no second close after ours"
    );
}

#[test]
fn our_close_mid_frame_drops_the_rest_of_it() {
    let mut client = client_with(Config {
        max_borrowed_payload_bytes: 100,
        ..Config::default()
    });
    let mut wire = frame(true, TEXT, &[b'a'; 1000]);
    wire.extend(close_frame(1000, b""));
    // Header and the first 300 payload bytes are streamed into the message buffer...
    let read = client.read(&wire[..304]).unwrap();
    assert_eq!((read.consumed, read.event), (304, Event::Partial));
    // ...then we close, and the rest of the frame is dropped, not delivered.
    client.close(1001, "").unwrap();
    let (outs, error) = drive(&mut client, &wire[304..], &[]);
    assert_eq!(error, None);
    assert_eq!(outs, vec![Out::Close(Some(1000), String::new())]);
    assert_eq!(client.state(), State::Closed);
}

#[test]
fn send_rules() {
    let mut client = new_client();
    assert_eq!(
        client.send(MessageKind::Text, b"\xff"),
        Err(SendError::InvalidUtf8)
    );
    assert_eq!(
        client.send_ping(&[0; 126]),
        Err(SendError::ControlPayloadTooLong { len_bytes: 126 })
    );
    assert_eq!(
        client.close(1005, ""),
        Err(SendError::InvalidCloseCode { code: 1005 })
    );
    assert_eq!(
        client.close(1000, &"x".repeat(124)),
        Err(SendError::CloseReasonTooLong { len_bytes: 124 })
    );
    assert!(client.output().is_empty(), "refused frames queue nothing");
    client.send_ping(b"hb").unwrap();
    client.send_pong(b"").unwrap();
    assert_eq!(
        sent_frames(client.output()),
        vec![
            Sent {
                first_byte: 0x80 | PING,
                payload: b"hb".to_vec()
            },
            Sent {
                first_byte: 0x80 | PONG,
                payload: vec![]
            },
        ]
    );
}

#[test]
fn masking_round_trip_with_fresh_masks() {
    let mut client = new_client();
    let sizes = [0, 1, 3, 8, 100, 125, 126, 65535, 65536, 100_000];
    for &size in &sizes {
        let payload: Vec<u8> = (0..size).map(|i| (i * 31 % 256) as u8).collect();
        client.send(MessageKind::Binary, &payload).unwrap();
    }
    let bytes = client.output().to_vec();
    let frames = sent_frames(&bytes);
    assert_eq!(frames.len(), sizes.len());
    for (sent, &size) in frames.iter().zip(&sizes) {
        let payload: Vec<u8> = (0..size).map(|i| (i * 31 % 256) as u8).collect();
        assert_eq!(sent.first_byte, 0x80 | BINARY);
        assert_eq!(sent.payload, payload, "size {size}");
    }
    // Collect the masks: a fresh one per frame.
    let mut masks = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let (len, at) = match rest[1] & 0x7F {
            126 => (u16::from_be_bytes([rest[2], rest[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(rest[2..10].try_into().unwrap()) as usize,
                10,
            ),
            len => (len as usize, 2),
        };
        masks.push(rest[at..at + 4].to_vec());
        rest = &rest[at + 4 + len..];
    }
    masks.sort();
    masks.dedup();
    assert_eq!(masks.len(), sizes.len());
}

#[test]
fn swap_output_hands_over_the_pending_bytes() {
    let mut client = new_client();
    client.send(MessageKind::Text, b"one").unwrap();
    client.consume_output(2);
    client.send(MessageKind::Text, b"two").unwrap();
    let expected = client.output().to_vec();
    let mut in_flight = Vec::with_capacity(64);
    client.swap_output(&mut in_flight);
    assert_eq!(in_flight, expected);
    assert!(client.output().is_empty());
    client.send(MessageKind::Text, b"three").unwrap();
    assert_eq!(sent_frames(client.output())[0].payload, b"three");
}

/// A message as the reference encoder sends it: fragment sizes, and pings between fragments.
#[derive(Debug, Clone)]
struct Plan {
    kind: MessageKind,
    payload: Vec<u8>,
    fragment_sizes: Vec<usize>,
    ping_after: Vec<bool>,
}

fn plan() -> impl Strategy<Value = Plan> {
    let text = "\\PC{0,300}".prop_map(|text: String| (MessageKind::Text, text.into_bytes()));
    let binary = prop::collection::vec(any::<u8>(), 0..70_000)
        .prop_map(|bytes| (MessageKind::Binary, bytes));
    (
        prop_oneof![4 => text, 1 => binary],
        prop::collection::vec(1_usize..200, 0..6),
        prop::collection::vec(any::<bool>(), 6),
    )
        .prop_map(|((kind, payload), fragment_sizes, ping_after)| Plan {
            kind,
            payload,
            fragment_sizes,
            ping_after,
        })
}

/// Frames a message per its plan. Fragments may cut text inside a character, as servers may.
fn encode(plan: &Plan, wire: &mut Vec<u8>) {
    let opcode = match plan.kind {
        MessageKind::Text => TEXT,
        MessageKind::Binary => BINARY,
    };
    let mut rest = &plan.payload[..];
    let mut first = true;
    for (index, &size) in plan.fragment_sizes.iter().enumerate() {
        let size = size.min(rest.len());
        let (fragment, tail) = rest.split_at(size);
        wire.extend(frame(
            false,
            if first { opcode } else { CONTINUATION },
            fragment,
        ));
        if plan.ping_after[index] {
            wire.extend(frame(true, PING, &[index as u8; 3]));
        }
        first = false;
        rest = tail;
    }
    wire.extend(frame(true, if first { opcode } else { CONTINUATION }, rest));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_messages_in_random_pieces_decode_to_themselves(
        plans in prop::collection::vec(plan(), 1..6),
        cut_fractions in prop::collection::vec(0.0_f64..1.0, 0..12),
        borrow_limit in prop_oneof![Just(usize::MAX), 0_usize..300],
    ) {
        let mut wire = Vec::new();
        let mut expected = Vec::new();
        for plan in &plans {
            encode(plan, &mut wire);
            for (index, &ping) in plan.ping_after.iter().enumerate() {
                if ping && index < plan.fragment_sizes.len() {
                    expected.push(Out::Ping(vec![index as u8; 3]));
                }
            }
            expected.push(Out::Message(plan.kind, plan.payload.clone()));
        }
        let mut cuts: Vec<usize> = cut_fractions
            .iter()
            .map(|fraction| (fraction * wire.len() as f64) as usize)
            .collect();
        cuts.sort_unstable();
        let mut client = client_with(Config {
            max_borrowed_payload_bytes: borrow_limit,
            ..Config::default()
        });
        let (outs, error) = drive(&mut client, &wire, &cuts);
        prop_assert_eq!(error, None);
        prop_assert_eq!(outs, expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        cut in 0_usize..512,
        borrow_limit in 0_usize..64,
    ) {
        let mut client = client_with(Config {
            max_frame_bytes: 256,
            max_message_bytes: 512,
            max_borrowed_payload_bytes: borrow_limit,
        });
        let (_, error) = drive(&mut client, &bytes, &[cut]);
        if let Some(error) = error {
            prop_assert_eq!(client.state(), State::Closed);
            prop_assert_eq!(queued_close_code(&client), Some(error.close_code()));
        }
    }
}
