//! UDP datagrams out of packet captures, and messages out of Nasdaq's raw ITCH files.
//!
//! - Classic pcap: the 24-byte file header with its magic in either byte order, microsecond
//!   (`a1b2c3d4`) or nanosecond (`a1b23c4d`) timestamps, then 16-byte record headers and the
//!   captured bytes.
//! - pcapng: Section Header Blocks (either byte order, by the byte-order magic), Interface
//!   Description Blocks (link type and `if_tsresol`) and Enhanced Packet Blocks; Simple Packet
//!   Blocks and every other block are skipped and counted.
//! - Each frame: Ethernet II, up to two 802.1Q/802.1ad VLAN tags, IPv4 (no fragments), UDP.
//!   A frame that is anything else (another link type, another EtherType or protocol, a
//!   fragment, a frame cut short by the snap length, a UDP length that disagrees) is skipped and
//!   counted by cause ([`CaptureCounters`]).
//! - A file that ends inside a header or a record is an error ([`CaptureError`]), as is a
//!   block whose length is impossible.
//!
//! Nasdaq's raw ITCH files (the daily `.NASDAQ_ITCH50` files) are each message prefixed by its
//! 2-byte big-endian length: [`RawItch`] reads them; a file that ends inside a message is an
//! error. Everything borrows the caller's bytes; nothing here allocates.

/// Why a capture could not be read further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    #[error("capture: {0} bytes are too few for a pcap or pcapng file header")]
    ShortHeader(usize),
    #[error("capture: magic {0:08x} is neither pcap (a1b2c3d4, a1b23c4d) nor pcapng")]
    BadMagic(u32),
    #[error(
        "capture: the record at byte {offset} is truncated ({needed} bytes needed, {left} left)"
    )]
    Truncated {
        offset: usize,
        needed: usize,
        left: usize,
    },
    #[error("capture: pcapng block at byte {offset} has an impossible length {len}")]
    BadBlockLength { offset: usize, len: u32 },
    #[error("capture: pcapng packet at byte {offset} names interface {interface}, which no block described")]
    UnknownInterface { offset: usize, interface: u32 },
    #[error("raw ITCH file: the message at byte {offset} is truncated ({needed} bytes needed, {left} left)")]
    TruncatedMessage {
        offset: usize,
        needed: usize,
        left: usize,
    },
}

/// One UDP datagram of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The capture's timestamp, ns since the epoch.
    pub ts_ns: u64,
    pub src: ([u8; 4], u16),
    pub dst: ([u8; 4], u16),
    pub payload: &'a [u8],
}

/// Frames skipped, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureCounters {
    pub datagrams: u64,
    pub not_ethernet: u64,
    pub not_ipv4: u64,
    pub not_udp: u64,
    pub fragments: u64,
    /// Frames shorter than their headers say (snap length, or a bad length field).
    pub short_frames: u64,
    /// pcapng blocks that carry no packet this reader takes (statistics, name resolution,
    /// simple packets, custom blocks).
    pub other_blocks: u64,
}

const LINKTYPE_ETHERNET: u32 = 1;
const MAX_INTERFACES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Pcap { nanos: bool, linktype: u32 },
    PcapNg,
}

#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u32,
    /// Timestamp units per second as a power: (base 10 or 2, exponent).
    tsresol: u8,
}

/// One captured frame: (timestamp ns, link type, captured bytes, original length).
type Frame<'a> = (u64, u32, &'a [u8], u32);

/// Reads a capture's UDP datagrams in file order.
pub struct Capture<'a> {
    bytes: &'a [u8],
    at: usize,
    big_endian: bool,
    format: Format,
    interfaces: [Interface; MAX_INTERFACES],
    interface_count: usize,
    counters: CaptureCounters,
    failed: bool,
}

