//! Fast readers for the shapes Binance actually sends, eight bytes at a time.
//!
//! Each reader answers `Some` only for inputs it is sure about and `None` for anything else
//! (a sign, a long digit run, a stray byte, the end of the input); the caller then runs the
//! exact, byte-by-byte reader, which accepts or refuses with the precise error. So a `Some`
//! here must always equal what the exact reader returns, and the tests check exactly that:
//! [`quoted_decimal`] against [`Fixed::parse`], [`integer`] against the JSON integer rules.
//!
//! The digit tricks are SWAR ("SIMD within a register") on a little-endian `u64`: which bytes
//! are not ASCII digits, in one add and one or; then up to eight digits to their value in three
//! multiply-and-mask steps, each merging neighbouring lanes (pairs, then fours, then eights), as
//! Daniel Lemire describes in "Quickly parsing eight digits" (lemire.me, 2022). No `unsafe`:
//! loads go through `first_chunk`, which the compiler turns into one unaligned load.

use crate::fixed::{Fixed, POW10, SCALE};

/// `b'0'` in every byte lane.
const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;
/// The top bit of every byte lane.
const LANE_TOPS: u64 = 0x8080_8080_8080_8080;

/// The eight bytes at `pos` as a little-endian `u64` (the byte at `pos` in the low lane). Past
/// the end of `bytes` the lanes are zero, which is not a digit, a quote or a point, so no
/// reader below can mistake the padding for input.
#[inline(always)]
fn load8(bytes: &[u8], pos: usize) -> u64 {
    let rest = bytes.get(pos..).unwrap_or_default();
    match rest.first_chunk::<8>() {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => {
            let mut padded = [0u8; 8];
            for (slot, &byte) in padded.iter_mut().zip(rest) {
                *slot = byte;
            }
            u64::from_le_bytes(padded)
        }
    }
}

/// `word ^ ASCII_ZEROS`: a digit lane becomes its value 0..=9.
#[inline(always)]
fn digit_values(word: u64) -> u64 {
    word ^ ASCII_ZEROS
}

/// How many lanes, from the low end, are ASCII digits (0..=8). `values` is
/// [`digit_values`] of the loaded word.
///
/// A lane is a digit exactly when its value is below 10. Adding 0x76 to the low seven bits
/// sets the lane's top bit for 10..=127 without carrying into the next lane (0x7f + 0x76 <
/// 0x100); or-ing in the value itself catches 128..=255.
#[inline(always)]
fn digit_run(values: u64) -> usize {
    let not_digit =
        (((values & !LANE_TOPS).wrapping_add(0x7676_7676_7676_7676)) | values) & LANE_TOPS;
    (not_digit.trailing_zeros() / 8) as usize
}

/// The number written by the first `count` lanes of `values` (1..=8 lanes, each 0..=9, the
/// first lane the most significant digit; any other `count` gives a meaningless number).
#[inline(always)]
fn run_value(values: u64, count: usize) -> u64 {
    // Move the run to the top lanes; the lanes shifted in below are zeros, which read as
    // leading zeros of an eight-digit number.
    let shift_bits = 64 - 8 * (count as u32);
    eight_digits(values << (shift_bits & 63))
}

/// The value of eight lanes, each 0..=9, first lane most significant. Each step multiplies
/// every lane by its weight and adds its upper neighbour, then keeps every other (now twice as
/// wide) lane; no lane overflows (99 < 2^8, 9999 < 2^16, 99999999 < 2^32).
#[inline(always)]
fn eight_digits(lanes: u64) -> u64 {
    let pairs = (lanes.wrapping_mul(10).wrapping_add(lanes >> 8)) & 0x00ff_00ff_00ff_00ff;
    let fours = (pairs.wrapping_mul(100).wrapping_add(pairs >> 16)) & 0x0000_ffff_0000_ffff;
    (fours.wrapping_mul(10_000).wrapping_add(fours >> 32)) & 0xffff_ffff
}

