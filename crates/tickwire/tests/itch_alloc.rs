//! Issue 37: the ITCH decoder path allocates nothing per message in steady state. MoldUDP64
//! packets of a generated market go from two lines, with losses on one line, losses on both
//! recovered by re-request answers and losses given up as gaps, through the `Arbiter`, the ITCH
//! parser and the L3 book of every stock, each output made into a bus event; after a warm-up
//! the calling thread's allocations are counted by the binary's counting allocator: zero.

#[path = "../../../tests/support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;
use tickwire::event::{EventHeader, EventKind};
use tickwire::venue::nasdaq_itch::book::{BookConfig, ItchBook};
use tickwire::venue::nasdaq_itch::generate::{mold_packet, Generator, MAX_GENERATED_LEN};
use tickwire::venue::nasdaq_itch::itch;
use tickwire::venue::nasdaq_itch::mold::{Arbiter, ArbiterConfig, Line, Output, Session};

const SESSION: Session = Session(*b"ALLOC00001");

struct Path {
    arbiter: Arbiter,
    book: ItchBook,
    events: u64,
    checksum: i64,
    gaps: u64,
}

impl Path {
    fn feed(&mut self, line: Line, packet: &[u8], now: u64) {
        let Path {
            arbiter,
            book,
            events,
            checksum,
            gaps,
        } = self;
        let mut handle = |output: Output<'_>| match output {
            Output::Message {
                sequence, bytes, ..
            } => {
                let message = itch::parse(bytes).expect("generated message");
                let header = EventHeader {
                    exchange_ts_ns: message.header().timestamp_ns,
                    recv_ts_ns: now,
                    venue_seq: sequence,
                    instrument_id: 0,
                    venue_id: 1,
                    kind: EventKind::BookLevel,
                    flags: 0,
                };
                book.apply(&message, &mut |change| {
                    let event = change.event(header, u32::from(message.header().locate));
                    *events += 1;
                    *checksum = checksum.wrapping_add(event.header.venue_seq as i64);
                })
                .expect("room");
            }
            Output::Gap { count, .. } => *gaps += count,
            Output::SessionChange { .. } | Output::EndOfSession { .. } => {}
        };
        arbiter
            .on_packet(line, packet, now, &mut handle)
            .expect("well-formed");
        // The test's "server" answers from its history below, whatever was asked.
        let _request = arbiter.poll(now, &mut handle);
    }
}

#[test]
fn the_itch_path_allocates_nothing_per_message() {
    let mut path = Path {
        arbiter: Arbiter::new(arbiter_config()),
        book: ItchBook::new(BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 17,
        }),
        events: 0,
        checksum: 0,
        gaps: 0,
    };
    let rounds = 60_000u64;
    let allocated = drive(rounds, &mut |line, packet, now| {
        path.feed(line, packet, now)
    });
    assert!(
        path.events > 100_000,
        "the run made events: {}",
        path.events
    );
    assert!(path.gaps > 0, "unanswered losses became gaps");
    assert_eq!(path.arbiter.counters().gaps, (rounds - 1) / 997);
    assert_eq!(allocated, 0, "allocations in steady state");
    std::hint::black_box(path.checksum);
}

/// The generated market's packets from both lines through `feed`, with the losses described in
/// the loop; returns the allocations made after the first third of the rounds.
fn drive(rounds: u64, feed: &mut dyn FnMut(Line, &[u8], u64)) -> u64 {
    let mut generator = Generator::new(42, 2_000, 20_000);
    // The packets of a window, kept to answer re-requests, reused (no allocation once grown).
    let mut messages = vec![[0u8; MAX_GENERATED_LEN]; 8];
    let mut lens = [0usize; 8];
    let mut history: Vec<Vec<u8>> = (0..1024).map(|_| Vec::with_capacity(512)).collect();
    let mut packet = Vec::with_capacity(512);
    let mut answer = Vec::with_capacity(512);
    let mut sequence = 1u64;
    let mut now = 0u64;
    let mut measured_from = None;
    for round in 0..rounds {
        if round == rounds / 3 {
            measured_from = Some(allocations());
        }
        let count = 1 + (round % 8) as usize;
        for i in 0..count {
            lens[i] = generator.next_message(&mut messages[i]);
        }
        assert!(mold_packet(
            SESSION,
            sequence,
            (0..count).map(|i| &messages[i][..lens[i]]),
            &mut packet
        ));
        let slot = (round % 1024) as usize;
        history[slot].clear();
        history[slot].extend_from_slice(&packet);
        now += 100;
        // Round 7 of 10: lost on A; 3: lost on B; 5: lost on both, answered by re-request;
        // every 997th round: lost on both and never answered (a gap).
        let never = round % 997 == 0 && round > 0;
        if round % 10 != 7 && round % 10 != 5 && !never {
            feed(Line::A, &packet, now);
        }
        if round % 10 != 3 && round % 10 != 5 && !never {
            feed(Line::B, &packet, now);
        }
        if round % 10 == 6 && round >= 1 {
            // The server answers the packet of the round before.
            let previous = &history[((round - 1) % 1024) as usize];
            answer.clear();
            answer.extend_from_slice(previous);
            feed(Line::Rerequest, &answer, now);
        }
        if never {
            // A heartbeat shows the loss; past give_up_ns it is given up as a gap.
            feed(Line::A, &mold_heartbeat(sequence + count as u64), now);
            now += 100_000;
            feed(Line::B, &mold_heartbeat(sequence + count as u64), now);
        }
        sequence += count as u64;
    }
    allocations() - measured_from.expect("measured")
}

/// The same through the venue's `ItchDecoder` (arbiter, parser, book, directory and the events
/// it publishes for every stock): nothing allocated per message either.
#[test]
fn the_itch_decoder_allocates_nothing_per_message() {
    use tickwire::venue::nasdaq_itch::decoder::{DecoderConfig, ItchDecoder, Symbols};
    let mut decoder = ItchDecoder::new(DecoderConfig {
        venue_id: 1,
        instrument_base: 0,
        symbols: Symbols::All,
        arbiter: arbiter_config(),
        book: BookConfig {
            max_orders: 1 << 16,
            max_levels: 1 << 17,
        },
        date: Some(itch::Date {
            year: 2019,
            month: 1,
            day: 30,
        }),
    });
    let mut events = 0u64;
    let mut gaps = 0u64;
    let allocated = drive(60_000, &mut |line, packet, now| {
        let mut count = |event: tickwire::event::Event| {
            events += 1;
            if event.kind() == EventKind::Gap {
                gaps += 1;
            }
        };
        decoder
            .on_packet(line, packet, now, now, &mut count)
            .expect("well-formed");
        let _request = decoder.poll(now, &mut count);
    });
    assert!(events > 100_000, "the run made events: {events}");
    assert!(gaps > 0, "unanswered losses became gap events");
    assert_eq!(decoder.counters().gaps, 59_999 / 997);
    assert_eq!(allocated, 0, "allocations in steady state");
}

fn arbiter_config() -> ArbiterConfig {
    ArbiterConfig {
        expected_session: Some(SESSION),
        first_sequence: Some(1),
        line_wait_ns: 1_000,
        request_interval_ns: 1_000,
        max_requests: 2,
        give_up_ns: 50_000,
        max_request_count: 64,
        buffer: 4_096,
    }
}

fn mold_heartbeat(sequence: u64) -> [u8; 20] {
    tickwire::venue::nasdaq_itch::mold::Request {
        session: SESSION,
        sequence,
        count: 0,
    }
    .encode()
}
