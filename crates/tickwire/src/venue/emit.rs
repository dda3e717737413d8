//! [`Emitter`]: how a decoder hands out the events one venue message (or DBN record) makes, so
//! that the last of them carries [`flags::LAST`] without the decoder knowing in advance which
//! event is the last. Binance's book sync and Databento's normalizer use it.

use crate::event::{flags, Event};

/// Hands events to `out` one behind: each [`Emitter::push`] sends the event held before it, and
/// [`Emitter::finish`] sends the one still held, flagged `LAST` when the message is complete.
pub struct Emitter<'o, F: FnMut(Event)> {
    out: &'o mut F,
    pending: Option<Event>,
}

impl<'o, F: FnMut(Event)> Emitter<'o, F> {
    pub fn new(out: &'o mut F) -> Self {
        Emitter { out, pending: None }
    }

    #[inline]
    pub fn push(&mut self, event: Event) {
        if let Some(previous) = self.pending.replace(event) {
            (self.out)(previous);
        }
    }

    /// Sends the held event, if any, with `LAST` when `last` says this ends the venue's message
    /// (a DBN record may end one only with its own `F_LAST` flag). The emitter may be used for a
    /// next message afterwards.
    #[inline]
    pub fn finish(&mut self, last: bool) {
        if let Some(mut event) = self.pending.take() {
            if last {
                event.header.flags |= flags::LAST;
            }
            (self.out)(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Body, EventHeader, EventKind, Gap};

    fn event(seq: u64) -> Event {
        let header = EventHeader {
            exchange_ts_ns: 0,
            recv_ts_ns: 0,
            venue_seq: seq,
            instrument_id: 0,
            venue_id: 0,
            kind: EventKind::Gap,
            flags: 0,
        };
        Event::new(header, Body::Gap(Gap::default()))
    }

    #[test]
    fn only_the_last_event_of_a_message_is_flagged() {
        let mut seen = Vec::new();
        let mut out = |event: Event| seen.push((event.header.venue_seq, event.header.flags));
        let mut emitter = Emitter::new(&mut out);
        emitter.push(event(1));
        emitter.push(event(2));
        emitter.finish(true);
        emitter.push(event(3));
        emitter.finish(false);
        emitter.finish(true);
        assert_eq!(seen, [(1, 0), (2, flags::LAST), (3, 0)]);
    }
}