/// A decimal string's content from `pos` (just after its opening quote) through its closing
/// quote: the value and the position after the quote.
///
/// Handles the venue's form, `-?[0-9]{1,7}(\.[0-9]{0,8})?"`, which is what Binance sends for
/// every price, quantity and rate; `None` for everything else, which the caller hands to
/// [`Fixed::parse`]. Whatever is `Some` here is what `Fixed::parse` returns for the same
/// content: at most seven integer digits cannot overflow (10^7 * 10^9 < 2^63) and at most
/// eight fraction digits are never too precise.
#[inline(always)]
pub(crate) fn quoted_decimal(bytes: &[u8], pos: usize) -> Option<(Fixed, usize)> {
    if let Some(window) = bytes.get(pos..).and_then(|rest| rest.first_chunk::<9>()) {
        if let Some(found) = short_quoted_decimal(window, pos) {
            return Some(found);
        }
    }
    quoted_decimal_words(bytes, pos)
}

/// [`quoted_decimal`] for the commonest case, digits, point and quote within `window` (the
/// nine bytes from `pos`) with the quote among the first eight after the point is taken out:
/// `61800.20"` and `0.014"` in one digit conversion instead of two.
///
/// The trick: `word` is bytes 0..8 and `next` bytes 1..9; keeping `word`'s lanes before the
/// point and `next`'s from the point on drops the point, so integer and fraction digits form
/// one run, read as one integer and scaled by the fraction's length.
#[inline(always)]
fn short_quoted_decimal(window: &[u8; 9], pos: usize) -> Option<(Fixed, usize)> {
    let (word_bytes, _) = window.split_first_chunk::<8>()?;
    let (_, next_bytes) = window.split_last_chunk::<8>()?;
    let word = u64::from_le_bytes(*word_bytes);
    let next = u64::from_le_bytes(*next_bytes);
    let values = digit_values(word);
    let integer_len = digit_run(values);
    if integer_len == 0 || integer_len == 8 {
        return None;
    }
    match (word >> (8 * integer_len)) as u8 {
        b'"' => {
            let integer = run_value(values, integer_len) as i64;
            Some((Fixed(integer * SCALE), pos + integer_len + 1))
        }
        b'.' => {
            let before_point = (1u64 << (8 * integer_len)) - 1;
            let joined = (word & before_point) | (next & !before_point);
            let joined_values = digit_values(joined);
            let digits_len = digit_run(joined_values);
            // The run starts with the integer digits, so it is at least `integer_len` long.
            if digits_len == 8 || (joined >> (8 * digits_len)) as u8 != b'"' {
                return None;
            }
            let fraction_len = digits_len - integer_len;
            let digits = run_value(joined_values, digits_len) as i64;
            Some((
                Fixed(digits * POW10[9 - fraction_len] as i64),
                pos + digits_len + 2,
            ))
        }
        _ => None,
    }
}

/// [`quoted_decimal`] for the rest: a sign, up to eight fraction digits, the end of the input.
#[inline(never)]
fn quoted_decimal_words(bytes: &[u8], pos: usize) -> Option<(Fixed, usize)> {
    let word = load8(bytes, pos);
    if word as u8 == b'-' {
        let (magnitude, end) = unsigned_quoted_decimal(bytes, pos + 1)?;
        return Some((Fixed(-magnitude), end));
    }
    let (value, end) = unsigned_quoted_decimal(bytes, pos)?;
    Some((Fixed(value), end))
}

/// [`quoted_decimal`] without a sign, as a raw count of 1e-9 units.
#[inline(always)]
fn unsigned_quoted_decimal(bytes: &[u8], pos: usize) -> Option<(i64, usize)> {
    let word = load8(bytes, pos);
    let values = digit_values(word);
    let integer_len = digit_run(values);
    // No integer digit (`.5`, `""`) or a long run: the exact reader decides.
    if integer_len == 0 || integer_len == 8 {
        return None;
    }
    let integer = run_value(values, integer_len);
    let integer_raw = (integer as i64) * SCALE;
    match (word >> (8 * integer_len)) as u8 {
        b'"' => Some((integer_raw, pos + integer_len + 1)),
        b'.' => {
            let fraction_pos = pos + integer_len + 1;
            let word = load8(bytes, fraction_pos);
            let values = digit_values(word);
            let fraction_len = digit_run(values);
            let fraction = match fraction_len {
                0 => 0,
                // Eight digits fill the word: the quote is the next byte.
                8 => {
                    if bytes.get(fraction_pos + 8) != Some(&b'"') {
                        return None;
                    }
                    return Some((
                        integer_raw + (eight_digits(values) * 10) as i64,
                        fraction_pos + 9,
                    ));
                }
                _ => run_value(values, fraction_len) * POW10[9 - fraction_len],
            };
            if (word >> (8 * fraction_len)) as u8 != b'"' {
                return None;
            }
            Some((
                integer_raw + fraction as i64,
                fraction_pos + fraction_len + 1,
            ))
        }
        _ => None,
    }
}

