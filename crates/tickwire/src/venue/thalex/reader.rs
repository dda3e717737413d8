//! A borrowing JSON reader for Thalex messages: a cursor over the payload that reads exactly the
//! shapes the decoders ask for, with no DOM, no allocation and no copy.
//!
//! Thalex sends prices, amounts and times as JSON numbers, integers (`50000`) or floats
//! (`50000.5`, `1e-05`). [`Reader::number`] turns the number's text straight into a [`Fixed`],
//! digit by digit, so `0.1` is exactly 0.1 and a float never exists on the way. Timestamps are
//! float seconds: as a `Fixed` (1e-9 units) their raw value is nanoseconds.
//!
//! Strings, the key loop and skipping are the shared JSON cursor's (`venue::json`, with its one
//! depth limit): strings are returned as the raw bytes between their quotes, escapes checked
//! but not decoded. Every name the decoders compare with (keys, channel names, directions) is
//! plain ASCII, so a name with an escape in it simply does not match.

use crate::fixed::{Fixed, POW10, SCALE};
use crate::venue::json::{self, JsonError, JsonErrorKind, Members};

/// Why a message could not be read. Small and `Copy`: it is returned on the decode path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("unexpected end of message")]
    End,
    #[error("expected {expected} at offset {offset}")]
    Expected {
        expected: &'static str,
        offset: usize,
    },
    #[error("number at offset {offset} is beyond the range of a 1e-9 fixed point (or a time before 1970)")]
    Number { offset: usize },
    #[error("not a JSON number at offset {offset}")]
    NotJson { offset: usize },
    #[error("nesting deeper than {MAX_DEPTH} levels at offset {offset}")]
    TooDeep { offset: usize },
}

impl ReadError {
    /// Where the reader stopped.
    pub fn offset(&self) -> usize {
        match *self {
            ReadError::End => usize::MAX,
            ReadError::Expected { offset, .. }
            | ReadError::Number { offset }
            | ReadError::NotJson { offset }
            | ReadError::TooDeep { offset } => offset,
        }
    }
}

/// Nesting `skip_value` follows at most: the shared cursor's one limit.
pub const MAX_DEPTH: usize = json::MAX_DEPTH as usize;

/// The shared JSON cursor with Thalex's reads on top: JSON numbers as exact or rounded
/// [`Fixed`], float seconds as nanoseconds, and errors as [`ReadError`].
pub struct Reader<'a> {
    cursor: json::Cursor<'a>,
    /// Where the innermost object being read stands in the key loop. One for all nesting levels
    /// suffices: an inner object ends at its `}` with a member read in the outer one.
    members: Members,
}

/// A shared-cursor error as a [`ReadError`]; `expected` says what could have come next.
#[inline]
fn read_error(error: JsonError, expected: &'static str) -> ReadError {
    let offset = error.offset;
    match error.kind {
        JsonErrorKind::Truncated => ReadError::End,
        JsonErrorKind::UnexpectedByte(_) => ReadError::Expected { expected, offset },
        JsonErrorKind::InvalidString => ReadError::Expected {
            expected: "a string without control characters or invalid escapes",
            offset,
        },
        JsonErrorKind::InvalidNumber => ReadError::NotJson { offset },
        JsonErrorKind::TooDeep => ReadError::TooDeep { offset },
    }
}

