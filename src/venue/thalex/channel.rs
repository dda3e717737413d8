//! Thalex channel names, from the venue file's templates.
//!
//! A venue file lists `symbols` (instrument names as Thalex spells them: `BTC-PERPETUAL`,
//! `BTC-27JUN25`, `BTC-27JUN25-100000-C`, a combination such as
//! `[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]`) and `channels` as templates without the
//! instrument: `ticker.100ms`, `lwt.100ms`, `book.1.10.100ms`, `recent_trades.all`,
//! `price_index`. Each stream's channel is the template's kind, the instrument, then the
//! template's parameters: `book.BTC-PERPETUAL.1.10.100ms`. `price_index` takes the instrument's
//! underlying instead (`price_index.BTCUSD`, from the name before its first `-`).
//!
//! Instrument names contain `-`, `:`, `,` and brackets, so a channel name is never split on
//! dots: [`Template::parse`] reads a template, and names are only ever built, never parsed.

use std::fmt;

/// What a channel carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// `ticker.<instrument>.<delay>`: best bid and ask, mark, last, index.
    Ticker,
    /// `lwt.<instrument>.<delay>`: the lightweight ticker `{"b":[p,a,a],"a":[..],"l":..,"m":..}`.
    Lwt,
    /// `book.<instrument>.<grouping>.<nlevels>.<delay>`: a snapshot, then level changes.
    Book,
    /// `recent_trades.<instrument>.<category>`.
    RecentTrades,
    /// `price_index.<underlying>`.
    PriceIndex,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Ticker => "ticker",
            ChannelKind::Lwt => "lwt",
            ChannelKind::Book => "book",
            ChannelKind::RecentTrades => "recent_trades",
            ChannelKind::PriceIndex => "price_index",
        }
    }
}

/// The delays Thalex's throttled channels accept.
pub const DELAYS: [&str; 8] = [
    "raw",
    "100ms",
    "200ms",
    "500ms",
    "1000ms",
    "5000ms",
    "60000ms",
    "3600000ms",
];
/// Book depths Thalex accepts.
pub const BOOK_LEVELS: [&str; 5] = ["1", "5", "10", "20", "40"];
/// `recent_trades` categories.
pub const TRADE_CATEGORIES: [&str; 4] = ["all", "normal", "block", "combo"];
/// The channel every connection subscribes besides the venue file's: venue announcements,
/// among them `{"event":"reconnect"}` before a planned disconnect.
pub const SYSTEM_CHANNEL: &str = "system";

/// A venue file's channel template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub kind: ChannelKind,
    /// What follows the instrument, without the leading dot (empty for `price_index`).
    pub params: String,
}

impl Template {
    /// Reads and checks a template, with an error that says what a valid one looks like.
    pub fn parse(template: &str) -> Result<Template, String> {
        let (kind_text, params) = template.split_once('.').unwrap_or((template, ""));
        let fields: Vec<&str> = if params.is_empty() {
            Vec::new()
        } else {
            params.split('.').collect()
        };
        let kind = match kind_text {
            "ticker" => ChannelKind::Ticker,
            "lwt" => ChannelKind::Lwt,
            "book" => ChannelKind::Book,
            "recent_trades" => ChannelKind::RecentTrades,
            "price_index" => ChannelKind::PriceIndex,
            _ => {
                return Err(format!(
                    "unknown Thalex channel `{template}`: expected ticker.<delay>, lwt.<delay>, \
                     book.<grouping>.<levels>.<delay>, recent_trades.<category> or price_index \
                     (the instrument comes from `symbols`)"
                ))
            }
        };
        let delay_ok = |delay: &str| DELAYS.contains(&delay);
        let valid = match (kind, fields.as_slice()) {
            (ChannelKind::Ticker | ChannelKind::Lwt, [delay]) => delay_ok(delay),
            (ChannelKind::Book, [grouping, levels, delay]) => {
                grouping.parse::<u32>().is_ok_and(|g| g > 0)
                    && BOOK_LEVELS.contains(levels)
                    && delay_ok(delay)
            }
            (ChannelKind::RecentTrades, [category]) => TRADE_CATEGORIES.contains(category),
            (ChannelKind::PriceIndex, []) => true,
            _ => false,
        };
        if !valid {
            let shape = match kind {
                ChannelKind::Ticker => "ticker.<delay>",
                ChannelKind::Lwt => "lwt.<delay>",
                ChannelKind::Book => {
                    "book.<grouping>.<levels>.<delay> with levels one of 1, 5, 10, 20, 40"
                }
                ChannelKind::RecentTrades => {
                    "recent_trades.<category> with category one of all, normal, block, combo"
                }
                ChannelKind::PriceIndex => "price_index (no parameters)",
            };
            return Err(format!(
                "Thalex channel `{template}` is malformed: expected {shape}; delays are {}",
                DELAYS.join(", ")
            ));
        }
        Ok(Template {
            kind,
            params: params.to_owned(),
        })
    }