/// One depth level in the venue's spelling with both decimals in the short form that
/// [`trusted_level_pair`] reads, from its `[`: the position after its `]`. Checks exactly what
/// [`level_pair`] checks, without computing the values.
#[inline(always)]
pub(crate) fn short_level_pair(bytes: &[u8], pos: usize) -> Option<usize> {
    if bytes.get(pos..pos + 2)? != b"[\"" {
        return None;
    }
    let window = bytes.get(pos + 2..)?.first_chunk::<9>()?;
    let (_price, end) = short_quoted_decimal(window, pos + 2)?;
    if bytes.get(end..end + 2)? != b",\"" {
        return None;
    }
    let window = bytes.get(end + 2..)?.first_chunk::<9>()?;
    let (_qty, end) = short_quoted_decimal(window, end + 2)?;
    if bytes.get(end)? != &b']' {
        return None;
    }
    Some(end + 1)
}

/// A level that [`short_level_pair`] has already accepted, read again without its checks:
/// price, quantity and the position after its `]`. On bytes it did not accept the answer is
/// meaningless (never a panic); `Levels` only calls it on bytes it accepted.
#[inline(always)]
pub(crate) fn trusted_level_pair(bytes: &[u8], pos: usize) -> Option<(Fixed, Fixed, usize)> {
    let (price, end) = trusted_decimal(bytes, pos + 2)?;
    let (qty, end) = trusted_decimal(bytes, end + 2)?;
    Some((price, qty, end + 1))
}

/// [`short_quoted_decimal`] without its checks: see [`trusted_level_pair`].
///
/// Two shortcuts hold only on checked bytes. A digit run ends at the first lane below `'0'`
/// (the point or the quote, the only non-digits inside a checked decimal), found with one
/// subtraction: the lowest lane that borrows is the first such lane, whatever the borrow does
/// to the lanes above it. And an integer without a point is its own digit run.
#[inline(always)]
fn trusted_decimal(bytes: &[u8], pos: usize) -> Option<(Fixed, usize)> {
    let window = bytes.get(pos..)?.first_chunk::<9>()?;
    let (word_bytes, _) = window.split_first_chunk::<8>()?;
    let (_, next_bytes) = window.split_last_chunk::<8>()?;
    let word = u64::from_le_bytes(*word_bytes);
    let next = u64::from_le_bytes(*next_bytes);
    let integer_len = run_before_point_or_quote(word);
    let integer_bits = (8 * integer_len) as u32;
    let has_point = word.wrapping_shr(integer_bits) as u8 == b'.';
    let (joined, digits_len) = if has_point {
        let before_point = 1u64.wrapping_shl(integer_bits).wrapping_sub(1);
        let joined = (word & before_point) | (next & !before_point);
        (joined, run_before_point_or_quote(joined))
    } else {
        (word, integer_len)
    };
    let fraction_len = digits_len.wrapping_sub(integer_len);
    let scale = POW10.get(9usize.wrapping_sub(fraction_len))?;
    let digits = run_value(digit_values(joined), digits_len);
    Some((
        Fixed(digits.wrapping_mul(*scale) as i64),
        pos + digits_len + usize::from(has_point) + 1,
    ))
}

/// How many lanes, from the low end, come before the first lane below `'0'`.
#[inline(always)]
fn run_before_point_or_quote(word: u64) -> usize {
    let borrows = word.wrapping_sub(ASCII_ZEROS) & LANE_TOPS;
    (borrows.trailing_zeros() / 8) as usize
}