fn u16_of(b: &[u8], at: usize, big: bool) -> u16 {
    let v = [b[at], b[at + 1]];
    if big {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

fn u32_of(b: &[u8], at: usize, big: bool) -> u32 {
    let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;

impl<'a> Capture<'a> {
    /// Reads the file header (pcap) or first block's type (pcapng).
    pub fn new(bytes: &'a [u8]) -> Result<Capture<'a>, CaptureError> {
        if bytes.len() < 12 {
            return Err(CaptureError::ShortHeader(bytes.len()));
        }
        let magic_le = u32_of(bytes, 0, false);
        let base = Capture {
            bytes,
            at: 0,
            big_endian: false,
            format: Format::PcapNg,
            interfaces: [Interface {
                linktype: 0,
                tsresol: 6,
            }; MAX_INTERFACES],
            interface_count: 0,
            counters: CaptureCounters::default(),
            failed: false,
        };
        if magic_le == PCAPNG_SHB {
            return Ok(base);
        }
        let (big_endian, nanos) = match magic_le {
            0xA1B2_C3D4 => (false, false),
            0xA1B2_3C4D => (false, true),
            0xD4C3_B2A1 => (true, false),
            0x4D3C_B2A1 => (true, true),
            other => return Err(CaptureError::BadMagic(other)),
        };
        if bytes.len() < 24 {
            return Err(CaptureError::ShortHeader(bytes.len()));
        }
        Ok(Capture {
            at: 24,
            big_endian,
            format: Format::Pcap {
                nanos,
                linktype: u32_of(bytes, 20, big_endian) & 0x0FFF_FFFF,
            },
            ..base
        })
    }

    pub fn counters(&self) -> CaptureCounters {
        self.counters
    }

    fn truncated(&mut self, needed: usize) -> CaptureError {
        self.failed = true;
        CaptureError::Truncated {
            offset: self.at,
            needed,
            left: self.bytes.len() - self.at,
        }
    }

    /// The next frame: (timestamp ns, link type, captured bytes, original length).
    fn next_frame(&mut self) -> Option<Result<Frame<'a>, CaptureError>> {
        loop {
            if self.failed || self.at >= self.bytes.len() {
                return None;
            }
            let left = self.bytes.len() - self.at;
            match self.format {
                Format::Pcap { nanos, linktype } => {
                    if left < 16 {
                        return Some(Err(self.truncated(16)));
                    }
                    let b = &self.bytes[self.at..];
                    let big = self.big_endian;
                    let seconds = u64::from(u32_of(b, 0, big));
                    let fraction = u64::from(u32_of(b, 4, big));
                    let captured = u32_of(b, 8, big) as usize;
                    let original = u32_of(b, 12, big);
                    if captured > left - 16 {
                        return Some(Err(self.truncated(16 + captured)));
                    }
                    let frame = &b[16..16 + captured];
                    self.at += 16 + captured;
                    let ts = seconds
                        .saturating_mul(1_000_000_000)
                        .saturating_add(if nanos {
                            fraction
                        } else {
                            fraction.saturating_mul(1000)
                        });
                    return Some(Ok((ts, linktype, frame, original)));
                }
                Format::PcapNg => {
                    if left < 12 {
                        return Some(Err(self.truncated(12)));
                    }
                    let offset = self.at;
                    let b = &self.bytes[self.at..];
                    let kind = u32_of(b, 0, self.big_endian);
                    if kind == PCAPNG_SHB {
                        // The byte order is the section's own: read it before the length.
                        match u32_of(b, 8, false) {
                            PCAPNG_BOM => self.big_endian = false,
                            0x4D3C_2B1A => self.big_endian = true,
                            other => {
                                self.failed = true;
                                return Some(Err(CaptureError::BadMagic(other)));
                            }
                        }
                        self.interface_count = 0;
                    }
                    let big = self.big_endian;
                    let len = u32_of(b, 4, big);
                    let block_len = len as usize;
                    if block_len < 12 || block_len % 4 != 0 {
                        self.failed = true;
                        return Some(Err(CaptureError::BadBlockLength { offset, len }));
                    }
                    if block_len > left {
                        return Some(Err(self.truncated(block_len)));
                    }
                    let body = &b[8..block_len - 4];
                    self.at += block_len;
                    match kind {
                        PCAPNG_SHB => {}
                        1 => {
                            // Interface Description: link type, reserved, snap length, options.
                            if body.len() < 8 {
                                self.failed = true;
                                return Some(Err(CaptureError::BadBlockLength { offset, len }));
                            }
                            let mut interface = Interface {
                                linktype: u32::from(u16_of(body, 0, big)),
                                tsresol: 6,
                            };
                            let mut options = &body[8..];
                            while options.len() >= 4 {
                                let code = u16_of(options, 0, big);
                                let olen = usize::from(u16_of(options, 2, big));
                                let padded = (olen + 3) & !3;
                                if code == 0 || options.len() < 4 + padded {
                                    break;
                                }
                                if code == 9 && olen >= 1 {
                                    interface.tsresol = options[4];
                                }
                                options = &options[4 + padded..];
                            }
                            if self.interface_count < MAX_INTERFACES {
                                self.interfaces[self.interface_count] = interface;
                            }
                            self.interface_count += 1;
                        }
                        6 => {
                            // Enhanced Packet: interface, timestamp (high, low), lengths, data.
                            if body.len() < 20 {
                                self.failed = true;
                                return Some(Err(CaptureError::BadBlockLength { offset, len }));
                            }
                            let interface = u32_of(body, 0, big);
                            let Some(described) = self
                                .interfaces
                                .get(interface as usize)
                                .filter(|_| (interface as usize) < self.interface_count)
                                .copied()
                            else {
                                self.failed = true;
                                return Some(Err(CaptureError::UnknownInterface {
                                    offset,
                                    interface,
                                }));
                            };
                            let units = (u64::from(u32_of(body, 4, big)) << 32)
                                | u64::from(u32_of(body, 8, big));
                            let captured = u32_of(body, 12, big) as usize;
                            let original = u32_of(body, 16, big);
                            if captured > body.len() - 20 {
                                self.failed = true;
                                return Some(Err(CaptureError::BadBlockLength { offset, len }));
                            }
                            let frame = &body[20..20 + captured];
                            let ts = to_ns(units, described.tsresol);
                            return Some(Ok((ts, described.linktype, frame, original)));
                        }
                        _ => self.counters.other_blocks += 1,
                    }
                }
            }
        }
    }

    /// Ethernet, VLAN tags, IPv4, UDP: the datagram, or `None` (counted) for anything else.
    fn udp(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        frame: &'a [u8],
        original: u32,
    ) -> Option<Datagram<'a>> {
        if linktype != LINKTYPE_ETHERNET {
            self.counters.not_ethernet += 1;
            return None;
        }
        if (original as usize) > frame.len() || frame.len() < 14 {
            self.counters.short_frames += 1;
            return None;
        }
        let mut at = 12;
        let mut ethertype = u16::from_be_bytes([frame[at], frame[at + 1]]);
        for _ in 0..2 {
            if ethertype == 0x8100 || ethertype == 0x88A8 {
                at += 4;
                let Some(next) = frame.get(at..at + 2) else {
                    self.counters.short_frames += 1;
                    return None;
                };
                ethertype = u16::from_be_bytes([next[0], next[1]]);
            }
        }
        at += 2;
        if ethertype != 0x0800 {
            self.counters.not_ipv4 += 1;
            return None;
        }
        let ip = &frame[at..];
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            self.counters.not_ipv4 += 1;
            return None;
        }
        let ihl = usize::from(ip[0] & 0x0F) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ihl < 20 || total < ihl || total > ip.len() {
            self.counters.short_frames += 1;
            return None;
        }
        if ip[9] != 17 {
            self.counters.not_udp += 1;
            return None;
        }
        let flags_fragment = u16::from_be_bytes([ip[6], ip[7]]);
        if flags_fragment & 0x3FFF != 0 {
            self.counters.fragments += 1;
            return None;
        }
        let udp = &ip[ihl..total];
        if udp.len() < 8 {
            self.counters.short_frames += 1;
            return None;
        }
        let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        if udp_len < 8 || udp_len > udp.len() {
            self.counters.short_frames += 1;
            return None;
        }
        self.counters.datagrams += 1;
        Some(Datagram {
            ts_ns,
            src: (
                [ip[12], ip[13], ip[14], ip[15]],
                u16::from_be_bytes([udp[0], udp[1]]),
            ),
            dst: (
                [ip[16], ip[17], ip[18], ip[19]],
                u16::from_be_bytes([udp[2], udp[3]]),
            ),
            payload: &udp[8..udp_len],
        })
    }
}

/// pcapng timestamp units to ns: `if_tsresol` is 10^-n (high bit clear) or 2^-n (set).
fn to_ns(units: u64, tsresol: u8) -> u64 {
    let exponent = u32::from(tsresol & 0x7F);
    if tsresol & 0x80 == 0 {
        if exponent <= 9 {
            units.saturating_mul(10u64.pow(9 - exponent))
        } else {
            units / 10u64.saturating_pow(exponent - 9)
        }
    } else {
        let wide = u128::from(units) * 1_000_000_000u128;
        u64::try_from(wide >> exponent.min(127)).unwrap_or(u64::MAX)
    }
}

impl<'a> Iterator for Capture<'a> {
    type Item = Result<Datagram<'a>, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (ts, linktype, frame, original) = match self.next_frame()? {
                Ok(frame) => frame,
                Err(error) => return Some(Err(error)),
            };
            if let Some(datagram) = self.udp(ts, linktype, frame, original) {
                return Some(Ok(datagram));
            }
        }
    }
}