impl<'a> Reader<'a> {
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader::at(bytes, 0)
    }

    /// A reader placed at `pos`.
    #[inline]
    pub fn at(bytes: &'a [u8], pos: usize) -> Reader<'a> {
        // Not after a `{`: a key loop started here follows a member the decoder read itself.
        Reader {
            cursor: json::Cursor::at(bytes, pos),
            members: Members::after_first(),
        }
    }

    /// Goes back to `pos`, a place in an object's key loop before its first member (`first`)
    /// or after one, for a decoder whose guess at the next key was wrong.
    #[inline]
    pub fn rewind_in_object(&mut self, pos: usize, first: bool) {
        self.cursor.pos = pos;
        self.members = if first {
            Members::new()
        } else {
            Members::after_first()
        };
    }

    #[inline]
    pub fn pos(&self) -> usize {
        self.cursor.pos
    }

    /// The whole text being read.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.cursor.bytes
    }

    #[inline(always)]
    fn ws(&mut self) {
        self.cursor.skip_whitespace();
    }

    fn expected(&self, expected: &'static str) -> ReadError {
        if self.cursor.pos >= self.cursor.bytes.len() {
            ReadError::End
        } else {
            ReadError::Expected {
                expected,
                offset: self.cursor.pos,
            }
        }
    }

    /// The next byte after whitespace, not consumed.
    #[inline(always)]
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.cursor.bytes.get(self.cursor.pos).copied()
    }

    /// Consumes `byte` (after whitespace) if it is next.
    #[inline(always)]
    pub fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.cursor.pos += 1;
            true
        } else {
            false
        }
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8, expected: &'static str) -> Result<(), ReadError> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.expected(expected))
        }
    }

    /// Consumes `literal` if the bytes at the cursor (no whitespace skipped) are exactly it.
    #[inline(always)]
    pub fn literal(&mut self, literal: &[u8]) -> bool {
        let matches = self
            .cursor
            .bytes
            .get(self.cursor.pos..self.cursor.pos + literal.len())
            .is_some_and(|bytes| bytes == literal);
        if matches {
            self.cursor.pos += literal.len();
        }
        matches
    }

    /// A string's raw contents (escapes checked, left as they are).
    #[inline(always)]
    pub fn string(&mut self) -> Result<&'a [u8], ReadError> {
        self.expect(b'"', "a string")?;
        match self.cursor.string_body() {
            Ok((content, _escaped)) => Ok(content),
            Err(error) => Err(read_error(error, "a string")),
        }
    }

    /// A string's raw contents and whether it holds an escape (checked, left as it is).
    #[inline(always)]
    pub fn string_escaped(&mut self) -> Result<(&'a [u8], bool), ReadError> {
        self.expect(b'"', "a string")?;
        self.cursor
            .string_body()
            .map_err(|error| read_error(error, "a string"))
    }

    /// Opens an object: `{`.
    #[inline(always)]
    pub fn begin_object(&mut self) -> Result<(), ReadError> {
        self.expect(b'{', "an object")?;
        self.members = Members::new();
        Ok(())
    }

    /// The next key of an open object and its `:`, or `None` at its `}`. Call it again only after
    /// reading or skipping the key's value.
    #[inline(always)]
    pub fn next_key(&mut self) -> Result<Option<&'a [u8]>, ReadError> {
        match self.cursor.next_raw_key(&mut self.members) {
            Ok(Some((key, _escaped))) => Ok(Some(key)),
            Ok(None) => {
                // The object was a member's value: its parent has had a member.
                self.members = Members::after_first();
                Ok(None)
            }
            Err(error) => Err(read_error(error, "a key, `,` or `}`")),
        }
    }

    /// Opens an array: `[`.
    #[inline]
    pub fn begin_array(&mut self) -> Result<(), ReadError> {
        self.expect(b'[', "an array")
    }

    /// Whether an open array has another item (and steps over its `,`); `false` consumes `]`.
    /// `first` says whether no item was read yet.
    #[inline]
    pub fn next_item(&mut self, first: bool) -> Result<bool, ReadError> {
        match self.peek() {
            Some(b']') => {
                self.cursor.pos += 1;
                Ok(false)
            }
            Some(b',') if !first => {
                self.cursor.pos += 1;
                Ok(true)
            }
            Some(_) if first => Ok(true),
            _ => Err(self.expected("`,` or `]`")),
        }
    }

    /// `null`, consumed if it is next.
    #[inline(always)]
    pub fn null(&mut self) -> bool {
        self.ws();
        self.literal(b"null")
    }

    /// `true` or `false`.
    pub fn boolean(&mut self) -> Result<bool, ReadError> {
        self.ws();
        if self.literal(b"true") {
            Ok(true)
        } else if self.literal(b"false") {
            Ok(false)
        } else {
            Err(self.expected("`true` or `false`"))
        }
    }

    /// A non-negative JSON integer.
    #[inline]
    pub fn unsigned(&mut self) -> Result<u64, ReadError> {
        self.ws();
        let start = self.cursor.pos;
        let mut value: u64 = 0;
        while let Some(&byte) = self.cursor.bytes.get(self.cursor.pos) {
            if !byte.is_ascii_digit() {
                break;
            }
            value = value
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(byte - b'0')))
                .ok_or(ReadError::Number { offset: start })?;
            self.cursor.pos += 1;
        }
        if self.cursor.pos == start {
            return Err(self.expected("an integer"));
        }
        if self.cursor.pos - start > 1 && self.cursor.bytes[start] == b'0' {
            return Err(ReadError::NotJson { offset: start });
        }
        Ok(value)
    }

    /// A JSON number as a [`Fixed`]: exact when it has at most nine decimals, otherwise rounded
    /// to the nearest 1e-9 with ties to even (Thalex prints marks and indices as binary floats
    /// with up to 17 significant digits, `53.21791443839902`). Refused, as
    /// [`ReadError::Number`], when the result is beyond `Fixed`'s range (|raw| < `i64::MAX`,
    /// which stays free for `event::NO_PRICE`), and as [`ReadError::NotJson`] when the literal
    /// is not a JSON number (`.4`, `2450.`, `01`, `+1`, `1e`).
    #[inline(always)]
    pub fn number(&mut self) -> Result<Fixed, ReadError> {
        self.ws();
        match self.plain_number() {
            Some(value) => Ok(value),
            None => self.any_number(),
        }
    }

    /// The shape venues send, read by [`plain_number_at`]; `None` (the cursor untouched) for
    /// anything else, which [`Reader::any_number`] then reads or refuses.
    #[inline(always)]
    fn plain_number(&mut self) -> Option<Fixed> {
        let (value, end) = plain_number_at(self.cursor.bytes, self.cursor.pos)?;
        self.cursor.pos = end;
        Some(value)
    }

    /// Any JSON number, exponents included, digit by digit, checked against the JSON grammar
    /// (RFC 8259 section 6) and rounded as [`Reader::number`] says.
    #[cold]
    fn any_number(&mut self) -> Result<Fixed, ReadError> {
        let start = self.cursor.pos;
        let not_json = ReadError::NotJson { offset: start };
        let negative = self.cursor.bytes.get(self.cursor.pos) == Some(&b'-');
        if negative {
            self.cursor.pos += 1;
        }
        // The significant digits as one decimal mantissa of at most 19 digits, its value
        // `mantissa * 10^exp10`; digits past the 19th are only kept as the first one dropped
        // and whether any later one is not zero.
        let mut mantissa: u64 = 0;
        let mut digits = 0u32;
        let mut exp10: i32 = 0;
        let mut round_digit = 0u8;
        let mut dropped = 0u32;
        let mut sticky = false;
        let mut drop_digit = |digit: u8, dropped: &mut u32| {
            if *dropped == 0 {
                round_digit = digit;
            } else {
                sticky |= digit != 0;
            }
            *dropped += 1;
        };
        let integer_start = self.cursor.pos;
        while let Some(&byte) = self.cursor.bytes.get(self.cursor.pos) {
            if !byte.is_ascii_digit() {
                break;
            }
            let digit = byte - b'0';
            if mantissa == 0 && digit == 0 {
                // Leading zeros carry no precision.
            } else if digits < 19 {
                mantissa = mantissa * 10 + u64::from(digit);
                digits += 1;
            } else {
                drop_digit(digit, &mut dropped);
                exp10 = exp10.saturating_add(1);
            }
            self.cursor.pos += 1;
        }
        let integer_len = self.cursor.pos - integer_start;
        if integer_len == 0 {
            return Err(match self.cursor.bytes.get(self.cursor.pos) {
                None => ReadError::End,
                Some(b'+' | b'.') => not_json,
                Some(_) if negative => not_json,
                Some(_) => self.expected("a number"),
            });
        }
        if integer_len > 1 && self.cursor.bytes[integer_start] == b'0' {
            return Err(not_json);
        }
        if self.cursor.bytes.get(self.cursor.pos) == Some(&b'.') {
            self.cursor.pos += 1;
            let fraction_start = self.cursor.pos;
            while let Some(&byte) = self.cursor.bytes.get(self.cursor.pos) {
                if !byte.is_ascii_digit() {
                    break;
                }
                let digit = byte - b'0';
                if mantissa == 0 && digit == 0 {
                    exp10 -= 1;
                } else if digits < 19 {
                    mantissa = mantissa * 10 + u64::from(digit);
                    digits += 1;
                    exp10 -= 1;
                } else {
                    drop_digit(digit, &mut dropped);
                }
                // A fraction longer than any exponent could make up is only precision lost.
                exp10 = exp10.max(-10_000);
                self.cursor.pos += 1;
            }
            if self.cursor.pos == fraction_start {
                return Err(if self.cursor.pos >= self.cursor.bytes.len() {
                    ReadError::End
                } else {
                    not_json
                });
            }
        }
        let mut exponent: i32 = 0;
        if matches!(self.cursor.bytes.get(self.cursor.pos), Some(b'e' | b'E')) {
            self.cursor.pos += 1;
            let exp_negative = match self.cursor.bytes.get(self.cursor.pos) {
                Some(b'-') => {
                    self.cursor.pos += 1;
                    true
                }
                Some(b'+') => {
                    self.cursor.pos += 1;
                    false
                }
                _ => false,
            };
            let exp_start = self.cursor.pos;
            while let Some(&byte) = self.cursor.bytes.get(self.cursor.pos) {
                if !byte.is_ascii_digit() {
                    break;
                }
                exponent = (exponent * 10 + i32::from(byte - b'0')).min(100_000);
                self.cursor.pos += 1;
            }
            if self.cursor.pos == exp_start {
                return Err(if self.cursor.pos >= self.cursor.bytes.len() {
                    ReadError::End
                } else {
                    not_json
                });
            }
            if exp_negative {
                exponent = -exponent;
            }
        }
        let out_of_range = ReadError::Number { offset: start };
        // raw = mantissa * 10^shift, in 1e-9 units.
        let shift = exp10 + exponent + 9;
        let magnitude: u128 = if mantissa == 0 {
            0
        } else if shift >= 0 {
            if shift > 19 {
                return Err(out_of_range);
            }
            let raw = u128::from(mantissa) * 10u128.pow(shift as u32);
            if shift == 0 && round_up(mantissa & 1 == 1, round_digit, sticky) {
                raw + 1
            } else if shift > 0 && dropped > 0 {
                // Digits dropped above the ninth decimal: the value is past 1e19 units anyway.
                return Err(out_of_range);
            } else {
                raw
            }
        } else if shift < -38 {
            // Below 1e-19 of a unit: rounds to zero, never to a tie.
            0
        } else {
            let divisor = 10u128.pow((-shift) as u32);
            let quotient = u128::from(mantissa) / divisor;
            let twice_rest = (u128::from(mantissa) % divisor) * 2;
            let up = match twice_rest.cmp(&divisor) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Less => false,
                // Exactly half, unless a dropped digit says more: ties to even.
                std::cmp::Ordering::Equal => {
                    dropped > 0 && (round_digit > 0 || sticky) || quotient & 1 == 1
                }
            };
            quotient + u128::from(up)
        };
        if magnitude >= i64::MAX as u128 {
            return Err(out_of_range);
        }
        let raw = magnitude as i64;
        Ok(Fixed(if negative { -raw } else { raw }))
    }

    /// A number, or `None` for `null`.
    #[inline(always)]
    pub fn number_or_null(&mut self) -> Result<Option<Fixed>, ReadError> {
        if self.null() {
            Ok(None)
        } else {
            self.number().map(Some)
        }
    }

    /// Float seconds since the epoch as nanoseconds, rounded as [`Reader::number`] rounds;
    /// `None` for `null`. A time before the epoch is refused ([`ReadError::Number`]).
    #[inline(always)]
    pub fn seconds_as_ns(&mut self) -> Result<Option<u64>, ReadError> {
        let offset = self.cursor.pos;
        match self.number_or_null()? {
            None => Ok(None),
            Some(seconds) => u64::try_from(seconds.raw())
                .map(Some)
                .map_err(|_| ReadError::Number { offset }),
        }
    }

    /// Steps over any one value, checked to its end as JSON (the shared cursor's skip).
    #[inline]
    pub fn skip_value(&mut self) -> Result<(), ReadError> {
        // The cursor refuses a leading zero (`01`) at the number's start, as `number` does.
        self.cursor
            .skip_value()
            .map_err(|error| read_error(error, "a value"))
    }

    /// Whether only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }
}

