//! Fixed-point decimals: prices and sizes as `i64` counts of 1e-9, the scale DBN uses.
//!
//! Venue JSON carries prices as decimal strings (`"61234.50"`); they become integers here without
//! ever passing through a float, so no value is rounded: `parse` followed by `Display` gives back
//! the same number with every significant digit as the venue wrote it. `Display` writes the
//! number's one canonical form, so zeros that carry no value are not kept: no `+` sign, no leading
//! zeros before the integer part (`0` stays), no trailing zeros after the point and no point
//! without digits after it, and no sign on zero (`"61234.50"` gives `61234.5`, `"+007.000"` gives
//! `7`, `"-0.0"` gives `0`). A float is only made on request (`to_f64`), for display and
//! strategies that want one.

use std::fmt;

/// Decimal digits after the point that a [`Fixed`] holds.
pub const DECIMALS: u32 = 9;
/// One unit, as the raw integer: 1.0 == `Fixed(SCALE)`.
pub const SCALE: i64 = 1_000_000_000;

/// Powers of ten up to `SCALE`: `POW10[9 - n]` scales a fraction of `n` digits to nine, for the
/// decoders that read decimals straight into raw units.
pub const POW10: [u64; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// A signed decimal with nine digits after the point, stored as `value * 1e9` in an `i64`.
///
/// The range is about ±9.22e9, which holds every price and size the supported venues quote
/// (BTC at 1e5 with 8 decimals is far inside it).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Fixed(pub i64);

/// Why a decimal string was refused. Small and `Copy`: it is returned on the decode path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty number")]
    Empty,
    #[error("unexpected byte {byte:#04x} at offset {offset}")]
    InvalidByte { byte: u8, offset: usize },
    #[error("no digits")]
    NoDigits,
    #[error("more than 9 significant digits after the decimal point")]
    TooPrecise,
    #[error("magnitude beyond the i64 range of 1e-9 units")]
    Overflow,
}

impl Fixed {
    pub const ZERO: Fixed = Fixed(0);
    pub const MAX: Fixed = Fixed(i64::MAX);
    pub const MIN: Fixed = Fixed(i64::MIN);

    /// The raw count of 1e-9 units.
    #[inline]
    pub const fn raw(self) -> i64 {
        self.0
    }

    /// A whole number of units, `None` if it does not fit.
    pub const fn from_units(units: i64) -> Option<Fixed> {
        match units.checked_mul(SCALE) {
            Some(raw) => Some(Fixed(raw)),
            None => None,
        }
    }

    /// Parses a plain decimal such as `61234.50`, `-0.001` or `+7`: an optional sign, digits, and
    /// an optional point with digits after it. Digits beyond the ninth after the point are
    /// accepted only when they are zeros, so a parse never rounds. Exponents, spaces and
    /// thousands separators are refused.
    #[inline]
    pub fn parse(text: &[u8]) -> Result<Fixed, ParseError> {
        let (negative, digits) = match text.first() {
            None => return Err(ParseError::Empty),
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            Some(_) => (false, text),
        };
        let sign_len = text.len() - digits.len();
        let mut integer: u64 = 0;
        let mut integer_digits = 0usize;
        let mut fraction: u64 = 0;
        let mut fraction_digits = 0u32;
        let mut seen_point = false;
        let mut any_digit = false;
        for (index, &byte) in digits.iter().enumerate() {
            match byte {
                b'0'..=b'9' => {
                    any_digit = true;
                    let digit = u64::from(byte - b'0');
                    if !seen_point {
                        // Leading zeros do not count towards the overflow limit.
                        if integer == 0 && digit == 0 {
                            continue;
                        }
                        integer_digits += 1;
                        // u64 holds any 19-digit number; anything longer overflows the i64
                        // range after scaling anyway.
                        if integer_digits > 19 {
                            return Err(ParseError::Overflow);
                        }
                        integer = integer * 10 + digit;
                    } else if fraction_digits < DECIMALS {
                        fraction = fraction * 10 + digit;
                        fraction_digits += 1;
                    } else if digit != 0 {
                        return Err(ParseError::TooPrecise);
                    }
                }
                b'.' if !seen_point => seen_point = true,
                _ => {
                    return Err(ParseError::InvalidByte {
                        byte,
                        offset: sign_len + index,
                    })
                }
            }
        }
        if !any_digit {
            return Err(ParseError::NoDigits);
        }
        let fraction = fraction * 10u64.pow(DECIMALS - fraction_digits);
        let magnitude = integer
            .checked_mul(SCALE as u64)
            .and_then(|scaled| scaled.checked_add(fraction))
            .ok_or(ParseError::Overflow)?;
        if negative {
            // The negative range is one larger: i64::MIN is -(2^63).
            if magnitude > i64::MAX as u64 + 1 {
                return Err(ParseError::Overflow);
            }
            Ok(Fixed((magnitude as i64).wrapping_neg()))
        } else {
            i64::try_from(magnitude)
                .map(Fixed)
                .map_err(|_| ParseError::Overflow)
        }
    }