/// The messages of a raw ITCH file (each prefixed by its 2-byte big-endian length).
pub struct RawItch<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> RawItch<'a> {
    pub fn new(bytes: &'a [u8]) -> RawItch<'a> {
        RawItch { bytes, at: 0 }
    }
}

impl<'a> Iterator for RawItch<'a> {
    type Item = Result<&'a [u8], CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.bytes.get(self.at..).filter(|rest| !rest.is_empty())?;
        let truncated = |needed: usize| CaptureError::TruncatedMessage {
            offset: self.at,
            needed,
            left: rest.len(),
        };
        if rest.len() < 2 {
            let error = truncated(2);
            self.at = self.bytes.len();
            return Some(Err(error));
        }
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let Some(message) = rest.get(2..2 + len) else {
            let error = truncated(2 + len);
            self.at = self.bytes.len();
            return Some(Err(error));
        };
        self.at += 2 + len;
        Some(Ok(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame carrying `payload` in UDP over IPv4, with `vlans` 802.1Q tags.
    pub(crate) fn frame(payload: &[u8], vlans: usize, protocol: u8) -> Vec<u8> {
        let mut out = vec![0xAA; 12];
        for _ in 0..vlans {
            out.extend_from_slice(&[0x81, 0x00, 0x00, 0x8D]);
        }
        out.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 8 + payload.len()) as u16;
        out.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            protocol,
            0,
            0,
        ]);
        out.extend_from_slice(&[10, 0, 0, 1, 233, 54, 12, 111]);
        out.extend_from_slice(&26477u16.to_be_bytes());
        out.extend_from_slice(&26400u16.to_be_bytes());
        out.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(payload);
        out
    }

    fn pcap(big: bool, nanos: bool, frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut out = Vec::new();
        out.extend_from_slice(&w32(if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 }));
        out.extend_from_slice(&w16(2));
        out.extend_from_slice(&w16(4));
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&w32(65535));
        out.extend_from_slice(&w32(1));
        for (seconds, fraction, bytes) in frames {
            out.extend_from_slice(&w32(*seconds));
            out.extend_from_slice(&w32(*fraction));
            out.extend_from_slice(&w32(bytes.len() as u32));
            out.extend_from_slice(&w32(bytes.len() as u32));
            out.extend_from_slice(bytes);
        }
        out
    }

    fn block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut padded = body.to_vec();
        while padded.len() % 4 != 0 {
            padded.push(0);
        }
        let len = (12 + padded.len()) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(&w32(kind));
        out.extend_from_slice(&w32(len));
        out.extend_from_slice(&padded);
        out.extend_from_slice(&w32(len));
        out
    }

    fn pcapng(big: bool, tsresol: Option<u8>, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut shb = Vec::new();
        shb.extend_from_slice(&w32(PCAPNG_BOM));
        shb.extend_from_slice(&w16(1));
        shb.extend_from_slice(&w16(0));
        shb.extend_from_slice(&[0xFF; 8]);
        let mut out = block(big, PCAPNG_SHB, &shb);
        let mut idb = Vec::new();
        idb.extend_from_slice(&w16(1));
        idb.extend_from_slice(&w16(0));
        idb.extend_from_slice(&w32(65535));
        if let Some(resolution) = tsresol {
            idb.extend_from_slice(&w16(9));
            idb.extend_from_slice(&w16(1));
            idb.extend_from_slice(&[resolution, 0, 0, 0]);
            idb.extend_from_slice(&[0, 0, 0, 0]);
        }
        out.extend(block(big, 1, &idb));
        out.extend(block(big, 5, &[1, 2, 3, 4])); // statistics: skipped
        for (units, bytes) in frames {
            let mut epb = Vec::new();
            epb.extend_from_slice(&w32(0));
            epb.extend_from_slice(&w32((units >> 32) as u32));
            epb.extend_from_slice(&w32(*units as u32));
            epb.extend_from_slice(&w32(bytes.len() as u32));
            epb.extend_from_slice(&w32(bytes.len() as u32));
            epb.extend_from_slice(bytes);
            out.extend(block(big, 6, &epb));
        }
        out
    }

    fn payloads(bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, CaptureCounters) {
        let mut capture = Capture::new(bytes).expect("header");
        let got = capture
            .by_ref()
            .map(|d| d.map(|d| (d.ts_ns, d.payload.to_vec())))
            .collect::<Result<Vec<_>, _>>()
            .expect("whole file");
        (got, capture.counters())
    }

    #[test]
    fn classic_pcap_in_both_byte_orders_and_resolutions() {
        let frames = vec![
            (100, 7, frame(b"first", 0, 17)),
            (100, 8, frame(b"tagged", 1, 17)),
            (100, 9, frame(b"tcp", 0, 6)),
            (101, 10, frame(b"double", 2, 17)),
        ];
        for big in [false, true] {
            for nanos in [false, true] {
                let (got, counters) = payloads(&pcap(big, nanos, &frames));
                let unit = if nanos { 1 } else { 1000 };
                assert_eq!(
                    got,
                    [
                        (100_000_000_000 + 7 * unit, b"first".to_vec()),
                        (100_000_000_000 + 8 * unit, b"tagged".to_vec()),
                        (101_000_000_000 + 10 * unit, b"double".to_vec()),
                    ],
                    "big {big} nanos {nanos}"
                );
                assert_eq!(counters.not_udp, 1);
                assert_eq!(counters.datagrams, 3);
            }
        }
        let file = pcap(false, false, &frames);
        let datagram = Capture::new(&file).unwrap().next().unwrap().unwrap();
        assert_eq!(datagram.src, ([10, 0, 0, 1], 26477));
        assert_eq!(datagram.dst, ([233, 54, 12, 111], 26400));
    }

    #[test]
    fn pcapng_in_both_byte_orders() {
        let frames = vec![(1_500, frame(b"one", 0, 17)), (1_501, frame(b"two", 1, 17))];
        for big in [false, true] {
            let (got, counters) = payloads(&pcapng(big, None, &frames));
            assert_eq!(
                got,
                [(1_500_000, b"one".to_vec()), (1_501_000, b"two".to_vec())]
            );
            assert_eq!(counters.other_blocks, 1);
            let (got, _) = payloads(&pcapng(big, Some(9), &frames));
            assert_eq!(got[0].0, 1_500);
            let (got, _) = payloads(&pcapng(big, Some(0x80 | 10), &frames));
            assert_eq!(got[0].0, 1_500 * 1_000_000_000 / 1024);
        }
    }

    #[test]
    fn a_truncated_record_is_an_error_and_other_frames_are_counted_skips() {
        let whole = pcap(
            false,
            true,
            &[
                (1, 1, frame(b"abcdef", 0, 17)),
                (1, 2, frame(b"ghijkl", 0, 17)),
            ],
        );
        let record = (whole.len() - 24) / 2;
        for cut in 25..whole.len() {
            let results: Vec<_> = Capture::new(&whole[..cut]).unwrap().collect();
            let whole_records = (cut - 24) / record;
            assert_eq!(results.iter().filter(|r| r.is_ok()).count(), whole_records);
            if (cut - 24) % record == 0 {
                assert_eq!(results.len(), whole_records, "cut at a record's end");
            } else {
                assert!(
                    matches!(results.last(), Some(Err(CaptureError::Truncated { .. }))),
                    "cut at {cut}: {results:?}"
                );
            }
        }
        let ng = pcapng(false, None, &[(1, frame(b"abcdef", 0, 17))]);
        for cut in 12..ng.len() {
            let result: Result<Vec<_>, _> = Capture::new(&ng[..cut]).unwrap().collect();
            // Block ends: the section header (28), the interface (48), the statistics (64).
            let at_block_end = [28, 48, 64].contains(&cut);
            assert_eq!(result.is_err(), !at_block_end, "pcapng cut at {cut}");
        }
        assert_eq!(
            Capture::new(&[0; 8]).err(),
            Some(CaptureError::ShortHeader(8))
        );
        assert_eq!(
            Capture::new(&[1; 24]).err(),
            Some(CaptureError::BadMagic(0x0101_0101))
        );
        // A frame cut by the snap length (captured < original) is skipped, not misread.
        let mut snapped = pcap(false, false, &[(1, 1, frame(b"abcdef", 0, 17))]);
        snapped[24 + 12] += 10; // original length
        let (got, counters) = payloads(&snapped);
        assert!(got.is_empty());
        assert_eq!(counters.short_frames, 1);
    }

    #[test]
    fn raw_itch_files() {
        let file = [0, 3, b'a', b'b', b'c', 0, 1, b'z', 0, 0];
        let messages: Vec<_> = RawItch::new(&file).collect();
        assert_eq!(messages, [Ok(&b"abc"[..]), Ok(&b"z"[..]), Ok(&b""[..])]);
        let cut: Vec<_> = RawItch::new(&file[..4]).collect();
        assert_eq!(
            cut,
            [Err(CaptureError::TruncatedMessage {
                offset: 0,
                needed: 5,
                left: 4
            })]
        );
        let odd: Vec<_> = RawItch::new(&file[..6]).collect();
        assert_eq!(
            odd[1],
            Err(CaptureError::TruncatedMessage {
                offset: 5,
                needed: 2,
                left: 1
            })
        );
    }
}
