//! Thalex channel names, from the venue file's templates.
//!
//! The grammar is api.yaml's (`subs_market_data`): `ticker.<instrument>.<delay>`,
//! `lwt.<instrument>.<delay>`, `book.<instrument>.<grouping>.<nlevels>.<delay>`,
//! `recent_trades.<target>.<category>` and `price_index.<underlying>`, with
//!
//! - `delay` one of `100ms`, `200ms`, `500ms`, `1000ms`, `5000ms`, `60000ms`, `raw`;
//! - `grouping` "a USD value aligned to instrument or combination price tick size", or `none`;
//! - `nlevels` a number of levels, or `all`;
//! - `category` `single` (the target is an instrument), or `all`, `options`, `future_rolls`
//!   (the target is an underlying: "only valid for underlying recent trades").
//!
//! A venue file lists `symbols` (instrument names as Thalex spells them: `BTC-PERPETUAL`,
//! `BTC-27JUN25`, `BTC-27JUN25-100000-C`, a combination such as
//! `[BTC-27JUN25-100000-C:-1,BTC-27JUN25-110000-C:1]`) and `channels` as templates without the
//! target: `ticker.100ms`, `lwt.100ms`, `book.none.all.raw`, `book.0.5.10.100ms`,
//! `recent_trades.single`, `recent_trades.all`, `price_index`. Each stream's channel is the
//! template's kind, the target, then the template's parameters. The target is the instrument,
//! except for `price_index` and the underlying categories of `recent_trades`, whose target is
//! the instrument's underlying (`BTCUSD`, from the name before its first `-`).
//!
//! **Decisions the documentation leaves open.** It gives no list of groupings or level counts:
//! a grouping is `none` or a positive decimal (at most nine decimals, since the venue aligns it
//! to a tick), a level count `all` or a positive integer. A decimal grouping puts a dot into
//! the channel name (`book.ETH-PERPETUAL.0.5.10.raw`), so a target may hold no dot outside
//! brackets ([`check_symbol`]; no Thalex instrument has one), and a name splits at the first dot
//! after its target.

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
    /// `recent_trades.<target>.<category>`: an instrument's (`single`) or an underlying's trades.
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

/// The delays api.yaml lists for the throttled channels.
pub const DELAYS: [&str; 7] = [
    "raw", "100ms", "200ms", "500ms", "1000ms", "5000ms", "60000ms",
];
/// `recent_trades` categories: `single` takes an instrument, the others an underlying.
pub const TRADE_CATEGORIES: [&str; 4] = ["single", "all", "options", "future_rolls"];
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
                grouping_ok(grouping) && levels_ok(levels) && delay_ok(delay)
            }
            // A decimal grouping (`0.5`) is two fields.
            (ChannelKind::Book, [whole, fraction, levels, delay]) => {
                grouping_ok(&format!("{whole}.{fraction}")) && levels_ok(levels) && delay_ok(delay)
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
                    "book.<grouping>.<levels>.<delay> with grouping `none` or a positive USD \
                     value (such as 1 or 0.5) and levels `all` or a positive number"
                }
                ChannelKind::RecentTrades => {
                    "recent_trades.<category> with category one of single (the instrument's \
                     trades), all, options, future_rolls (its underlying's)"
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

    /// Splits a channel name into its template and its target: the target runs to the first
    /// dot after the kind that is outside brackets (a target holds none; see the module docs).
    /// `None` for a name that no template makes.
    pub fn split(name: &str) -> Option<(Template, &str)> {
        let (kind_text, rest) = name.split_once('.')?;
        let mut depth = 0i32;
        let mut end = rest.len();
        for (index, byte) in rest.bytes().enumerate() {
            match byte {
                b'[' => depth += 1,
                b']' => depth -= 1,
                b'.' if depth == 0 => {
                    end = index;
                    break;
                }
                _ => {}
            }
        }
        let target = &rest[..end];
        let params = rest.get(end + 1..).unwrap_or("");
        let template_text = if params.is_empty() {
            kind_text.to_owned()
        } else {
            format!("{kind_text}.{params}")
        };
        let template = Template::parse(&template_text).ok()?;
        (!target.is_empty()).then_some((template, target))
    }

    /// Whether the channel's target is the instrument's underlying rather than the instrument.
    pub fn targets_underlying(&self) -> bool {
        match self.kind {
            ChannelKind::PriceIndex => true,
            ChannelKind::RecentTrades => self.params != "single",
            ChannelKind::Ticker | ChannelKind::Lwt | ChannelKind::Book => false,
        }
    }

    /// The channel's target for `symbol`: the instrument, or its underlying.
    fn target(&self, symbol: &str) -> String {
        if self.targets_underlying() {
            underlying(symbol)
        } else {
            symbol.to_owned()
        }
    }

    /// The channel name for `symbol`.
    pub fn channel(&self, symbol: &str) -> String {
        let target = self.target(symbol);
        if self.params.is_empty() {
            format!("{}.{target}", self.kind.as_str())
        } else {
            format!("{}.{target}.{}", self.kind.as_str(), self.params)
        }
    }
}

