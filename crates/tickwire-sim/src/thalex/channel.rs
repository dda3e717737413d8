//! The public channel names the simulator accepts, by the grammar of Thalex's API description
//! (`api.yaml`, tag `subs_market_data`):
//!
//! - `ticker.<instrument>.<delay>` and `lwt.<instrument>.<delay>`;
//! - `book.<instrument>.<grouping>.<nlevels>.<delay>`: `grouping` is `none` or a positive USD
//!   value aligned to the tick size (`0.5`, `10`), `nlevels` a positive integer or `all`;
//! - `recent_trades.<target>.<category>`: `single` with an instrument, or `all`, `options`,
//!   `future_rolls` with an underlying (`BTCUSD`); any other pairing is invalid;
//! - `price_index.<underlying>` and `system`.
//!
//! `delay` is one of [`DELAYS`]. Instrument names hold `-`, `:`, `,`, `[` and `]` but never
//! `.`; a decimal grouping does, so a `book` name is read from the end for `delay` and
//! `nlevels`, and the instrument is everything between the first `.` and the grouping.
//!
//! An instrument must be one the simulator serves, and an underlying one of [`UNDERLYINGS`];
//! anything else is invalid and left out of the subscribe result, as Thalex leaves out channels
//! it does not know.

use super::market::{TICK_NANO_USD, UNDERLYINGS};

/// The delays a `ticker`, `lwt` or `book` channel may name. The simulator paces every channel by
/// its `rate`, whatever the delay.
pub const DELAYS: [&str; 7] = [
    "100ms", "200ms", "500ms", "1000ms", "5000ms", "60000ms", "raw",
];

/// The categories of a `recent_trades` channel: `single` on an instrument, the others on an
/// underlying.
pub const TRADE_CATEGORIES: [&str; 4] = ["single", "all", "options", "future_rolls"];

/// Which instruments of an underlying an underlying `recent_trades` channel carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Category {
    /// Every instrument of the underlying.
    All,
    /// Its options.
    Options,
    /// Its combinations of two futures, or of a future and a perpetual.
    FutureRolls,
}

/// What a `recent_trades` channel is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TradeTarget {
    /// `recent_trades.<instrument>.single`.
    Instrument(usize),
    /// `recent_trades.<underlying>.<category>`; `underlying` indexes [`UNDERLYINGS`].
    Underlying {
        underlying: usize,
        category: Category,
    },
}

/// What a public channel name asks for; instruments are indices into the served list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Channel {
    Ticker {
        instrument: usize,
    },
    Lwt {
        instrument: usize,
    },
    Book {
        instrument: usize,
        /// The grouping in ticks; `none` is 1.
        grouping_ticks: i64,
        /// `None` for `all`.
        levels: Option<usize>,
    },
    RecentTrades(TradeTarget),
    PriceIndex {
        underlying: usize,
    },
    System,
}

/// Parses a public channel name against the served instruments; `None` when it is invalid.
pub(super) fn parse(name: &str, instruments: &[String]) -> Option<Channel> {
    if name == "system" {
        return Some(Channel::System);
    }
    let (kind, rest) = name.split_once('.')?;
    let instrument_index =
        |instrument: &str| instruments.iter().position(|known| known == instrument);
    let underlying_index = |target: &str| UNDERLYINGS.iter().position(|known| *known == target);
    match kind {
        "ticker" | "lwt" => {
            let (instrument, delay) = rest.rsplit_once('.')?;
            if !DELAYS.contains(&delay) {
                return None;
            }
            let instrument = instrument_index(instrument)?;
            Some(if kind == "ticker" {
                Channel::Ticker { instrument }
            } else {
                Channel::Lwt { instrument }
            })
        }
        "book" => {
            let (rest, delay) = rest.rsplit_once('.')?;
            let (rest, levels) = rest.rsplit_once('.')?;
            let (instrument, grouping) = rest.split_once('.')?;
            if !DELAYS.contains(&delay) {
                return None;
            }
            let levels = match levels {
                "all" => None,
                count => Some(positive_integer(count)?),
            };
            Some(Channel::Book {
                instrument: instrument_index(instrument)?,
                grouping_ticks: grouping_ticks(grouping)?,
                levels,
            })
        }
        "recent_trades" => {
            let (target, category) = rest.rsplit_once('.')?;
            let category = match category {
                "single" => {
                    return Some(Channel::RecentTrades(TradeTarget::Instrument(
                        instrument_index(target)?,
                    )))
                }
                "all" => Category::All,
                "options" => Category::Options,
                "future_rolls" => Category::FutureRolls,
                _ => return None,
            };
            Some(Channel::RecentTrades(TradeTarget::Underlying {
                underlying: underlying_index(target)?,
                category,
            }))
        }
        "price_index" => Some(Channel::PriceIndex {
            underlying: underlying_index(rest)?,
        }),
        _ => None,
    }
}