/// The shape venues send, at `bytes[pos..]`: an optional `-`, at most ten integer digits below
/// 9e9 without a leading zero, an optional fraction, no exponent. Fraction digits past the ninth
/// round the ninth (ties to even). The value and where the number ends; `None` for anything
/// else (which [`Reader::number`] then reads through its exact path, or refuses).
///
/// Byte by byte on purpose (two bytes a loop step, each checked before the next is read, so
/// that the loop takes half as many branches): each digit's branch is one the CPU predicts, so
/// the position runs ahead of the arithmetic. An eight-digits-at-a-time version (one load, a
/// mask, a count of trailing zeros) took fewer instructions but was slower on real-shaped
/// tickers, because each run's length then feeds the next load's address: a chain of data
/// dependencies through the whole message (BENCHMARKING.md, "Real-shaped tickers").
#[inline(always)]
pub(super) fn plain_number_at(bytes: &[u8], pos: usize) -> Option<(Fixed, usize)> {
    plain_number_by(|at| bytes.get(at).copied(), pos)
}

/// [`plain_number_at`] over any way of reading the message's bytes (`byte(at)`: the byte at
/// `at`, `None` past the end). It reads `byte(pos)` first; after that, a position it has not
/// read yet only right after one whose byte was a digit, `-` or `.`: what [`Closed`] relies on.
#[inline(always)]
fn plain_number_by(byte: impl Fn(usize) -> Option<u8>, mut pos: usize) -> Option<(Fixed, usize)> {
    // A digit's value as 64 bits from the start, so that adding it takes no widening.
    let digit = |at: usize| {
        byte(at)
            .map(|byte| u64::from(byte).wrapping_sub(u64::from(b'0')))
            .filter(|&digit| digit <= 9)
    };
    let negative = byte(pos) == Some(b'-');
    pos += usize::from(negative);
    let start = pos;
    let mut integer: u64 = 0;
    // Two digits a step (see `number_end_by`'s `digits_end`).
    while let Some(next) = digit(pos) {
        // Wrapping: a run longer than ten digits is refused below, whatever it added up to.
        integer = integer.wrapping_mul(10).wrapping_add(next);
        let Some(after) = digit(pos + 1) else {
            pos += 1;
            break;
        };
        integer = integer.wrapping_mul(10).wrapping_add(after);
        pos += 2;
    }
    // No digits, more than ten, a leading zero (`01`, not JSON) or a magnitude the slow path
    // must check.
    let count = pos - start;
    let leading_zero = count > 1 && byte(start) == Some(b'0');
    if count == 0 || count > 10 || leading_zero || integer >= 9_000_000_000 {
        return None;
    }
    let mut fraction: u64 = 0;
    let mut fraction_digits = 0;
    // The tenth decimal, and whether any later one is not zero: what rounding needs.
    let mut round_digit = 0u8;
    let mut sticky = false;
    if byte(pos) == Some(b'.') {
        pos += 1;
        let first = pos;
        let kept_end = first + 9;
        while pos < kept_end {
            let Some(next) = digit(pos) else { break };
            fraction = fraction * 10 + next;
            pos += 1;
        }
        fraction_digits = pos - first;
        if fraction_digits == 0 {
            return None;
        }
        if let Some(tenth) = digit(pos).filter(|_| fraction_digits == 9) {
            // A digit: 0 to 9, so the cast keeps it whole.
            round_digit = tenth as u8;
            pos += 1;
            while let Some(later) = digit(pos) {
                sticky |= later != 0;
                pos += 1;
            }
        }
    }
    // Every digit run ended at a byte that is no digit; an exponent or a second `.` is the
    // slow path's.
    if matches!(byte(pos), Some(b'e' | b'E' | b'.')) {
        return None;
    }
    let mut raw = integer * SCALE as u64 + fraction * POW10[9 - fraction_digits];
    if round_up(raw & 1 == 1, round_digit, sticky) {
        raw += 1;
    }
    let raw = raw as i64;
    Some((Fixed(if negative { -raw } else { raw }), pos))
}