    /// Parses a `&str`; see [`Fixed::parse`].
    pub fn parse_str(text: &str) -> Result<Fixed, ParseError> {
        Fixed::parse(text.as_bytes())
    }

    /// The nearest `f64`, for display and for strategies that work in floats.
    #[inline]
    pub fn to_f64(self) -> f64 {
        self.0 as f64 / SCALE as f64
    }

    /// Writes the shortest exact decimal form (`61234.5`, `-0.001`, `0`) into `out` and returns
    /// the bytes written. No allocation: the longest form is 21 bytes.
    pub fn write_to(self, out: &mut [u8; 21]) -> usize {
        let negative = self.0 < 0;
        let magnitude = self.0.unsigned_abs();
        let integer = magnitude / SCALE as u64;
        let mut fraction = magnitude % SCALE as u64;
        let mut fraction_digits = DECIMALS;
        while fraction_digits > 0 && fraction % 10 == 0 {
            fraction /= 10;
            fraction_digits -= 1;
        }
        // Write backwards from the end, then move the result to the front.
        let mut cursor = out.len();
        for _ in 0..fraction_digits {
            cursor -= 1;
            out[cursor] = b'0' + (fraction % 10) as u8;
            fraction /= 10;
        }
        if fraction_digits > 0 {
            cursor -= 1;
            out[cursor] = b'.';
        }
        let mut integer_left = integer;
        loop {
            cursor -= 1;
            out[cursor] = b'0' + (integer_left % 10) as u8;
            integer_left /= 10;
            if integer_left == 0 {
                break;
            }
        }
        if negative {
            cursor -= 1;
            out[cursor] = b'-';
        }
        let len = out.len() - cursor;
        out.copy_within(cursor.., 0);
        len
    }
}

impl fmt::Display for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 21];
        let len = self.write_to(&mut buf);
        // The buffer holds only ASCII digits, '-' and '.', so it is valid UTF-8.
        let text = std::str::from_utf8(&buf[..len]).map_err(|_| fmt::Error)?;
        f.pad(text)
    }
}

impl fmt::Debug for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fixed({self})")
    }
}

impl std::str::FromStr for Fixed {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Fixed, ParseError> {
        Fixed::parse_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Result<i64, ParseError> {
        Fixed::parse_str(text).map(Fixed::raw)
    }

    #[test]
    fn parses_venue_forms() {
        assert_eq!(parse("61234.50"), Ok(61_234_500_000_000));
        assert_eq!(parse("0.001"), Ok(1_000_000));
        assert_eq!(parse("-0.001"), Ok(-1_000_000));
        assert_eq!(parse("+7"), Ok(7_000_000_000));
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("-0"), Ok(0));
        assert_eq!(parse("000012.5"), Ok(12_500_000_000));
        assert_eq!(parse("0.000000001"), Ok(1));
        assert_eq!(parse("1.123456789000"), Ok(1_123_456_789));
        assert_eq!(parse(".5"), Ok(500_000_000));
        assert_eq!(parse("5."), Ok(5_000_000_000));
        assert_eq!(parse("9223372036.854775807"), Ok(i64::MAX));
        assert_eq!(parse("-9223372036.854775808"), Ok(i64::MIN));
    }