/// One depth level as the venue writes it, `["61800.20","2.909"]`, from its `[`: price,
/// quantity and the position after its `]`. `None` for any other spelling (spaces, numbers
/// that are not the venue's form), which the caller reads with the general reader.
#[inline(always)]
pub(crate) fn level_pair(bytes: &[u8], pos: usize) -> Option<(Fixed, Fixed, usize)> {
    if bytes.get(pos..pos + 2)? != b"[\"" {
        return None;
    }
    let (price, end) = quoted_decimal(bytes, pos + 2)?;
    if bytes.get(end..end + 2)? != b",\"" {
        return None;
    }
    let (qty, end) = quoted_decimal(bytes, end + 2)?;
    if bytes.get(end)? != &b']' {
        return None;
    }
    Some((price, qty, end + 1))
}

/// `0x7f` in every byte lane.
const LANE_LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Which of the eight lanes of `word` hold `"`, as the low eight bits (bit `i` for lane `i`).
///
/// A lane holds it exactly when `word ^ "` is zero there: adding 0x7f to its low seven bits
/// sets the top bit of every other lane without a carry into the next (0x7f + 0x7f < 0x100),
/// or-ing in the lane catches its own top bit. The multiply then gathers the eight top bits
/// into the top byte: lane `i`'s bit (at `8 * i + 7`) meets the factor's `2^(49 - 7 * i)` at bit
/// `56 + i`, and no two partial products share a bit, so nothing carries into it.
#[inline(always)]
fn quote_bits(word: u64) -> u32 {
    let lanes = word ^ 0x2222_2222_2222_2222;
    let quotes = !(((lanes & LANE_LOWS).wrapping_add(LANE_LOWS)) | lanes) & LANE_TOPS;
    (quotes.wrapping_mul(0x0002_0408_1020_4081) >> 56) as u32
}

/// [`level_pair`] with the position after the level found from its quotes, not from the
/// decimals' digit runs: price, quantity (each what [`Fixed::parse`] reads from its string)
/// and the position after its `]`. `None` for anything but 1 to 8 digits with at most one
/// point, not first, in each string, and for a level whose `]` is not among the 24 bytes after
/// its `["`: the caller hands those to [`level_pair`] and the exact reader.
///
/// In [`level_pair`] the quantity's start waits on the price's length, and the next level's on
/// the quantity's: each level is one long chain of dependent steps (load, digit run, joined
/// word, digit run, add). Here the 24 bytes after `["` are loaded at once and their quotes
/// found in parallel: the first ends the price (`","` must follow), the third the quantity
/// (`"]`), so the next level's position is a few steps after this one's, and the decimals,
/// whose lengths are then known, are off that chain: the processor reads several levels'
/// decimals at the same time.
#[inline(always)]
pub(crate) fn level_pair_unchained(bytes: &[u8], pos: usize) -> Option<(Fixed, Fixed, usize)> {
    let window = bytes.get(pos..)?.first_chunk::<26>()?;
    let (head, body) = window.split_first_chunk::<2>()?;
    let body: &[u8; 24] = body.first_chunk::<24>()?;
    if head != b"[\"" {
        return None;
    }
    let word = |at: usize| -> u64 {
        let mut lanes = [0u8; 8];
        lanes.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(lanes)
    };
    let quotes = quote_bits(word(0)) | (quote_bits(word(8)) << 8) | (quote_bits(word(16)) << 16);
    let price_len = quotes.trailing_zeros() as usize;
    if price_len > 9 {
        return None;
    }
    let qty_at = price_len + 3;
    let qty_len = (quotes >> qty_at).trailing_zeros() as usize;
    if qty_len > 9 {
        return None;
    }
    let qty_end = qty_at + qty_len;
    // `body[price_len]` and `body[qty_end]` are quotes; the bytes between and after them:
    if body[price_len + 1] != b',' || body[price_len + 2] != b'"' || body[qty_end + 1] != b']' {
        return None;
    }
    let price = short_string_decimal(body, 0, price_len)?;
    let qty = short_string_decimal(body, qty_at, qty_len)?;
    Some((price, qty, pos + qty_end + 4))
}