    /// Splits a channel name into its template and its target (instrument or underlying),
    /// reading the parameters from the end, so an instrument name's own punctuation never
    /// matters. `None` for a name that no template makes.
    pub fn split(name: &str) -> Option<(Template, &str)> {
        let (kind_text, rest) = name.split_once('.')?;
        let params = match kind_text {
            "ticker" | "lwt" | "recent_trades" => 1,
            "book" => 3,
            "price_index" => 0,
            _ => return None,
        };
        let mut target = rest;
        let mut cut = rest.len();
        for _ in 0..params {
            cut = target.rfind('.')?;
            target = &target[..cut];
        }
        let params = rest.get(cut + 1..).unwrap_or("");
        let template_text = if params.is_empty() {
            kind_text.to_owned()
        } else {
            format!("{kind_text}.{params}")
        };
        let template = Template::parse(&template_text).ok()?;
        (!target.is_empty()).then_some((template, target))
    }

    /// The channel name for `symbol`.
    pub fn channel(&self, symbol: &str) -> String {
        let target = match self.kind {
            ChannelKind::PriceIndex => underlying(symbol),
            _ => symbol.to_owned(),
        };
        if self.params.is_empty() {
            format!("{}.{target}", self.kind.as_str())
        } else {
            format!("{}.{target}.{}", self.kind.as_str(), self.params)
        }
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.params.is_empty() {
            f.write_str(self.kind.as_str())
        } else {
            write!(f, "{}.{}", self.kind.as_str(), self.params)
        }
    }
}

/// An instrument's underlying index: its currency before the first `-` (inside a combination's
/// brackets, of its first leg) followed by `USD`, as Thalex names its indices (`BTCUSD`).
pub fn underlying(symbol: &str) -> String {
    let name = symbol.trim_start_matches('[');
    let currency = name.split(['-', ':', ',', ']']).next().unwrap_or(name);
    format!("{currency}USD")
}

/// Why an instrument name cannot be used: it must be non-empty printable ASCII without spaces,
/// quotes or backslashes (the subscription text is built without escaping).
pub fn check_symbol(symbol: &str) -> Result<(), String> {
    if symbol.is_empty()
        || !symbol
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'\\')
    {
        return Err(format!(
            "Thalex instrument `{symbol}` must be printable ASCII without spaces, quotes or \
             backslashes"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_make_channel_names_for_any_instrument() {
        let combo = "[BTC-30MAY25-93000-C:-1,BTC-30MAY25-95000-C:1]";
        let cases = [
            (
                "ticker.100ms",
                "BTC-PERPETUAL",
                "ticker.BTC-PERPETUAL.100ms",
            ),
            ("lwt.raw", "ETH-27JUN25", "lwt.ETH-27JUN25.raw"),
            (
                "book.1.10.100ms",
                "BTC-27JUN25-100000-C",
                "book.BTC-27JUN25-100000-C.1.10.100ms",
            ),
            (
                "recent_trades.all",
                combo,
                &format!("recent_trades.{combo}.all"),
            ),
            ("price_index", "BTC-PERPETUAL", "price_index.BTCUSD"),
            ("price_index", combo, "price_index.BTCUSD"),
        ];
        for (template, symbol, channel) in cases {
            let parsed = Template::parse(template).unwrap();
            assert_eq!(parsed.channel(symbol), channel);
            assert_eq!(parsed.to_string(), template);
        }
    }

    #[test]
    fn names_split_back_into_template_and_target() {
        let combo = "[BTC-30MAY25-93000-C:-1,BTC-30MAY25-95000-C:1]";
        for (template, symbol) in [
            ("ticker.100ms", "BTC-PERPETUAL"),
            ("book.5.20.raw", combo),
            ("recent_trades.block", "ETH-27JUN25-3000-P"),
            ("lwt.1000ms", "BTC.ODD.NAME"),
        ] {
            let parsed = Template::parse(template).unwrap();
            let name = parsed.channel(symbol);
            assert_eq!(Template::split(&name), Some((parsed, symbol)), "{name}");
        }
        let (template, target) = Template::split("price_index.BTCUSD").unwrap();
        assert_eq!(
            (template.to_string().as_str(), target),
            ("price_index", "BTCUSD")
        );
        for name in [
            "system",
            "ticker.X",
            "book.X.1.10",
            "ticker..100ms",
            "account.orders",
        ] {
            assert_eq!(Template::split(name), None, "{name}");
        }
    }

    #[test]
    fn malformed_templates_say_what_is_expected() {
        for template in [
            "ticker",
            "ticker.1ms",
            "ticker.BTC-PERPETUAL.100ms",
            "book.1.10",
            "book.0.10.100ms",
            "book.1.7.100ms",
            "recent_trades.some",
            "price_index.BTCUSD",
            "depth",
        ] {
            let error = Template::parse(template).unwrap_err();
            assert!(error.contains(template), "{error}");
            assert!(error.contains("expected"), "{error}");
        }
    }

    #[test]
    fn symbols_must_be_safe_to_embed() {
        assert!(check_symbol("[BTC-30MAY25-93000-C:-1,BTC-30MAY25-95000-C:1]").is_ok());
        for bad in ["", "BTC PERP", "BTC\"", "BTC\\"] {
            assert!(check_symbol(bad).is_err(), "{bad}");
        }
    }
}