/// A positive decimal integer without sign or leading zero.
fn positive_integer(text: &str) -> Option<usize> {
    let plain = !text.is_empty()
        && text.bytes().all(|byte| byte.is_ascii_digit())
        && !text.starts_with('0');
    plain.then(|| text.parse().ok()).flatten()
}

/// A `book` grouping in ticks: `none` is one tick; otherwise a plain positive decimal
/// (`0.5`, `10`, `2.50`; no sign, exponent, leading zero before a digit, or bare `.`) that is
/// a whole number of ticks.
fn grouping_ticks(text: &str) -> Option<i64> {
    if text == "none" {
        return Some(1);
    }
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() => (whole, fraction),
        Some(_) => return None,
        None => (text, ""),
    };
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || (whole.len() > 1 && whole.starts_with('0'))
        || fraction.len() > 9
    {
        return None;
    }
    let fraction_nano: u64 = format!("{fraction:0<9}").parse().ok()?;
    let nano_usd = whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(fraction_nano)?;
    if nano_usd == 0 || nano_usd % TICK_NANO_USD != 0 {
        return None;
    }
    i64::try_from(nano_usd / TICK_NANO_USD).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_grammar() {
        let names = super::super::default_instruments();
        let combo = "[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]";
        let book = |instrument, grouping_ticks, levels| {
            Some(Channel::Book {
                instrument,
                grouping_ticks,
                levels,
            })
        };
        assert_eq!(
            parse(&format!("book.{combo}.5.10.100ms"), &names),
            book(4, 10, Some(10))
        );
        assert_eq!(
            parse("book.BTC-PERPETUAL.none.all.raw", &names),
            book(0, 1, None)
        );
        assert_eq!(
            parse("book.BTC-PERPETUAL.0.5.3.raw", &names),
            book(0, 1, Some(3))
        );
        assert_eq!(
            parse("book.BTC-PERPETUAL.2.50.7.raw", &names),
            book(0, 5, Some(7))
        );
        assert_eq!(
            parse("ticker.BTC-27JUN25-100000-C.60000ms", &names),
            Some(Channel::Ticker { instrument: 3 })
        );
        assert_eq!(
            parse(&format!("lwt.{combo}.raw"), &names),
            Some(Channel::Lwt { instrument: 4 })
        );
        assert_eq!(
            parse("recent_trades.ETHUSD.all", &names),
            Some(Channel::RecentTrades(TradeTarget::Underlying {
                underlying: 1,
                category: Category::All
            }))
        );
        assert_eq!(
            parse("recent_trades.BTCUSD.future_rolls", &names),
            Some(Channel::RecentTrades(TradeTarget::Underlying {
                underlying: 0,
                category: Category::FutureRolls
            }))
        );
        assert_eq!(
            parse("recent_trades.BTC-27JUN25-100000-C.single", &names),
            Some(Channel::RecentTrades(TradeTarget::Instrument(3)))
        );
        assert_eq!(parse("system", &names), Some(Channel::System));
        assert_eq!(
            parse("price_index.ETHUSD", &names),
            Some(Channel::PriceIndex { underlying: 1 })
        );
        for bad in [
            "ticker.BTC-PERPETUAL.50ms",
            "ticker.BTC-PERPETUAL.3600000ms",
            "ticker.NOPE.raw",
            "ticker.BTC-PERPETUAL",
            "book.BTC-PERPETUAL.0.10.100ms",
            "book.BTC-PERPETUAL.0.25.10.100ms",
            "book.BTC-PERPETUAL.1.0.100ms",
            "book.BTC-PERPETUAL.1.010.100ms",
            "book.BTC-PERPETUAL.01.10.100ms",
            "book.BTC-PERPETUAL..5.10.100ms",
            "book.BTC-PERPETUAL.5..10.100ms",
            "book.BTC-PERPETUAL.-1.10.100ms",
            "book.BTC-PERPETUAL.1e1.10.100ms",
            "book.BTC-PERPETUAL.NONE.10.100ms",
            "book.BTC-PERPETUAL.1.ALL.100ms",
            "book.BTC-PERPETUAL.10.100ms",
            "recent_trades.BTCUSD.single",
            "recent_trades.BTC-PERPETUAL.all",
            "recent_trades.BTC-PERPETUAL.options",
            "recent_trades.BTC-PERPETUAL.future_rolls",
            "recent_trades.BTCUSD.normal",
            "recent_trades.BTCUSD.block",
            "recent_trades.XRPUSD.all",
            "price_index.XRPUSD",
            "price_index.BTC-PERPETUAL",
            "lwt..raw",
            "candles.BTC-PERPETUAL.1m",
            "system.x",
            "",
        ] {
            assert_eq!(parse(bad, &names), None, "{bad}");
        }
    }
}
