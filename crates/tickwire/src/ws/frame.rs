//! The frame codec of RFC 6455 section 5.2: parsing a server's frame header, writing ours, and
//! the masking of section 5.3.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-------+-+-------------+-------------------------------+
//! |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//! |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//! |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//! | |1|2|3|       |K|             |                               |
//! +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//! |     Extended payload length continued, if payload len == 127  |
//! + - - - - - - - - - - - - - - - +-------------------------------+
//! |                               |Masking-key, if MASK set to 1  |
//! +-------------------------------+-------------------------------+
//! | Masking-key (continued)       |          Payload Data         |
//! +-------------------------------- - - - - - - - - - - - - - - - +
//! ```
//!
//! These functions hold no connection state; [`Client`](super::Client) adds the rules that
//! depend on what came before (fragmentation, closing) and the size limits.

use super::{EntropyError, Error};

/// The longest frame header: 2 bytes, 8 of extended length and 4 of mask (section 5.2).
pub const MAX_HEADER_BYTES: usize = 14;

/// The longest control frame payload (section 5.5).
pub const MAX_CONTROL_PAYLOAD_BYTES: usize = 125;

/// The frame opcodes RFC 6455 defines (section 5.2); the others are reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpCode {
    Continuation = 0x0,
    Text = 0x1,
    Binary = 0x2,
    Close = 0x8,
    Ping = 0x9,
    Pong = 0xA,
}

impl OpCode {
    /// The opcode for the low four bits of a frame's first byte, or `None` when reserved.
    pub fn from_bits(bits: u8) -> Option<Self> {
        match bits {
            0x0 => Some(OpCode::Continuation),
            0x1 => Some(OpCode::Text),
            0x2 => Some(OpCode::Binary),
            0x8 => Some(OpCode::Close),
            0x9 => Some(OpCode::Ping),
            0xA => Some(OpCode::Pong),
            _ => None,
        }
    }

    /// Control frames are those whose opcode has its high bit set (section 5.5).
    pub fn is_control(self) -> bool {
        (self as u8) & 0x8 != 0
    }
}

/// A parsed server frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Whether this is the final fragment of its message.
    pub fin: bool,
    pub opcode: OpCode,
    /// 2, 4 or 10: a server frame carries no mask.
    pub header_bytes: usize,
    /// As the frame declares it; below 2^63 (section 5.2) but not yet checked against any limit.
    pub payload_bytes: u64,
}

/// Parses the header of a server frame at the front of `input`; `Ok(None)` when more bytes are
/// needed. Each rule that needs no connection state is checked as soon as the byte that carries
/// it is there, so a broken frame fails on its first byte rather than after its length arrives.
///
/// Non-minimal length encodings (a 64-bit length below 65536, say) are accepted: section 5.2
/// asks the sender for the minimal form but does not ask the receiver to check it.
#[inline]
pub fn parse_server_header(input: &[u8]) -> Result<Option<Header>, Error> {
    let Some(&first) = input.first() else {
        return Ok(None);
    };
    let reserved_bits = (first >> 4) & 0x7;
    if reserved_bits != 0 {
        return Err(Error::ReservedBits {
            bits: reserved_bits,
        });
    }
    let opcode = OpCode::from_bits(first & 0x0F).ok_or(Error::ReservedOpcode {
        opcode: first & 0x0F,
    })?;
    let fin = first & 0x80 != 0;
    if opcode.is_control() && !fin {
        return Err(Error::FragmentedControlFrame);
    }

    let Some(&second) = input.get(1) else {
        return Ok(None);
    };
    if second & 0x80 != 0 {
        return Err(Error::MaskedFrame);
    }
    let short_len = second & 0x7F;
    if opcode.is_control() && usize::from(short_len) > MAX_CONTROL_PAYLOAD_BYTES {
        return Err(Error::ControlFrameTooLong);
    }
    let (header_bytes, payload_bytes) = match short_len {
        126 => {
            let Some(len) = input.get(2..).and_then(<[u8]>::first_chunk::<2>) else {
                return Ok(None);
            };
            (4, u64::from(u16::from_be_bytes(*len)))
        }
        127 => {
            let Some(len) = input.get(2..).and_then(<[u8]>::first_chunk::<8>) else {
                return Ok(None);
            };
            let len = u64::from_be_bytes(*len);
            if len >> 63 != 0 {
                return Err(Error::LengthTopBit);
            }
            (10, len)
        }
        len => (2, u64::from(len)),
    };
    Ok(Some(Header {
        fin,
        opcode,
        header_bytes,
        payload_bytes,
    }))
}

/// Appends a frame header for a payload of `payload_bytes` to `out`, with the mask when given.
/// Lengths take the minimal encoding (section 5.2). Used for our masked frames and, unmasked, by
/// tests and benchmarks that play the server.
#[inline]
pub fn write_header(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: OpCode,
    payload_bytes: usize,
    mask: Option<[u8; 4]>,
) {
    let mut header = [0_u8; MAX_HEADER_BYTES];
    header[0] = (u8::from(fin) << 7) | opcode as u8;
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut len = match u16::try_from(payload_bytes) {
        Ok(short @ 0..=125) => {
            header[1] = mask_bit | short as u8;
            2
        }
        Ok(medium) => {
            header[1] = mask_bit | 126;
            header[2..4].copy_from_slice(&medium.to_be_bytes());
            4
        }
        Err(_) => {
            header[1] = mask_bit | 127;
            // usize is at most 64 bits on every target Rust supports, so this never saturates.
            let long = u64::try_from(payload_bytes).unwrap_or(u64::MAX);
            header[2..10].copy_from_slice(&long.to_be_bytes());
            10
        }
    };
    if let Some(mask) = mask {
        header[len..len + 4].copy_from_slice(&mask);
        len += 4;
    }
    out.extend_from_slice(&header[..len]);
}

