//! The borrowing JSON cursor the venue decoders share (Binance's `decode`, Thalex's `reader`):
//! a position in one message and the venue-neutral reads on it, namely whitespace, literals,
//! strings with their escapes checked but left in place, skipping any value, and the object key
//! loop. No DOM, no allocation, no copy. Each decoder keeps what is its venue's on top of it:
//! Binance's key-order fast paths (`binance/scan.rs`) and decimal strings, Thalex's JSON numbers
//! rounded to 1e-9.
//!
//! What it accepts is RFC 8259: strings refuse control characters and unknown escapes
//! (section 7), numbers follow section 6, every skipped value is checked to its end, and members
//! are separated by exactly one `,`.
//!
//! **One depth limit, [`MAX_DEPTH`] = 128**: skipping recurses once per nested array or object,
//! so the limit bounds stack use on hostile input (`[[[[...`) to a few KiB. 128 is
//! `serde_json`'s default, the oracle both decoders are tested against, so any message the
//! oracle reads is read here too; Thalex's reader used to stop at 64 and Binance's at 128, and
//! no venue message nests deeper than 4.

/// Arrays and objects nested deeper than this are refused ([`JsonErrorKind::TooDeep`]).
pub const MAX_DEPTH: u32 = 128;

/// What was wrong with the JSON itself. Each decoder maps it onto its own error type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// The message ends inside a value.
    Truncated,
    /// A byte that cannot come next.
    UnexpectedByte(u8),
    /// A control character or an invalid escape in a string.
    InvalidString,
    /// A number outside RFC 8259's grammar.
    InvalidNumber,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// A [`JsonErrorKind`] and the byte offset where it was seen. Small and `Copy`: it is returned
/// on the decode path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonError {
    pub kind: JsonErrorKind,
    pub offset: usize,
}

impl std::fmt::Display for JsonError {
    /// The words every JSON decoder's error uses for what was wrong with the JSON itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            JsonErrorKind::Truncated => write!(f, "the message ends inside a value"),
            JsonErrorKind::UnexpectedByte(byte) => {
                write!(f, "unexpected byte {byte:#04x} at offset {}", self.offset)
            }
            JsonErrorKind::InvalidString => {
                write!(f, "an invalid string at offset {}", self.offset)
            }
            JsonErrorKind::InvalidNumber => {
                write!(f, "an invalid number at offset {}", self.offset)
            }
            JsonErrorKind::TooDeep => write!(f, "nested too deep at offset {}", self.offset),
        }
    }
}

type Result<T> = std::result::Result<T, JsonError>;

/// Where a key loop stands inside an object: before its first member or after one.
#[derive(Clone, Copy, Debug)]
pub struct Members {
    first: bool,
}

impl Members {
    /// Right after the object's `{`.
    pub fn new() -> Members {
        Members { first: true }
    }

    /// After a member read some other way (a decoder's literal prefix, say).
    pub fn after_first() -> Members {
        Members { first: false }
    }
}

impl Default for Members {
    fn default() -> Self {
        Members::new()
    }
}

/// The lowest byte lane of `word` equal to `byte` has its top bit set in the result (lanes
/// above it may too, through the borrow; only the lowest counts).
#[inline(always)]
fn lanes_equal(word: u64, byte: u8) -> u64 {
    lanes_below(word ^ (ONES * u64::from(byte)), 1)
}

/// The lowest byte lane of `word` below `limit` (at most 0x80) has its top bit set in the
/// result, with the same caveat as [`lanes_equal`].
#[inline(always)]
fn lanes_below(word: u64, limit: u8) -> u64 {
    word.wrapping_sub(ONES * u64::from(limit)) & !word & TOPS
}

/// The lowest byte lane of `word` that holds a quote, a backslash or a control character has
/// its top bit set in the result, with the same caveat as [`lanes_equal`].
#[inline(always)]
fn string_stops(word: u64) -> u64 {
    // Flipping bit 1 of every byte maps `"` (0x22) to 0x20 and keeps control characters below
    // 0x20, while no other byte lands below 0x21: one compare finds both, a second finds the
    // backslash.
    lanes_below(word ^ (ONES * 0x02), 0x21) | lanes_equal(word, b'\\')
}

const ONES: u64 = 0x0101_0101_0101_0101;
const TOPS: u64 = 0x8080_8080_8080_8080;

/// A member's key as a venue sends it, `"key":` (at most 16 bytes), for [`Cursor::key_word`]:
/// its bytes, and the same as one little-endian word with the mask of its length.
#[derive(Clone, Copy, Debug)]
pub struct KeyLiteral {
    pub bytes: &'static [u8],
    word: u128,
    mask: u128,
}