/// Where the JSON number at `bytes[pos..]` ends (RFC 8259 section 6, as
/// `json::Cursor::skip_number` checks it); `None` when there is no valid number there. The
/// checked reference the tests hold [`Closed::number_end`] to.
#[cfg(test)]
pub(super) fn number_end(bytes: &[u8], pos: usize) -> Option<usize> {
    number_end_by(|at| bytes.get(at).copied(), pos)
}

/// [`number_end`] over any way of reading the message's bytes, as [`plain_number_by`]: it reads
/// `byte(pos)` first; after that, a position it has not read yet only right after one whose
/// byte was a digit, `-`, `.`, `e`, `E` or `+`.
#[inline(always)]
fn number_end_by(byte: impl Fn(usize) -> Option<u8>, mut pos: usize) -> Option<usize> {
    let is_digit_at = |at: usize| byte(at).is_some_and(|byte| DIGIT[usize::from(byte)]);
    // Two bytes a step, each checked before the next is read: the same reads and compares as
    // one a step, with half the loop's taken branches (this CPU takes about one a cycle, and a
    // step byte by byte is four instructions).
    let digits_end = |mut at: usize| loop {
        if !is_digit_at(at) {
            break at;
        }
        if !is_digit_at(at + 1) {
            break at + 1;
        }
        at += 2;
    };
    pos += usize::from(byte(pos) == Some(b'-'));
    match byte(pos) {
        Some(b'0') => {
            pos += 1;
            if is_digit_at(pos) {
                return None;
            }
        }
        Some(b'1'..=b'9') => pos = digits_end(pos + 1),
        _ => return None,
    }
    if byte(pos) == Some(b'.') {
        let first = pos + 1;
        pos = digits_end(first);
        if pos == first {
            return None;
        }
    }
    if let Some(b'e' | b'E') = byte(pos) {
        pos += 1;
        if let Some(b'+' | b'-') = byte(pos) {
            pos += 1;
        }
        let first = pos;
        pos = digits_end(first);
        if pos == first {
            return None;
        }
    }
    Some(pos)
}