/// The `len` bytes at `at` in `body` (0 < `len` <= 9, `at + 9 <= 24`), followed by a quote,
/// as a decimal: `None` unless they are 1 to 8 digits and at most one point, not first. Then
/// it is what [`Fixed::parse`] reads: the digits without the point as one integer (at most
/// eight: no overflow, never too precise), scaled by the fraction's length.
#[inline(always)]
fn short_string_decimal(body: &[u8; 24], at: usize, len: usize) -> Option<Fixed> {
    let window = body.get(at..at + 9)?;
    let (word, _) = window.split_first_chunk::<8>()?;
    let (_, next) = window.split_last_chunk::<8>()?;
    let (word, next) = (u64::from_le_bytes(*word), u64::from_le_bytes(*next));
    // The first lane that is not a digit: the point, or (none) the closing quote at `len`.
    let integer_len = digit_run(digit_values(word));
    if integer_len == 0 {
        return None;
    }
    let has_point = integer_len != len;
    if has_point && window[integer_len] != b'.' {
        return None;
    }
    let digits = len - usize::from(has_point);
    // The lanes before the point from `word`, the rest from `next`: the point dropped.
    let before_point = u64::MAX >> (64 - 8 * integer_len);
    let joined = digit_values((word & before_point) | (next & !before_point));
    if digits > 8 || digit_run(joined) < digits {
        return None;
    }
    let value = run_value(joined, digits) * POW10[9 - (digits - integer_len)];
    Some(Fixed(value as i64))
}

/// A JSON integer's digits from `pos`: the value and the position after the last digit.
///
/// `None` unless it is 1 to 19 digits without a leading zero and not followed by `.`, `e` or
/// `E` (which would make it a fraction or an exponent); 19 digits always fit a `u64`. The
/// exact reader handles the rest, errors included.
#[inline]
pub(crate) fn integer(bytes: &[u8], pos: usize) -> Option<(u64, usize)> {
    let first = digit_values(load8(bytes, pos));
    let first_len = digit_run(first);
    let (value, len) = match first_len {
        0 => return None,
        1..=7 => (run_value(first, first_len), first_len),
        _ => {
            let second = digit_values(load8(bytes, pos + 8));
            let second_len = digit_run(second);
            let high = eight_digits(first);
            match second_len {
                0 => (high, 8),
                1..=7 => (
                    high * POW10[second_len] + run_value(second, second_len),
                    8 + second_len,
                ),
                _ => {
                    let third = digit_values(load8(bytes, pos + 16));
                    let third_len = digit_run(third);
                    let high = high * 100_000_000 + eight_digits(second);
                    match third_len {
                        0 => (high, 16),
                        1..=3 => (
                            high * POW10[third_len] + run_value(third, third_len),
                            16 + third_len,
                        ),
                        _ => return None,
                    }
                }
            }
        }
    };
    let leading_zero = len > 1 && first as u8 == 0;
    let end = pos + len;
    let not_integer = matches!(bytes.get(end), Some(b'.' | b'e' | b'E'));
    if leading_zero || not_integer {
        return None;
    }
    Some((value, end))
}