impl KeyLiteral {
    /// Panics (at compile time, in a `const`) for more than 16 bytes.
    pub const fn new(bytes: &'static [u8]) -> KeyLiteral {
        assert!(bytes.len() <= 16, "a key literal holds at most 16 bytes");
        let mut word = 0u128;
        let mut at = 0;
        while at < bytes.len() {
            word |= (bytes[at] as u128) << (8 * at);
            at += 1;
        }
        let mask = if bytes.len() == 16 {
            u128::MAX
        } else {
            (1u128 << (8 * bytes.len())) - 1
        };
        KeyLiteral { bytes, word, mask }
    }
}

/// A position in one JSON text. Every read goes through `get`, so no input can index out of
/// bounds; `pos` never exceeds `bytes.len()`.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    pub fn at(bytes: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { bytes, pos }
    }

    #[inline]
    pub fn error(&self, kind: JsonErrorKind) -> JsonError {
        JsonError {
            kind,
            offset: self.pos,
        }
    }

    /// The byte at the cursor, whitespace included.
    #[inline(always)]
    pub fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// `bytes[start..end]`; the positions come from this cursor, so the range is always in
    /// bounds, and an empty slice stands in if that were ever not so.
    #[inline]
    pub fn slice(&self, start: usize, end: usize) -> &'a [u8] {
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// Skips whitespace; venues send none, so the first byte usually ends it.
    #[inline(always)]
    pub fn skip_whitespace(&mut self) {
        match self.peek() {
            Some(byte) if byte > b' ' => {}
            _ => self.whitespace_run(),
        }
    }

    #[cold]
    fn whitespace_run(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    #[inline(always)]
    pub fn peek_value(&mut self) -> Result<u8> {
        self.skip_whitespace();
        self.peek()
            .ok_or_else(|| self.error(JsonErrorKind::Truncated))
    }

    /// Consumes `wanted` after whitespace.
    #[inline(always)]
    pub fn expect(&mut self, wanted: u8) -> Result<()> {
        let byte = self.peek_value()?;
        if byte != wanted {
            return Err(self.error(JsonErrorKind::UnexpectedByte(byte)));
        }
        self.pos += 1;
        Ok(())
    }

    /// Consumes `word` at the cursor (no whitespace skipped); otherwise points at the first
    /// byte that differs, and running out is truncation.
    pub fn literal(&mut self, word: &'static [u8]) -> Result<()> {
        let end = self.pos.saturating_add(word.len());
        match self.bytes.get(self.pos..end) {
            Some(found) if found == word => {
                self.pos = end;
                Ok(())
            }
            found => {
                let found = found.unwrap_or(self.slice(self.pos, self.bytes.len()));
                let same = found.iter().zip(word).take_while(|(a, b)| a == b).count();
                self.pos += same;
                match found.get(same) {
                    Some(&byte) => Err(self.error(JsonErrorKind::UnexpectedByte(byte))),
                    None => Err(self.error(JsonErrorKind::Truncated)),
                }
            }
        }
    }

    /// A string's content after its opening quote, and whether it holds escapes; consumes the
    /// closing quote. Escapes are checked (`\uXXXX` needs four hex digits) but not decoded,
    /// control characters refused, as RFC 8259 section 7 says. Plain runs are crossed eight
    /// bytes at a time.
    #[inline(always)]
    pub fn string_body(&mut self) -> Result<(&'a [u8], bool)> {
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.advance_to_string_stop();
            match self.peek() {
                None => return Err(self.error(JsonErrorKind::Truncated)),
                Some(b'"') => {
                    let content = self.slice(start, self.pos);
                    self.pos += 1;
                    return Ok((content, escaped));
                }
                Some(b'\\') => {
                    escaped = true;
                    self.pos += 1;
                    self.escape()?;
                }
                Some(0x00..=0x1f) => return Err(self.error(JsonErrorKind::InvalidString)),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// Moves over whole words of plain string bytes up to the word that holds a quote, a
    /// backslash or a control character, to that byte; with fewer than eight bytes left, the
    /// caller goes on byte by byte.
    #[inline(always)]
    fn advance_to_string_stop(&mut self) {
        while let Some(chunk) = self
            .bytes
            .get(self.pos..self.pos + 8)
            .and_then(|chunk| <[u8; 8]>::try_from(chunk).ok())
        {
            let stops = string_stops(u64::from_le_bytes(chunk));
            if stops != 0 {
                self.pos += (stops.trailing_zeros() / 8) as usize;
                return;
            }
            self.pos += 8;
        }
    }

    /// One escape after its backslash.
    fn escape(&mut self) -> Result<()> {
        match self.peek() {
            None => Err(self.error(JsonErrorKind::Truncated)),
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.pos += 1;
                Ok(())
            }
            Some(b'u') => {
                self.pos += 1;
                for _ in 0..4 {
                    match self.peek() {
                        None => return Err(self.error(JsonErrorKind::Truncated)),
                        Some(digit) if digit.is_ascii_hexdigit() => self.pos += 1,
                        Some(_) => return Err(self.error(JsonErrorKind::InvalidString)),
                    }
                }
                Ok(())
            }
            Some(_) => Err(self.error(JsonErrorKind::InvalidString)),
        }
    }

    /// The key loop: the next member's key (raw, and whether it holds escapes) with its `:`
    /// consumed, or `None` after the object's `}`. Call it with a fresh [`Members`] right after
    /// the `{`, and again only after reading or skipping the key's value.
    #[inline(always)]
    pub fn next_raw_key(&mut self, members: &mut Members) -> Result<Option<(&'a [u8], bool)>> {
        let mut byte = self.peek_value()?;
        if byte == b'}' {
            self.pos += 1;
            return Ok(None);
        }
        if !members.first {
            if byte != b',' {
                return Err(self.error(JsonErrorKind::UnexpectedByte(byte)));
            }
            self.pos += 1;
            byte = self.peek_value()?;
        }
        members.first = false;
        if byte != b'"' {
            return Err(self.error(JsonErrorKind::UnexpectedByte(byte)));
        }
        self.pos += 1;
        let key = self.string_body()?;
        self.expect(b':')?;
        Ok(Some(key))
    }

    /// The next member's key when its bytes are exactly `literal` (`"key":`, no whitespace),
    /// after the `,` that ends the previous member: the cursor passes them and `true`.
    /// Otherwise nothing moves and `false`, and the caller reads the key with
    /// [`Cursor::next_raw_key`], which gives the same key for the same bytes: a decoder's fast
    /// path for the key order a venue sends.
    #[inline(always)]
    pub fn key_literal(&mut self, members: &mut Members, literal: &[u8]) -> bool {
        let start = if members.first {
            self.pos
        } else if self.bytes.get(self.pos) == Some(&b',') {
            self.pos + 1
        } else {
            return false;
        };
        match self.bytes.get(start..start + literal.len()) {
            Some(window) if window == literal => {
                self.pos = start + literal.len();
                members.first = false;
                true
            }
            _ => false,
        }
    }

    /// [`Cursor::key_literal`] for a [`KeyLiteral`]: with sixteen bytes left from the key's
    /// start, one 16-byte load compared under the literal's mask, where comparing slices of a
    /// length known only at run time is a `memcmp` call.
    #[inline(always)]
    pub fn key_word(&mut self, members: &mut Members, key: &KeyLiteral) -> bool {
        let start = if members.first {
            self.pos
        } else if self.bytes.get(self.pos) == Some(&b',') {
            self.pos + 1
        } else {
            return false;
        };
        let same = match self
            .bytes
            .get(start..start + 16)
            .and_then(|window| <[u8; 16]>::try_from(window).ok())
        {
            Some(window) => (u128::from_le_bytes(window) ^ key.word) & key.mask == 0,
            None => self.bytes.get(start..start + key.bytes.len()) == Some(key.bytes),
        };
        if same {
            self.pos = start + key.bytes.len();
            members.first = false;
        }
        same
    }

    /// Skips the remaining members of an object and its `}`.
    pub fn skip_members(&mut self, mut members: Members) -> Result<()> {
        while self.next_raw_key(&mut members)?.is_some() {
            self.skip_value()?;
        }
        Ok(())
    }

    /// Skips one JSON value of any type, checking its syntax to its end. Scalars, the common
    /// case, are stepped over inline; arrays and objects recurse.
    #[inline]
    pub fn skip_value(&mut self) -> Result<()> {
        self.skip_at_depth(0)
    }

    /// A value `depth` levels down: a scalar inline, a container through [`Cursor::skip_nested`].
    #[inline(always)]
    fn skip_at_depth(&mut self, depth: u32) -> Result<()> {
        match self.peek_value()? {
            b'"' => {
                self.pos += 1;
                self.string_body().map(drop)
            }
            b'-' | b'0'..=b'9' => self.skip_number(),
            first => self.skip_nested(first, depth),
        }
    }

    /// A value that is neither a string nor a number, whose `first` byte is at the cursor.
    fn skip_nested(&mut self, first: u8, depth: u32) -> Result<()> {
        match first {
            b'{' => {
                if depth >= MAX_DEPTH {
                    return Err(self.error(JsonErrorKind::TooDeep));
                }
                self.pos += 1;
                let mut members = Members::new();
                while self.next_raw_key(&mut members)?.is_some() {
                    self.skip_at_depth(depth + 1)?;
                }
                Ok(())
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return Err(self.error(JsonErrorKind::TooDeep));
                }
                self.pos += 1;
                if self.peek_value()? == b']' {
                    self.pos += 1;
                    return Ok(());
                }
                loop {
                    self.skip_at_depth(depth + 1)?;
                    match self.peek_value()? {
                        b',' => self.pos += 1,
                        b']' => {
                            self.pos += 1;
                            return Ok(());
                        }
                        other => return Err(self.error(JsonErrorKind::UnexpectedByte(other))),
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            other => Err(self.error(JsonErrorKind::UnexpectedByte(other))),
        }
    }

    /// Skips a JSON number (RFC 8259 section 6):
    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. Its value is never used, so its
    /// range does not matter. A leading zero followed by a digit (`01`) is refused at the
    /// number's first byte, as a read number is. Walks a slice of the rest of the text, so that
    /// each digit costs one compare: the decoders skip most of the numbers a venue sends.
    #[inline]
    pub fn skip_number(&mut self) -> Result<()> {
        let start = self.pos;
        let rest = self.bytes.get(start..).unwrap_or_default();
        let mut at = usize::from(rest.first() == Some(&b'-'));
        match rest.get(at) {
            Some(b'0') => {
                at += 1;
                if rest.get(at).is_some_and(u8::is_ascii_digit) {
                    return Err(self.error(JsonErrorKind::InvalidNumber));
                }
            }
            Some(b'1'..=b'9') => at += 1 + digits(rest.get(at + 1..).unwrap_or_default()),
            None => {
                self.pos = start + at;
                return Err(self.error(JsonErrorKind::Truncated));
            }
            Some(_) => {
                self.pos = start + at;
                return Err(self.error(JsonErrorKind::InvalidNumber));
            }
        }
        if rest.get(at) == Some(&b'.') {
            at = self.one_or_more_digits(rest, start, at + 1)?;
        }
        if let Some(b'e' | b'E') = rest.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = rest.get(at) {
                at += 1;
            }
            at = self.one_or_more_digits(rest, start, at)?;
        }
        self.pos = start + at;
        Ok(())
    }

    /// The end of a run of at least one digit at `rest[at..]` (`rest` starts at `start`).
    #[inline(always)]
    fn one_or_more_digits(&mut self, rest: &[u8], start: usize, at: usize) -> Result<usize> {
        let run = digits(rest.get(at..).unwrap_or_default());
        if run > 0 {
            return Ok(at + run);
        }
        self.pos = start + at;
        Err(self.error(if at >= rest.len() {
            JsonErrorKind::Truncated
        } else {
            JsonErrorKind::InvalidNumber
        }))
    }
}

/// How many ASCII digits `bytes` starts with.
#[inline(always)]
fn digits(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .position(|byte| !byte.is_ascii_digit())
        .unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key_word` moves and answers as `key_literal` does, for keys of 1 to 16 bytes, at every
    /// position of texts that hold them, near misses, and the text's end (fewer than 16 bytes
    /// left), as the first member and after a `,`.
    #[test]
    fn key_words_match_as_key_literals_do() {
        const KEYS: [KeyLiteral; 5] = [
            KeyLiteral::new(br#""s":"#),
            KeyLiteral::new(br#""topic":"#),
            KeyLiteral::new(br#""openInterest":"#),
            KeyLiteral::new(br#""abcdefghijkl":"#),
            KeyLiteral::new(b"0123456789abcdef"),
        ];
        let texts = [
            r#"{"s":"BTCUSDT","topic":"x","openInterest":"1","abcdefghijkl":2}"#,
            r#"{"s" :1,"topiC":1,"openInterest":"#,
            r#","s":,"topic":,"openInterest":,"abcdefghijkl":"#,
            "0123456789abcdef,0123456789abcdeF,0123456789abcde",
            r#""s":"#,
        ];
        for text in texts {
            for pos in 0..=text.len() {
                for key in &KEYS {
                    for first in [true, false] {
                        let members = || {
                            if first {
                                Members::new()
                            } else {
                                Members::after_first()
                            }
                        };
                        let (mut by_word, mut by_slice) = (members(), members());
                        let mut word = Cursor::at(text.as_bytes(), pos);
                        let mut slice = Cursor::at(text.as_bytes(), pos);
                        assert_eq!(
                            word.key_word(&mut by_word, key),
                            slice.key_literal(&mut by_slice, key.bytes),
                            "{text:?} at {pos}"
                        );
                        assert_eq!(word.pos, slice.pos);
                        assert_eq!(by_word.first, by_slice.first);
                    }
                }
            }
        }
    }

    fn string(text: &str) -> Result<(&[u8], bool)> {
        let mut cursor = Cursor::at(text.as_bytes(), 1);
        cursor.string_body()
    }

    #[test]
    fn strings_end_at_the_first_unescaped_quote_eight_bytes_at_a_time_or_not() {
        for (text, content, escaped) in [
            (r#""plain""#, "plain", false),
            (
                r#""longer than eight bytes" "#,
                "longer than eight bytes",
                false,
            ),
            (r#""a\"b""#, r#"a\"b"#, true),
            (r#""a\\""#, r#"a\\"#, true),
            (
                r#""0123456789\u00e9abcdefgh""#,
                r#"0123456789\u00e9abcdefgh"#,
                true,
            ),
            (
                r#""caf\u00e9 \/ é and more""#,
                r#"caf\u00e9 \/ é and more"#,
                true,
            ),
            (r#""""#, "", false),
            // Ends in the last eight bytes of the text, past the last whole word.
            (r#""abcdefghijk""#, "abcdefghijk", false),
            (r#""abcdefghi\"k""#, r#"abcdefghi\"k"#, true),
        ] {
            assert_eq!(string(text), Ok((content.as_bytes(), escaped)), "{text}");
        }
    }

    #[test]
    fn control_characters_and_bad_escapes_are_refused_wherever_they_are() {
        for text in [
            "\"ab\tc\"",
            "\"abcdefghijk\ncd\"",
            "\"abcdefgh\u{1f}\"",
            r#""a\x""#,
            r#""abcdefghij\u12G4""#,
            "\"abcdefghij\u{1}k\"",
        ] {
            assert!(
                matches!(
                    string(text),
                    Err(JsonError {
                        kind: JsonErrorKind::InvalidString,
                        ..
                    })
                ),
                "{text:?}"
            );
        }
        for text in [
            "\"abc",
            "\"abcdefghijklmnop",
            "\"abcdefghijk",
            "\"ab\\",
            "\"ab\\u12",
        ] {
            assert_eq!(
                string(text).map_err(|error| error.kind),
                Err(JsonErrorKind::Truncated),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_key_loop_and_skipping_check_everything() {
        let text = br#" {"a" : [1, {"x":"y\"z"}, null, true, -0.5e+3], "b":"c", "d":{}} "#;
        let mut cursor = Cursor::at(text, 0);
        cursor.expect(b'{').unwrap();
        let mut members = Members::new();
        let mut keys = Vec::new();
        while let Some((key, _)) = cursor.next_raw_key(&mut members).unwrap() {
            keys.push(key);
            cursor.skip_value().unwrap();
        }
        assert_eq!(keys, [&b"a"[..], b"b", b"d"]);
        for (text, kind) in [
            (
                &br#"{"a":1 "b":2}"#[..],
                JsonErrorKind::UnexpectedByte(b'"'),
            ),
            (br#"{,"a":1}"#, JsonErrorKind::UnexpectedByte(b',')),
            (br#"[1,]"#, JsonErrorKind::UnexpectedByte(b']')),
            (br#"[tru]"#, JsonErrorKind::UnexpectedByte(b']')),
            // A leading zero is refused at the number itself, as a read number is.
            (br#"[01]"#, JsonErrorKind::InvalidNumber),
            (br#"[1.]"#, JsonErrorKind::InvalidNumber),
            (br#"{"a":"#, JsonErrorKind::Truncated),
        ] {
            let mut cursor = Cursor::at(text, 0);
            assert_eq!(
                cursor.skip_value().map_err(|error| error.kind),
                Err(kind),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn nesting_stops_at_the_one_limit() {
        let depth = MAX_DEPTH as usize;
        let at_limit = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(Cursor::at(at_limit.as_bytes(), 0).skip_value(), Ok(()));
        let beyond = "[".repeat(depth + 1);
        assert_eq!(
            Cursor::at(beyond.as_bytes(), 0).skip_value(),
            Err(JsonError {
                kind: JsonErrorKind::TooDeep,
                offset: depth
            })
        );
    }
}