/// Which bytes are ASCII digits: one load and compare per byte in the skipping loops.
static DIGIT: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = b'0';
    while byte <= b'9' {
        table[byte as usize] = true;
        byte += 1;
    }
    table
};

/// A message that ends with `}`, for the ticker's fast path: its numbers are read without a
/// bounds check per byte.
///
/// Why that holds: every byte of the message but the last is followed by another byte of it,
/// and the last is `}`. [`plain_number_by`] and [`number_end_by`] read a first byte, then the
/// next one only after a byte that was a digit, a sign, a point or an exponent's letter, never
/// `}`. So, started inside the message, they never read past its end: each byte they step over
/// is not its last. The first position is checked once per number.
#[derive(Clone, Copy)]
pub(super) struct Closed<'a> {
    bytes: &'a [u8],
}

impl<'a> Closed<'a> {
    /// `bytes`, when its last byte is `}`.
    #[inline(always)]
    pub(super) fn new(bytes: &'a [u8]) -> Option<Closed<'a>> {
        (bytes.last() == Some(&b'}')).then_some(Closed { bytes })
    }

    /// [`plain_number_at`], with no bounds check per byte.
    #[inline(always)]
    pub(super) fn plain_number_at(self, pos: usize) -> Option<(Fixed, usize)> {
        if pos >= self.bytes.len() {
            return None;
        }
        // SAFETY: `pos` is inside the message, which ends with `}`, and `plain_number_by` reads
        // `pos`, then `at + 1` only after `at` held a digit, `-` or `.` (its doc): every
        // position it reads is inside the message (the type's doc).
        plain_number_by(|at| Some(unsafe { self.byte_inside(at) }), pos)
    }

    /// [`number_end`], with no bounds check per byte.
    #[inline(always)]
    pub(super) fn number_end(self, pos: usize) -> Option<usize> {
        if pos >= self.bytes.len() {
            return None;
        }
        // SAFETY: as in `plain_number_at`: `number_end_by` steps past a byte only when it held
        // a digit, `-`, `.`, `e`, `E` or `+`, so from a position inside the message (which
        // ends with `}`) it reads only positions inside it.
        number_end_by(|at| Some(unsafe { self.byte_inside(at) }), pos)
    }

    /// The byte at `at`.
    ///
    /// # Safety
    ///
    /// `at` is less than the message's length.
    #[inline(always)]
    unsafe fn byte_inside(self, at: usize) -> u8 {
        debug_assert!(at < self.bytes.len(), "{at} past {}", self.bytes.len());
        // SAFETY: the caller's promise: `at` is inside `bytes`.
        unsafe { *self.bytes.get_unchecked(at) }
    }
}

/// Whether a value whose last kept digit is odd (`odd`) rounds up, given the first digit
/// dropped and whether any later dropped digit is not zero: to nearest, ties to even.
#[inline(always)]
fn round_up(odd: bool, round_digit: u8, sticky: bool) -> bool {
    match round_digit {
        6..=9 => true,
        5 => sticky || odd,
        _ => false,
    }
}

/// A `Fixed` from whole units, for tests and callers that have an integer.
pub fn units(value: i64) -> Fixed {
    Fixed(value * SCALE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Result<Fixed, ReadError> {
        Reader::new(text.as_bytes()).number()
    }

    #[test]
    fn numbers_become_exact_fixed_points() {
        let cases = [
            ("50000", "50000"),
            ("50000.5", "50000.5"),
            ("-0.001", "-0.001"),
            ("0.1", "0.1"),
            ("1e-05", "0.00001"),
            ("1.5E+3", "1500"),
            ("2e-9", "0.000000002"),
            ("1234567890.123456", "1234567890.123456"),
            ("0.000000001", "0.000000001"),
            ("0.1000000000000000000000", "0.1"),
            ("0", "0"),
            ("-0", "0"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                number(text),
                Ok(Fixed::parse_str(expected).unwrap()),
                "{text}"
            );
        }
    }

    #[test]
    fn numbers_with_more_than_nine_decimals_round_to_nearest_ties_to_even() {
        let cases = [
            // Thalex's own prints (api.yaml examples and live tickers).
            ("53.21791443839902", "53.217914438"),
            ("76283.25916666667", "76283.259166667"),
            ("47389.10833333334", "47389.108333333"),
            ("47252.64143906124", "47252.641439061"),
            ("0.0000000001", "0"),
            ("1e-10", "0"),
            ("0.12345678912", "0.123456789"),
            ("0.12345678950", "0.123456790"),
            ("0.0000000005", "0"),
            ("0.0000000015", "0.000000002"),
            ("0.0000000025", "0.000000002"),
            ("0.00000000250001", "0.000000003"),
            ("-0.0000000015", "-0.000000002"),
            ("2.5e-9", "0.000000002"),
            ("3.5e-9", "0.000000004"),
            ("0.9999999999", "1"),
            ("8999999999.9999999999", "9000000000"),
            ("1234567890.12345678949999", "1234567890.123456789"),
            ("0.1234567895000000000000001", "0.12345679"),
            ("12345678901234567890123e-13", "1234567890.123456789"),
            ("1e-400", "0"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                number(text),
                Ok(Fixed::parse_str(expected).unwrap()),
                "{text}"
            );
        }
    }

    #[test]
    fn numbers_beyond_the_range_or_not_json_are_refused() {
        for text in [
            "10000000000",
            "1e20",
            "9223372036.854775807",
            "-9223372037",
            "1e400",
        ] {
            assert!(
                matches!(number(text), Err(ReadError::Number { .. })),
                "{text}"
            );
        }
        for text in [
            ".4", "2450.x", "01", "-01.5", "+1", "1.e5", "-.5", "-x", "1ex", "00",
        ] {
            assert!(
                matches!(number(text), Err(ReadError::NotJson { .. })),
                "{text}: {:?}",
                number(text)
            );
        }
        assert!(matches!(number("x"), Err(ReadError::Expected { .. })));
        assert_eq!(number(""), Err(ReadError::End));
        assert_eq!(number("1e"), Err(ReadError::End));
        assert_eq!(number("2450."), Err(ReadError::End));
        // A skipped number is held to the same grammar (its range does not matter).
        for text in [".4", "2450.", "01", "1e", "-", "2450.,"] {
            assert!(Reader::new(text.as_bytes()).skip_value().is_err(), "{text}");
        }
        for text in ["1e400", "-0.5E+3", "0", "-0.0e-0"] {
            assert!(Reader::new(text.as_bytes()).skip_value().is_ok(), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_fast_reader_agrees_with_the_exact_one(
            text in "-?[0-9]{1,12}(\\.[0-9]{1,22})?([eE][-+]?[0-9]{1,2})?[,}\\]]?"
        ) {
            let fast = Reader::new(text.as_bytes()).number();
            let mut exact_reader = Reader::new(text.as_bytes());
            let exact = exact_reader.any_number();
            proptest::prop_assert_eq!(fast, exact);
            let mut plain_reader = Reader::new(text.as_bytes());
            if let Some(plain) = plain_reader.plain_number() {
                proptest::prop_assert_eq!(Ok(plain), exact);
                proptest::prop_assert_eq!(plain_reader.pos(), exact_reader.pos());
            }
            // The fast skip ends where the shared cursor's checked skip does, or refuses
            // what it refuses.
            let mut skipper = Reader::new(text.as_bytes());
            match (skipper.skip_value(), number_end(text.as_bytes(), 0)) {
                (Ok(()), end) => proptest::prop_assert_eq!(end, Some(skipper.pos())),
                (Err(_), end) => proptest::prop_assert_eq!(end, None),
            }
        }
    }

    /// Every string over the bytes numbers are made of (and a few others) up to five long,
    /// closed with `}`, read from every position: the unchecked reader gives what the checked
    /// one gives, and never reads past the end (its debug assertion would fire).
    #[test]
    fn the_closed_reader_agrees_with_the_checked_one_and_stays_inside() {
        const ALPHABET: &[u8] = b"-0159.eE+}";
        // Miri (`.ci/run`) takes the strings up to two long.
        let longest = if cfg!(miri) { 2 } else { 5 };
        let mut bytes = Vec::with_capacity(8);
        let mut checked = 0;
        let mut expected = 0;
        for len in 0..=longest {
            // Each string of `len` bytes and its `}`, from positions 0 to one past its end.
            expected += ALPHABET.len().pow(len) * (len as usize + 3);
            for mut code in 0..ALPHABET.len().pow(len) {
                bytes.clear();
                for _ in 0..len {
                    bytes.push(ALPHABET[code % ALPHABET.len()]);
                    code /= ALPHABET.len();
                }
                bytes.push(b'}');
                let closed = Closed::new(&bytes).expect("it ends with }");
                for pos in 0..=bytes.len() + 1 {
                    assert_eq!(
                        closed.plain_number_at(pos),
                        plain_number_at(&bytes, pos),
                        "{:?} at {pos}",
                        String::from_utf8_lossy(&bytes)
                    );
                    assert_eq!(
                        closed.number_end(pos),
                        number_end(&bytes, pos),
                        "{:?} at {pos}",
                        String::from_utf8_lossy(&bytes)
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, expected);
        assert!(checked >= 543);
        assert!(Closed::new(b"{\"a\":1").is_none() && Closed::new(b"").is_none());
    }

    /// What Miri runs (`.ci/run`): the closed reader on real-shaped numbers at the end of a
    /// message, where an unchecked read past it would be caught.
    #[test]
    fn the_closed_reader_reads_numbers_that_end_the_message() {
        for (text, value) in [
            ("7}", 7_000_000_000),
            ("-0.5}", -500_000_000),
            ("76000.71791443839}", 76_000_717_914_438),
            ("0.00001237751098016}", 12_378),
        ] {
            let closed = Closed::new(text.as_bytes()).expect("it ends with }");
            let (number, end) = closed.plain_number_at(0).expect("a plain number");
            assert_eq!((number.raw(), end), (value, text.len() - 1), "{text}");
            assert_eq!(closed.number_end(0), Some(text.len() - 1), "{text}");
        }
        for text in ["1e}", "-}", "0.}", "01}", "1e+}"] {
            let closed = Closed::new(text.as_bytes()).expect("it ends with }");
            assert_eq!(closed.number_end(0), None, "{text}");
        }
    }

    #[test]
    fn times_in_float_seconds_become_nanoseconds() {
        let mut reader = Reader::new(b"1234567890.123");
        assert_eq!(reader.seconds_as_ns(), Ok(Some(1_234_567_890_123_000_000)));
        // Thalex's float seconds print more digits than nanoseconds hold: rounded.
        let mut reader = Reader::new(b"1776715497.12345678951");
        assert_eq!(reader.seconds_as_ns(), Ok(Some(1_776_715_497_123_456_790)));
        let mut reader = Reader::new(b"null");
        assert_eq!(reader.seconds_as_ns(), Ok(None));
        let mut reader = Reader::new(b"-1.5");
        assert!(matches!(
            reader.seconds_as_ns(),
            Err(ReadError::Number { .. })
        ));
    }

    #[test]
    fn strings_end_at_the_first_unescaped_quote() {
        for (text, content) in [
            (r#""plain" "#, "plain"),
            (r#""a\"b" "#, r#"a\"b"#),
            (r#""a\\" "#, r#"a\\"#),
            (r#""a\\\"bcdefghijklmn" "#, r#"a\\\"bcdefghijklmn"#),
            (r#""longer than eight bytes" "#, "longer than eight bytes"),
            (r#""""#, ""),
        ] {
            let mut reader = Reader::new(text.as_bytes());
            assert_eq!(reader.string(), Ok(content.as_bytes()), "{text}");
            assert_eq!(reader.pos(), content.len() + 2);
        }
        assert_eq!(Reader::new(br#""open\""#).string(), Err(ReadError::End));
    }

    #[test]
    fn objects_arrays_and_skips() {
        let text = br#" {"a" : [1, {"x":"y\"z"}, null, true], "b":"c", "d":{}} "#;
        let mut reader = Reader::new(text);
        reader.begin_object().unwrap();
        assert_eq!(reader.next_key().unwrap(), Some(&b"a"[..]));
        reader.skip_value().unwrap();
        assert_eq!(reader.next_key().unwrap(), Some(&b"b"[..]));
        assert_eq!(reader.string().unwrap(), b"c");
        assert_eq!(reader.next_key().unwrap(), Some(&b"d"[..]));
        reader.skip_value().unwrap();
        assert_eq!(reader.next_key().unwrap(), None);
        assert!(reader.at_end());
    }

    #[test]
    fn broken_input_is_an_error_never_a_panic() {
        let inputs: [&[u8]; 7] = [b"{", b"{\"a\"", b"{\"a\":", b"[[[[", b"\"\\", b"tru", b"}"];
        for input in inputs {
            let mut reader = Reader::new(input);
            assert!(reader.skip_value().is_err(), "{input:?}");
        }
        let deep = vec![b'['; MAX_DEPTH + 1];
        assert!(matches!(
            Reader::new(&deep).skip_value(),
            Err(ReadError::TooDeep { .. })
        ));
    }
}
