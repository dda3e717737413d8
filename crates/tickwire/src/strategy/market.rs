//! What the strategy thread knows per instrument, kept by the strategy stage before it calls the
//! user's [`super::Strategy`]: the top of book, the last trade, and whether the feed is sound
//! (no gap or stale stream since the last quote).
//!
//! **Invariant:** one array indexed by instrument id, sized at start; updating it never
//! allocates, and instruments beyond it are ignored.

use crate::event::{Body, Event, Quote, ReferenceKind, Side, VenueState};
use crate::fixed::Fixed;

/// One instrument's top of book and last trade.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstrumentState {
    /// The latest quote (the venue's or one derived from tickwire's book), if any yet.
    pub top: Option<Quote>,
    /// When the latest quote was received (ns since the epoch).
    pub top_recv_ns: u64,
    pub last_trade: Option<LastTrade>,
    /// A gap, a disconnect or a stale stream since the latest quote: the top may be out of date.
    pub suspect: bool,
    /// The venue's latest mark price, where it sends one.
    pub mark: Option<Fixed>,
    /// The latest price of the instrument's underlying index, where the venue sends one.
    pub index: Option<Fixed>,
}

/// The latest trade print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastTrade {
    pub price: Fixed,
    pub size: Fixed,
    pub aggressor: Side,
    pub recv_ns: u64,
}

impl InstrumentState {
    /// `(bid + ask) / 2`.
    pub fn mid(&self) -> Option<f64> {
        self.top.map(|quote| mid(&quote))
    }

    /// The size-weighted mid: `(bid * ask_size + ask * bid_size) / (bid_size + ask_size)`, which
    /// leans towards the side with less size (the side likelier to move).
    pub fn microprice(&self) -> Option<f64> {
        self.top.and_then(|quote| microprice(&quote))
    }

    /// `ask - bid`.
    pub fn spread(&self) -> Option<f64> {
        self.top.map(|quote| spread(&quote))
    }
}

/// `(bid + ask) / 2` of a quote.
#[inline]
pub fn mid(quote: &Quote) -> f64 {
    (quote.bid_px.to_f64() + quote.ask_px.to_f64()) * 0.5
}

/// The size-weighted mid of a quote; `None` when both sizes are zero.
#[inline]
pub fn microprice(quote: &Quote) -> Option<f64> {
    let (bid_sz, ask_sz) = (quote.bid_sz.to_f64(), quote.ask_sz.to_f64());
    let total = bid_sz + ask_sz;
    (total > 0.0).then(|| (quote.bid_px.to_f64() * ask_sz + quote.ask_px.to_f64() * bid_sz) / total)
}

/// `ask - bid` of a quote.
#[inline]
pub fn spread(quote: &Quote) -> f64 {
    quote.ask_px.to_f64() - quote.bid_px.to_f64()
}

/// Every instrument's state.
pub struct Market {
    instruments: Vec<InstrumentState>,
}

impl Market {
    pub fn new(instruments: usize) -> Market {
        Market {
            instruments: vec![InstrumentState::default(); instruments],
        }
    }

    pub fn get(&self, instrument: u32) -> Option<&InstrumentState> {
        self.instruments.get(instrument as usize)
    }

    pub fn len(&self) -> usize {
        self.instruments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.instruments.is_empty()
    }

    /// Applies one event.
    #[inline]
    pub fn apply(&mut self, event: &Event) {
        let instrument = event.header.instrument_id;
        match event.body() {
            Body::Quote(quote) => {
                if let Some(state) = self.instruments.get_mut(instrument as usize) {
                    state.top = Some(quote);
                    state.top_recv_ns = event.header.recv_ts_ns;
                    state.suspect = false;
                }
            }
            Body::Trade(trade) => {
                if let Some(state) = self.instruments.get_mut(instrument as usize) {
                    state.last_trade = Some(LastTrade {
                        price: trade.price,
                        size: trade.size,
                        aggressor: trade.aggressor(),
                        recv_ns: event.header.recv_ts_ns,
                    });
                }
            }
            Body::Reference(reference) => {
                if let Some(state) = self.instruments.get_mut(instrument as usize) {
                    match reference.kind() {
                        ReferenceKind::Mark => state.mark = Some(reference.price),
                        ReferenceKind::Index => state.index = Some(reference.price),
                        ReferenceKind::Unknown => {}
                    }
                }
            }
            Body::Gap(_) => self.mark_suspect(instrument),
            Body::VenueStatus(status)
                if matches!(status.state(), VenueState::Stale | VenueState::Disconnected) =>
            {
                self.mark_suspect(instrument)
            }
            _ => {}
        }
    }

    /// Marks one instrument, or all of them for `ALL_INSTRUMENTS` (a connection-wide event;
    /// with several venues, every venue's instruments: the strategy sees the venue id).
    fn mark_suspect(&mut self, instrument: u32) {
        match self.instruments.get_mut(instrument as usize) {
            Some(state) => state.suspect = true,
            None if instrument == crate::venue::feed::ALL_INSTRUMENTS => {
                for state in &mut self.instruments {
                    state.suspect = true;
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{flags, EventHeader, EventKind, Gap, GapReason, Trade};

    fn quote(bid: &str, bid_sz: &str, ask: &str, ask_sz: &str) -> Quote {
        Quote {
            bid_px: bid.parse().unwrap(),
            bid_sz: bid_sz.parse().unwrap(),
            ask_px: ask.parse().unwrap(),
            ask_sz: ask_sz.parse().unwrap(),
        }
    }

    fn event(instrument: u32, kind: EventKind, body: Body) -> Event {
        Event::new(
            EventHeader {
                exchange_ts_ns: 0,
                recv_ts_ns: 7,
                venue_seq: 1,
                instrument_id: instrument,
                venue_id: 0,
                kind,
                flags: flags::LAST,
            },
            body,
        )
    }

    #[test]
    fn mid_microprice_and_spread() {
        let q = quote("100", "3", "101", "1");
        assert_eq!(mid(&q), 100.5);
        assert_eq!(spread(&q), 1.0);
        // Less size on the ask: the microprice leans to the ask.
        assert_eq!(microprice(&q), Some(100.75));
        assert_eq!(microprice(&quote("1", "0", "2", "0")), None);
    }

    #[test]
    fn tracks_top_trades_and_suspicion() {
        let mut market = Market::new(2);
        market.apply(&event(
            1,
            EventKind::Quote,
            Body::Quote(quote("10", "1", "11", "1")),
        ));
        market.apply(&event(
            1,
            EventKind::Trade,
            Body::Trade(Trade::new(
                Fixed::parse_str("10.5").unwrap(),
                Fixed::parse_str("2").unwrap(),
                9,
                Side::Bid,
            )),
        ));
        let state = market.get(1).unwrap();
        assert_eq!(state.mid(), Some(10.5));
        assert_eq!(state.last_trade.unwrap().aggressor, Side::Bid);
        assert!(!state.suspect);
        market.apply(&event(
            1,
            EventKind::Gap,
            Body::Gap(Gap::new(GapReason::Reconnect, 0, 0)),
        ));
        assert!(market.get(1).unwrap().suspect);
        market.apply(&event(
            1,
            EventKind::Quote,
            Body::Quote(quote("10", "1", "11", "1")),
        ));
        assert!(!market.get(1).unwrap().suspect);
        // Out of range: ignored, no panic.
        market.apply(&event(
            5,
            EventKind::Quote,
            Body::Quote(quote("1", "1", "2", "1")),
        ));
        assert_eq!(market.get(0).unwrap().top, None);
    }
}
