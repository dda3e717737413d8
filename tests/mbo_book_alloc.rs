//! Keeping an L3 book up to date allocates nothing once `MboBook::with_capacity` has reserved
//! room for the stream's orders and levels: adds, cancels, modifies, executions, rejected
//! records and clears, counted by a global allocator that wraps the system one. A test binary of
//! its own, because the allocator is process-wide.

use crate::support::counting_alloc;
use crate::support::mbo_stream;

use counting_alloc::allocations;
use mbo_stream::{IdPattern, Stream};
use std::hint::black_box;
use tickwire::book::mbo::MboBook;
use tickwire::book::BookSide;

#[test]
fn steady_state_allocates_nothing() {
    for ids in [IdPattern::Sequential, IdPattern::CmeLike, IdPattern::Random] {
        // Invalid records and clears included: neither may allocate either.
        let records = Stream::new(3, ids, 5_000)
            .rates(10_000, 100)
            .records(200_000);
        let mut book = MboBook::with_capacity(32_768, 2_048);
        let mut checksum = 0u64;
        let before = allocations();
        for record in &records {
            let result = book.apply(
                record.action,
                record.side,
                record.order_id,
                record.price,
                record.size,
                &mut |update| checksum = checksum.wrapping_add(update.size ^ update.price as u64),
            );
            checksum = checksum.wrapping_add(u64::from(result.is_ok()));
            if let Some((price, size, count)) = book.best(BookSide::Bid) {
                checksum ^= price as u64 ^ size ^ u64::from(count);
            }
        }
        book.clear(&mut |update| checksum = checksum.wrapping_add(update.price as u64));
        let during = allocations() - before;
        black_box(checksum);
        assert_eq!(
            during, 0,
            "{ids:?}: {during} allocations in 200,000 records"
        );
        assert!(book.is_empty());
    }
}

#[test]
fn a_book_that_outgrows_its_capacity_still_works() {
    // Growth allocates (once per doubling), and the grown book keeps every order.
    let mut book = MboBook::with_capacity(4, 2);
    let before = allocations();
    for order_id in 0..1_000u64 {
        let result = book.apply(
            b'A',
            b'B',
            order_id * 7_919,
            order_id as i64,
            1,
            &mut |_| {},
        );
        assert_eq!(result, Ok(()));
    }
    assert!(allocations() > before);
    assert_eq!(book.orders(), 1_000);
    assert!((0..1_000u64).all(|order_id| book.order(order_id * 7_919).is_some()));
}