/// `none`, or a positive decimal with at most nine decimals and no sign or exponent.
fn grouping_ok(grouping: &str) -> bool {
    if grouping == "none" {
        return true;
    }
    let (whole, fraction) = match grouping.split_once('.') {
        Some((_, "")) => return false,
        Some(parts) => parts,
        None => (grouping, ""),
    };
    let digits = |text: &str| text.bytes().all(|byte| byte.is_ascii_digit());
    !whole.is_empty()
        && digits(whole)
        && digits(fraction)
        && fraction.len() <= 9
        && !(whole.len() > 1 && whole.starts_with('0'))
        && grouping.bytes().any(|byte| (b'1'..=b'9').contains(&byte))
}

/// `all`, or a positive integer without a leading zero.
fn levels_ok(levels: &str) -> bool {
    levels == "all"
        || (!levels.is_empty()
            && levels.bytes().all(|byte| byte.is_ascii_digit())
            && !levels.starts_with('0'))
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
/// quotes or backslashes (the subscription text is built without escaping), and without a dot
/// outside brackets (a channel name's target ends at its first such dot).
pub fn check_symbol(symbol: &str) -> Result<(), String> {
    let mut depth = 0i32;
    let mut bare_dot = false;
    for byte in symbol.bytes() {
        match byte {
            b'[' => depth += 1,
            b']' => depth -= 1,
            b'.' if depth == 0 => bare_dot = true,
            _ => {}
        }
    }
    if symbol.is_empty()
        || bare_dot
        || !symbol
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'\\')
    {
        return Err(format!(
            "Thalex instrument `{symbol}` must be printable ASCII without spaces, quotes, \
             backslashes or dots"
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
                "book.none.all.raw",
                "BTC-PERPETUAL",
                "book.BTC-PERPETUAL.none.all.raw",
            ),
            (
                "book.0.5.20.200ms",
                "ETH-PERPETUAL",
                "book.ETH-PERPETUAL.0.5.20.200ms",
            ),
            (
                "recent_trades.single",
                combo,
                &format!("recent_trades.{combo}.single"),
            ),
            // api.yaml: `all`, `options`, `future_rolls` are "only valid for underlying
            // recent trades".
            (
                "recent_trades.all",
                "BTC-PERPETUAL",
                "recent_trades.BTCUSD.all",
            ),
            (
                "recent_trades.options",
                "ETH-27JUN25-3000-P",
                "recent_trades.ETHUSD.options",
            ),
            (
                "recent_trades.future_rolls",
                combo,
                "recent_trades.BTCUSD.future_rolls",
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
            ("book.none.all.raw", "BTC-PERPETUAL"),
            ("book.0.5.all.100ms", "ETH-PERPETUAL"),
            ("book.2.5.10.100ms", combo),
            ("recent_trades.single", "ETH-27JUN25-3000-P"),
            ("lwt.1000ms", "[A:0.5,B:-0.5]"),
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
        let (template, target) = Template::split("recent_trades.BTCUSD.options").unwrap();
        assert!(template.targets_underlying());
        assert_eq!(target, "BTCUSD");
        for name in [
            "system",
            "ticker.X",
            "book.X.1.10",
            "ticker..100ms",
            "account.orders",
            "recent_trades.X.normal",
        ] {
            assert_eq!(Template::split(name), None, "{name}");
        }
    }

    #[test]
    fn malformed_templates_say_what_is_expected() {
        for template in [
            "ticker",
            "ticker.1ms",
            "ticker.3600000ms",
            "ticker.BTC-PERPETUAL.100ms",
            "book.1.10",
            "book.0.10.100ms",
            "book.0.0.10.100ms",
            "book.1.0.100ms",
            "book.1.010.100ms",
            "book.-1.10.100ms",
            "book.1e3.10.100ms",
            "book.01.10.100ms",
            "book.1.some.100ms",
            "book.1..10.100ms",
            "recent_trades.some",
            "recent_trades.normal",
            "recent_trades.block",
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
        assert!(check_symbol("[A:0.5,B:-0.5]").is_ok());
        for bad in ["", "BTC PERP", "BTC\"", "BTC\\", "BTC.PERP"] {
            assert!(check_symbol(bad).is_err(), "{bad}");
        }
    }
}