    #[test]
    fn refuses_what_it_cannot_hold_exactly() {
        assert_eq!(parse(""), Err(ParseError::Empty));
        assert_eq!(parse("-"), Err(ParseError::NoDigits));
        assert_eq!(parse("."), Err(ParseError::NoDigits));
        assert_eq!(parse("0.0000000001"), Err(ParseError::TooPrecise));
        assert_eq!(parse("9223372036.854775808"), Err(ParseError::Overflow));
        assert_eq!(parse("-9223372036.854775809"), Err(ParseError::Overflow));
        assert_eq!(parse("99999999999999999999"), Err(ParseError::Overflow));
        assert_eq!(
            parse("1e5"),
            Err(ParseError::InvalidByte {
                byte: b'e',
                offset: 1
            })
        );
        assert_eq!(
            parse("1.2.3"),
            Err(ParseError::InvalidByte {
                byte: b'.',
                offset: 3
            })
        );
        assert_eq!(
            parse("-1 "),
            Err(ParseError::InvalidByte {
                byte: b' ',
                offset: 2
            })
        );
    }

    #[test]
    fn formats_shortest_exact_form() {
        for (raw, text) in [
            (0, "0"),
            (1, "0.000000001"),
            (-1, "-0.000000001"),
            (61_234_500_000_000, "61234.5"),
            (SCALE, "1"),
            (i64::MAX, "9223372036.854775807"),
            (i64::MIN, "-9223372036.854775808"),
        ] {
            assert_eq!(Fixed(raw).to_string(), text);
        }
        assert_eq!(format!("{:>6}", Fixed(SCALE / 2)), "   0.5");
    }

    /// The oracle: the module documentation's canonical form, made from a decimal string by string
    /// manipulation alone (no `+`, no leading zeros, no trailing zeros after the point, no sign on
    /// zero).
    fn normalise(text: &str) -> String {
        let (negative, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (integer, fraction) = body.split_once('.').unwrap_or((body, ""));
        let integer = integer.trim_start_matches('0');
        let fraction = fraction.trim_end_matches('0');
        let integer = if integer.is_empty() { "0" } else { integer };
        let mut out = String::new();
        if negative && !(integer == "0" && fraction.is_empty()) {
            out.push('-');
        }
        out.push_str(integer);
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(fraction);
        }
        out
    }

    /// The digits that carry value, in order: the input's digits with the leading and trailing
    /// zeros the documentation lets `Display` drop removed, the point's position kept apart.
    fn significant(text: &str) -> (bool, String, String) {
        let negative = text.starts_with('-');
        let body = text.trim_start_matches(['-', '+']);
        let (integer, fraction) = body.split_once('.').unwrap_or((body, ""));
        let integer = integer.trim_start_matches('0').to_owned();
        let fraction = fraction.trim_end_matches('0').to_owned();
        let zero = integer.is_empty() && fraction.is_empty();
        (negative && !zero, integer, fraction)
    }

    #[test]
    fn the_documented_examples() {
        for (text, shown) in [("61234.50", "61234.5"), ("+007.000", "7"), ("-0.0", "0")] {
            assert_eq!(Fixed::parse_str(text).unwrap().to_string(), shown, "{text}");
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(raw in any::<i64>()) {
            prop_assert_eq!(parse(&Fixed(raw).to_string()), Ok(raw));
        }

        #[test]
        fn parse_then_display_keeps_every_significant_digit(
            sign in prop_oneof![Just(""), Just("-"), Just("+")],
            integer in "[0-9]{1,10}",
            fraction in "[0-9]{0,9}",
            trailing_zeros in 0usize..4,
        ) {
            let text = format!("{sign}{integer}.{fraction}{}", "0".repeat(trailing_zeros));
            match Fixed::parse_str(&text) {
                Ok(value) => {
                    let shown = value.to_string();
                    // What the documentation promises, said directly: the same sign and
                    // significant digits on each side of the point, and the canonical form.
                    prop_assert_eq!(significant(&shown), significant(&text));
                    prop_assert!(!shown.starts_with('+'));
                    prop_assert!(!shown.ends_with('0') || !shown.contains('.'));
                    prop_assert!(!shown.ends_with('.'));
                    prop_assert!(shown != "-0");
                    prop_assert_eq!(&shown, &normalise(&text));
                    prop_assert_eq!(Fixed::parse_str(&shown), Ok(value));
                }
                // Only a ten-digit integer part can leave the range.
                Err(error) => {
                    prop_assert_eq!(error, ParseError::Overflow);
                    prop_assert!(integer.trim_start_matches('0').len() >= 10);
                }
            }
        }
    }
}
