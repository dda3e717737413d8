//! `OrderBook` against a plain `BTreeMap` oracle: random sequences of sets and removals (many of
//! them of levels the book does not hold), with the best prices, the top levels, the sizes and
//! what `set` reports compared after every step.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tickwire::book::{BookSide, LevelChange, OrderBook};
use tickwire::event::Quote;
use tickwire::fixed::Fixed;

/// Levels compared after every step: more than the book's linear scan window, so both search
/// paths are checked.
const TOP_DEPTH: usize = 40;

/// The oracle: one `BTreeMap<price, qty>` per side.
#[derive(Default)]
struct Oracle {
    bids: BTreeMap<Fixed, Fixed>,
    asks: BTreeMap<Fixed, Fixed>,
}

impl Oracle {
    fn side_mut(&mut self, side: BookSide) -> &mut BTreeMap<Fixed, Fixed> {
        match side {
            BookSide::Bid => &mut self.bids,
            BookSide::Ask => &mut self.asks,
        }
    }

    /// What `OrderBook::set` must report, computed independently.
    fn set(&mut self, side: BookSide, price: Fixed, qty: Fixed) -> LevelChange {
        let levels = self.side_mut(side);
        let previous = levels.get(&price).copied();
        if qty.0 <= 0 {
            match levels.remove(&price) {
                Some(previous_qty) => LevelChange::Removed { previous_qty },
                None => LevelChange::Absent,
            }
        } else {
            levels.insert(price, qty);
            match previous {
                None => LevelChange::Added,
                Some(previous_qty) if previous_qty == qty => LevelChange::Unchanged,
                Some(previous_qty) => LevelChange::Updated { previous_qty },
            }
        }
    }

    fn levels(&self, side: BookSide) -> Vec<(Fixed, Fixed)> {
        match side {
            BookSide::Bid => self.bids.iter().rev().map(|(&p, &q)| (p, q)).collect(),
            BookSide::Ask => self.asks.iter().map(|(&p, &q)| (p, q)).collect(),
        }
    }
}

fn assert_matches(book: &OrderBook, oracle: &Oracle) -> Result<(), TestCaseError> {
    let bids = oracle.levels(BookSide::Bid);
    let asks = oracle.levels(BookSide::Ask);
    prop_assert_eq!(book.best_bid(), bids.first().copied());
    prop_assert_eq!(book.best_ask(), asks.first().copied());
    prop_assert_eq!(book.len(BookSide::Bid), bids.len());
    prop_assert_eq!(book.len(BookSide::Ask), asks.len());
    let top_bids: Vec<_> = book.top_levels(BookSide::Bid, TOP_DEPTH).collect();
    let top_asks: Vec<_> = book.top_levels(BookSide::Ask, TOP_DEPTH).collect();
    prop_assert_eq!(&top_bids[..], &bids[..bids.len().min(TOP_DEPTH)]);
    prop_assert_eq!(&top_asks[..], &asks[..asks.len().min(TOP_DEPTH)]);
    let (bid_px, bid_sz) = bids.first().copied().unwrap_or_default();
    let (ask_px, ask_sz) = asks.first().copied().unwrap_or_default();
    prop_assert_eq!(
        book.top(),
        Quote {
            bid_px,
            bid_sz,
            ask_px,
            ask_sz
        }
    );
    let crossed = matches!((bids.first(), asks.first()), (Some(bid), Some(ask)) if bid.0 >= ask.0);
    prop_assert_eq!(book.is_crossed(), crossed);
    Ok(())
}

/// One operation: a side, a price among a few hundred ticks (so levels collide often and books
/// grow past the scan window), and a quantity that is zero (a removal) about a third of the time.
fn operation() -> impl Strategy<Value = (BookSide, Fixed, Fixed)> {
    (
        prop_oneof![Just(BookSide::Bid), Just(BookSide::Ask)],
        -20i64..300,
        prop_oneof![Just(0i64), Just(0i64), 1i64..4, -2i64..0],
    )
        .prop_map(|(side, tick, lots)| {
            (
                side,
                Fixed(60_000_000_000_000 + tick * 100_000_000),
                Fixed(lots * 1_000_000),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn order_book_matches_btreemap_oracle(operations in prop::collection::vec(operation(), 1..400)) {
        let mut book = OrderBook::with_capacity(64);
        let mut oracle = Oracle::default();
        for (side, price, qty) in operations {
            let change = book.set(side, price, qty);
            prop_assert_eq!(change, oracle.set(side, price, qty));
            prop_assert_eq!(book.get(side, price), oracle.side_mut(side).get(&price).copied());
            assert_matches(&book, &oracle)?;
        }
        for side in [BookSide::Bid, BookSide::Ask] {
            let levels: Vec<_> = book.levels(side).collect();
            prop_assert_eq!(levels, oracle.levels(side));
        }
        book.clear();
        prop_assert!(book.is_empty());
        prop_assert_eq!(book.top(), Quote::default());
    }

    #[test]
    fn load_side_matches_setting_each_level(
        levels in prop::collection::btree_map(0i64..2_000, -1i64..5, 0..300),
        later in prop::collection::vec(operation(), 0..50),
    ) {
        let levels: Vec<(Fixed, Fixed)> =
            levels.into_iter().map(|(price, qty)| (Fixed(price), Fixed(qty))).collect();
        let mut book = OrderBook::with_capacity(8);
        let mut oracle = Oracle::default();
        // Something to replace: loading must drop what the side held before.
        book.set(BookSide::Bid, Fixed(5_000), Fixed(1));
        for side in [BookSide::Bid, BookSide::Ask] {
            book.load_side(side, levels.iter().rev().copied());
            for &(price, qty) in &levels {
                oracle.set(side, price, qty);
            }
        }
        assert_matches(&book, &oracle)?;
        for (side, price, qty) in later {
            book.set(side, price, qty);
            oracle.set(side, price, qty);
            assert_matches(&book, &oracle)?;
        }
    }
}