/// A string's content from `pos` (just after its opening quote) to its closing quote, and the
/// position after the quote. `None` when it holds an escape or a control character (or is not
/// closed): the exact reader decides those.
#[inline]
pub(crate) fn plain_string(bytes: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let rest = bytes.get(pos..)?;
    let len = rest
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)?;
    if rest.get(len) != Some(&b'"') {
        return None;
    }
    Some((rest.get(..len)?, pos + len + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the exact readers say about a quoted decimal at the start of `input`.
    fn exact_decimal(input: &[u8]) -> Option<(Fixed, usize)> {
        let len = input.iter().position(|&byte| byte == b'"')?;
        Fixed::parse(&input[..len])
            .ok()
            .map(|value| (value, len + 1))
    }

    /// The JSON integer rules, byte by byte: digits, no leading zero, not followed by `.`,
    /// `e` or `E`, fits `u64`.
    fn exact_integer(input: &[u8]) -> Option<(u64, usize)> {
        let len = input
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        if len == 0 || (len > 1 && input[0] == b'0') {
            return None;
        }
        if matches!(input.get(len), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let text = std::str::from_utf8(&input[..len]).ok()?;
        text.parse::<u64>().ok().map(|value| (value, len))
    }

    /// A level `["price","size"]` at the start of `input`, each string through `Fixed::parse`:
    /// both values and the position after the `]`.
    fn exact_level(input: &[u8]) -> Option<(Fixed, Fixed, usize)> {
        let rest = input.strip_prefix(b"[\"")?;
        let price_len = rest.iter().position(|&byte| byte == b'"')?;
        let rest_qty = rest[price_len..].strip_prefix(b"\",\"")?;
        let qty_len = rest_qty.iter().position(|&byte| byte == b'"')?;
        if rest_qty.get(qty_len + 1) != Some(&b']') {
            return None;
        }
        let price = Fixed::parse(&rest[..price_len]).ok()?;
        let qty = Fixed::parse(&rest_qty[..qty_len]).ok()?;
        Some((price, qty, 2 + price_len + 3 + qty_len + 2))
    }

    fn check_decimal(input: &[u8]) -> Result<(), TestCaseError> {
        if let Some(fast) = quoted_decimal(input, 0) {
            prop_assert_eq!(Some(fast), exact_decimal(input), "{:?}", input);
        }
        Ok(())
    }

    fn check_integer(input: &[u8]) -> Result<(), TestCaseError> {
        if let Some(fast) = integer(input, 0) {
            prop_assert_eq!(Some(fast), exact_integer(input), "{:?}", input);
        }
        Ok(())
    }

    #[test]
    fn venue_decimals_take_the_fast_path() {
        for (text, raw) in [
            ("61800.20\"", 61_800_200_000_000),
            ("0.014\"]", 14_000_000),
            ("20.004\",", 20_004_000_000),
            ("100\"", 100_000_000_000),
            ("5.\"", 5_000_000_000),
            ("-0.00038167\"", -381_670),
            ("9999999.9999999\"", 9_999_999_999_999_900),
            ("0.000\"", 0),
            ("25.35190000\"", 25_351_900_000),
            ("1.12345678\"", 1_123_456_780),
        ] {
            let fast = quoted_decimal(text.as_bytes(), 0);
            assert_eq!(fast.map(|(value, _)| value.raw()), Some(raw), "{text}");
            assert_eq!(fast.map(|(_, end)| end), text.find('"').map(|at| at + 1));
            check_decimal(text.as_bytes()).unwrap();
        }
        // Left to the exact reader: it accepts some, refuses others.
        for text in [
            "\"",
            ".5\"",
            "+7\"",
            "12345678\"",
            "1.123456789\"",
            "1.12345678",
            "1e5\"",
            "1.2.3\"",
            "1",
            "1.5",
            "--1\"",
            "-\"",
            "1.x\"",
        ] {
            assert_eq!(quoted_decimal(text.as_bytes(), 0), None, "{text}");
        }
    }

    #[test]
    fn integers_of_every_length() {
        let mut value = 0u64;
        for len in 1..=19 {
            value = value * 10 + (len % 10);
            let text = format!("{value},");
            assert_eq!(integer(text.as_bytes(), 0), Some((value, len as usize)));
            // At the very end of the input too.
            let text = value.to_string();
            assert_eq!(integer(text.as_bytes(), 0), Some((value, len as usize)));
        }
        assert_eq!(
            integer(b"9999999999999999999}", 0),
            Some((9_999_999_999_999_999_999, 19))
        );
        for text in ["18446744073709551615", "01", "1.5", "1e3", "", "-1", "x"] {
            assert_eq!(integer(text.as_bytes(), 0), None, "{text}");
        }
        assert_eq!(integer(b"0}", 0), Some((0, 1)));
    }

    #[test]
    fn plain_strings_stop_at_escapes() {
        assert_eq!(plain_string(b"BTCUSDT\",", 0), Some((&b"BTCUSDT"[..], 8)));
        assert_eq!(plain_string(b"\"", 0), Some((&b""[..], 1)));
        assert_eq!(plain_string(b"a\\\"b\"", 0), None);
        assert_eq!(plain_string(b"a\nb\"", 0), None);
        assert_eq!(plain_string(b"abc", 0), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        #[test]
        fn decimals_agree_with_fixed_parse_on_near_venue_strings(
            text in "[-+]?[0-9]{0,9}(\\.[0-9]{0,10})?[\"x.e]?[\",\\]]{0,3}",
        ) {
            check_decimal(text.as_bytes())?;
        }

        #[test]
        fn decimals_agree_with_fixed_parse_on_any_bytes(
            bytes in prop::collection::vec(
                prop_oneof![Just(b'"'), Just(b'.'), Just(b'-'), Just(b'0'), b'0'..=b'9', any::<u8>()],
                0..24,
            ),
        ) {
            check_decimal(&bytes)?;
        }

        #[test]
        fn integers_agree_with_the_json_rules(
            text in "[0-9]{0,22}[.eE,}x]?[0-9]{0,3}",
        ) {
            check_integer(text.as_bytes())?;
        }

        #[test]
        fn integers_agree_on_any_bytes(
            bytes in prop::collection::vec(
                prop_oneof![b'0'..=b'9', b'0'..=b'9', any::<u8>()],
                0..28,
            ),
        ) {
            check_integer(&bytes)?;
        }

        /// What `short_level_pair` accepts, `trusted_level_pair` reads as `level_pair` does
        /// (which the tests above tie to `Fixed::parse`), ending at the same byte.
        #[test]
        fn trusted_levels_read_what_the_checked_reader_reads(
            price in "[-+]?[0-9]{0,8}(\\.[0-9]{0,9})?[x.]?",
            qty in "[-+]?[0-9]{0,8}(\\.[0-9]{0,9})?[x.]?",
            tail in "[\\],]{0,3}",
        ) {
            let level = format!(r#"["{price}","{qty}"]{tail}"#);
            let bytes = level.as_bytes();
            if let Some(end) = short_level_pair(bytes, 0) {
                let checked = level_pair(bytes, 0);
                prop_assert!(checked.is_some(), "{}", level);
                prop_assert_eq!(checked.map(|(_, _, end)| end), Some(end));
                prop_assert_eq!(trusted_level_pair(bytes, 0), checked, "{}", level);
            }
        }

        /// `level_pair_unchained` reads what `Fixed::parse` reads from the level's two strings,
        /// ending after its `]`, and takes every level of short decimals.
        #[test]
        fn unchained_levels_read_what_level_pair_reads(
            price in "[-+]?[0-9]{0,9}(\\.[0-9]{0,10})?[x.\"]?",
            qty in "[-+]?[0-9]{0,9}(\\.[0-9]{0,10})?[x.\"]?",
            tail in "[\\],\"\\[ ]{0,3}[0-9\"]{0,24}",
        ) {
            let level = format!(r#"["{price}","{qty}"]{tail}"#);
            let bytes = level.as_bytes();
            let unchained = level_pair_unchained(bytes, 0);
            if unchained.is_some() {
                prop_assert_eq!(unchained, exact_level(bytes), "{}", level);
            }
            let checked = level_pair(bytes, 0);
            // What it takes: 1 to 8 digits and at most one point, not first, each; 26 bytes
            // from the `[`.
            let plain = |text: &str| {
                let digits = text.bytes().filter(u8::is_ascii_digit).count();
                let points = text.bytes().filter(|&byte| byte == b'.').count();
                digits + points == text.len() && (1..=8).contains(&digits) && points <= 1
                    && !text.starts_with('.')
            };
            if plain(&price) && plain(&qty) && bytes.len() >= 26 {
                prop_assert!(unchained.is_some(), "{}", level);
            }
            // And where both take a level, they agree.
            if unchained.is_some() && checked.is_some() {
                prop_assert_eq!(unchained, checked, "{}", level);
            }
        }

        #[test]
        fn quote_bits_mark_the_quote_lanes(lanes in any::<[u8; 8]>(), quotes in any::<u8>()) {
            let mut lanes = lanes;
            for (lane, byte) in lanes.iter_mut().enumerate() {
                if quotes & (1 << lane) != 0 {
                    *byte = b'"';
                }
            }
            let expected = lanes
                .iter()
                .enumerate()
                .filter(|&(_, &byte)| byte == b'"')
                .fold(0u32, |bits, (lane, _)| bits | 1 << lane);
            prop_assert_eq!(quote_bits(u64::from_le_bytes(lanes)), expected);
        }

        #[test]
        fn every_u64_reads_back(value in any::<u64>(), tail in "[,}\\]]?") {
            let text = format!("{value}{tail}");
            let len = value.to_string().len();
            let expected = (len <= 19).then_some((value, len));
            prop_assert_eq!(integer(text.as_bytes(), 0), expected);
        }
    }
}
