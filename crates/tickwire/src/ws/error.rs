//! The errors of the framing layer: what the server did wrong ([`Error`]) and why we could not
//! queue a frame ([`SendError`]). Both are `Copy` and a few words long, so the hot path returns
//! them by value without touching the heap.

/// A server frame broke RFC 6455 or our limits. The connection is failed (section 7.1.7): the
/// client has already queued a close frame with [`Error::close_code`] and will read nothing more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// RSV1-3 must be 0 unless an extension defines them (section 5.2); we negotiate none.
    #[error(
        "reserved bits {bits:#05b} set, but no extension was negotiated (RFC 6455 section 5.2)"
    )]
    ReservedBits { bits: u8 },
    /// Opcodes 0x3-0x7 and 0xB-0xF are reserved (section 5.2).
    #[error("reserved opcode {opcode:#x} (RFC 6455 section 5.2)")]
    ReservedOpcode { opcode: u8 },
    /// A server must not mask its frames (section 5.1).
    #[error("the server masked a frame (RFC 6455 section 5.1)")]
    MaskedFrame,
    /// Control frames carry at most 125 bytes (section 5.5).
    #[error("control frame longer than 125 bytes (RFC 6455 section 5.5)")]
    ControlFrameTooLong,
    /// Control frames must not be fragmented (section 5.5).
    #[error("fragmented control frame (RFC 6455 section 5.5)")]
    FragmentedControlFrame,
    /// A continuation frame arrived with no fragmented message in progress (section 5.4).
    #[error("continuation frame without a message in progress (RFC 6455 section 5.4)")]
    UnexpectedContinuation,
    /// A new text or binary frame arrived before the fragmented message ended (section 5.4).
    #[error("new data frame while a fragmented message is in progress (RFC 6455 section 5.4)")]
    ExpectedContinuation,
    /// The most significant bit of a 64-bit length must be 0 (section 5.2).
    #[error("64-bit payload length with its most significant bit set (RFC 6455 section 5.2)")]
    LengthTopBit,
    /// A close payload is empty or at least the 2-byte code (section 5.5.1).
    #[error("close frame with a 1-byte payload (RFC 6455 section 5.5.1)")]
    CloseLength1,
    /// A code that must not appear on the wire (section 7.4).
    #[error("invalid close code {code} (RFC 6455 section 7.4)")]
    InvalidCloseCode { code: u16 },
    /// A text message or close reason that is not UTF-8 (sections 5.6 and 8.1).
    #[error("text message or close reason is not valid UTF-8 (RFC 6455 section 8.1)")]
    InvalidUtf8,
    /// A frame longer than `Config::max_frame_bytes`.
    #[error("frame of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    FrameTooLarge { len_bytes: u64, max_bytes: usize },
    /// A message longer than `Config::max_message_bytes`.
    #[error("message of at least {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    MessageTooLarge { len_bytes: u64, max_bytes: usize },
}

impl Error {
    /// The status code our close frame carries for this failure (section 7.4.1).
    pub fn close_code(self) -> u16 {
        match self {
            Error::InvalidUtf8 => close_code::INVALID_PAYLOAD,
            Error::FrameTooLarge { .. } | Error::MessageTooLarge { .. } => close_code::TOO_BIG,
            Error::ReservedBits { .. }
            | Error::ReservedOpcode { .. }
            | Error::MaskedFrame
            | Error::ControlFrameTooLong
            | Error::FragmentedControlFrame
            | Error::UnexpectedContinuation
            | Error::ExpectedContinuation
            | Error::LengthTopBit
            | Error::CloseLength1
            | Error::InvalidCloseCode { .. } => close_code::PROTOCOL_ERROR,
        }
    }
}

/// Why a frame was not queued. Nothing was written to the output when this is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// We sent a close frame, or the connection failed or finished: section 5.5.1 forbids data
    /// after our close.
    #[error("the WebSocket connection is closing or closed")]
    Closed,
    /// Control frames carry at most 125 bytes (section 5.5).
    #[error("control frame payload of {len_bytes} bytes exceeds 125")]
    ControlPayloadTooLong { len_bytes: usize },
    /// A close reason leaves 123 bytes after the 2-byte code (section 5.5).
    #[error("close reason of {len_bytes} bytes exceeds 123")]
    CloseReasonTooLong { len_bytes: usize },
    /// A code an endpoint may not send (section 7.4).
    #[error("close code {code} may not be sent (RFC 6455 section 7.4)")]
    InvalidCloseCode { code: u16 },
    /// A text message must be UTF-8 (section 5.6).
    #[error("text message is not valid UTF-8")]
    InvalidUtf8,
}

/// The operating system could not seed the WebSocket key or the masking keys (section 10.3
/// wants both unpredictable). `getrandom::Error` has no `std::error::Error` impl without its
/// `std` feature, so it is carried here for its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system gave no entropy for WebSocket keys: {0}")]
pub struct EntropyError(pub getrandom::Error);

/// The status codes of RFC 6455 section 7.4.1 that this module sends.
pub mod close_code {
    /// 1000: the purpose of the connection was fulfilled.
    pub const NORMAL: u16 = 1000;
    /// 1001: the endpoint is going away (shutdown).
    pub const GOING_AWAY: u16 = 1001;
    /// 1002: the peer broke the protocol.
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// 1007: a text payload was not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// 1009: a frame or message was too big to process.
    pub const TOO_BIG: u16 = 1009;

    /// Whether `code` may appear in a close frame on the wire. Section 7.4.1 reserves 1004 and
    /// forbids 1005, 1006 and 1015 on the wire; 1012-1014 are registered with IANA since the RFC
    /// (Service Restart, Try Again Later, Bad Gateway); 1016-2999 are reserved for future
    /// standards and 3000-4999 belong to libraries and applications (section 7.4.2). Everything
    /// else, including 0-999 and 5000 and up, is invalid.
    pub fn is_valid(code: u16) -> bool {
        matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_stay_small_and_copy() {
        fn assert_copy<T: Copy>() {}
        assert_copy::<Error>();
        assert_copy::<SendError>();
        assert!(std::mem::size_of::<Error>() <= 24);
        assert!(std::mem::size_of::<SendError>() <= 16);
    }

    #[test]
    fn close_codes_follow_section_7_4() {
        for code in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
        ] {
            assert!(close_code::is_valid(code), "{code} is valid");
        }
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert!(!close_code::is_valid(code), "{code} is invalid");
        }
    }
}