/// XORs `payload` with the 4-byte `mask` in place (section 5.3), as bytes `0..` of the masked
/// payload; applying it twice restores the input. Works a 64-bit word at a time: the mask repeats
/// every 4 bytes, so each 8-byte chunk is XORed with the mask written twice, and the compiler
/// widens that loop further with SIMD.
#[inline]
pub fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    let [m0, m1, m2, m3] = mask;
    let mask_word = u64::from_ne_bytes([m0, m1, m2, m3, m0, m1, m2, m3]);
    let mut chunks = payload.chunks_exact_mut(8);
    for chunk in &mut chunks {
        if let Ok(word) = <&mut [u8; 8]>::try_from(chunk) {
            *word = (u64::from_ne_bytes(*word) ^ mask_word).to_ne_bytes();
        }
    }
    // The tail (at most 7 bytes) starts at a multiple of 8, so at mask phase 0.
    for (index, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= mask[index & 3];
    }
}

/// The source of our frames' masking keys: wyrand (Wang Yi's 64-bit generator, the one behind
/// `fastrand`), seeded once from the OS. Section 10.3 wants keys a proxy cannot predict from the
/// ones before; a seeded PRNG is the usual trade for a fresh key per frame without a syscall.
#[derive(Clone, Debug)]
pub struct MaskRng {
    state: u64,
}

impl MaskRng {
    /// Seeds from the operating system's entropy source.
    pub fn from_entropy() -> Result<Self, EntropyError> {
        Ok(Self::from_seed(getrandom::u64().map_err(EntropyError)?))
    }

    /// A fixed seed, for tests and benchmarks that need repeatable output.
    pub fn from_seed(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next masking key.
    #[inline]
    pub fn next_mask(&mut self) -> [u8; 4] {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let product = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        let mixed = (product >> 64) as u64 ^ product as u64;
        (mixed as u32).to_ne_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_mask(payload: &mut [u8], mask: [u8; 4]) {
        for (index, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[index % 4];
        }
    }

    #[test]
    fn word_mask_matches_the_bytewise_definition_at_every_length() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        for len in 0..70 {
            let original: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut fast = original.clone();
            let mut slow = original.clone();
            apply_mask(&mut fast, mask);
            naive_mask(&mut slow, mask);
            assert_eq!(fast, slow, "length {len}");
            apply_mask(&mut fast, mask);
            assert_eq!(fast, original, "round trip at length {len}");
        }
    }

    #[test]
    fn rfc_example_masked_hello() {
        // RFC 6455 section 5.7: "A single-frame masked text message".
        let mut out = Vec::new();
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        write_header(&mut out, true, OpCode::Text, 5, Some(mask));
        let start = out.len();
        out.extend_from_slice(b"Hello");
        apply_mask(&mut out[start..], mask);
        assert_eq!(
            out,
            [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
        );
    }

    #[test]
    fn header_round_trip_in_every_length_class() {
        for len in [0, 1, 125, 126, 127, 65535, 65536, 1 << 20] {
            let mut out = Vec::new();
            write_header(&mut out, true, OpCode::Binary, len, None);
            let header = parse_server_header(&out).expect("valid").expect("complete");
            assert_eq!(header.payload_bytes, len as u64);
            assert_eq!(header.header_bytes, out.len());
            for cut in 0..out.len() {
                assert_eq!(
                    parse_server_header(&out[..cut]),
                    Ok(None),
                    "len {len} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn non_minimal_lengths_are_accepted() {
        let header = parse_server_header(&[0x82, 127, 0, 0, 0, 0, 0, 0, 0, 5])
            .expect("valid")
            .expect("complete");
        assert_eq!((header.header_bytes, header.payload_bytes), (10, 5));
        let header = parse_server_header(&[0x82, 126, 0, 5])
            .expect("valid")
            .expect("complete");
        assert_eq!((header.header_bytes, header.payload_bytes), (4, 5));
    }

    #[test]
    fn first_byte_errors_need_no_second_byte() {
        assert_eq!(
            parse_server_header(&[0xC1]),
            Err(Error::ReservedBits { bits: 0b100 })
        );
        assert_eq!(
            parse_server_header(&[0x83]),
            Err(Error::ReservedOpcode { opcode: 3 })
        );
        assert_eq!(
            parse_server_header(&[0x09]),
            Err(Error::FragmentedControlFrame)
        );
    }

    #[test]
    fn masks_differ_from_frame_to_frame() {
        let mut rng = MaskRng::from_seed(1);
        let masks: Vec<[u8; 4]> = (0..64).map(|_| rng.next_mask()).collect();
        let mut distinct = masks.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), masks.len());
    }
}
