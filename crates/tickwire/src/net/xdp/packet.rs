//! Ethernet, 802.1Q, IPv4 and UDP as an AF_XDP socket hands them over: a whole frame from the
//! wire, with nothing checked by the kernel's IP or UDP layers (the XDP program only steers).
//! So every length here is checked against the frame before it is read, and each refusal is its
//! own [`PacketError`] for the receive path to count.
//!
//! - Ethernet II, with at most one 802.1Q (or 802.1ad) tag.
//! - IPv4 only: version 4, a header of 20 to 60 bytes (options skipped), the header checksum
//!   verified, `total length` within the frame (what follows it is Ethernet padding).
//!   Fragments (more-fragments set or an offset) are refused: a MoldUDP64 packet is never
//!   fragmented by a sender that follows the specification (it fits one Ethernet frame), and
//!   reassembly is the kernel's job; the kernel path would hand over the whole datagram.
//! - UDP: its length field at least 8 and within the IP payload. Its checksum is verified only
//!   when asked ([`parse`]'s `verify_udp_checksum`) and the sender set one (0 means none, RFC
//!   768). Off by default in the receive path: the NIC has already checked the frame's FCS, a
//!   MoldUDP64 packet is one frame, and a sender with checksum offload on a virtual link (veth)
//!   leaves a partial sum in the field that no receiver on that link could verify.
//!
//! Nothing here allocates or panics on any input (`fuzz/fuzz_targets/udp_frame.rs`).

use std::net::{Ipv4Addr, SocketAddrV4};

/// Ethernet II's header.
pub const ETHERNET_HEADER: usize = 14;
/// A VLAN tag.
pub const VLAN_TAG: usize = 4;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const IPV4_MIN_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const PROTOCOL_UDP: u8 = 17;

/// Why a frame is not a datagram for the feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("frame shorter than its headers")]
    Truncated,
    #[error("not IPv4 (ethertype {0:#06x})")]
    NotIpv4(u16),
    #[error("IPv4 header malformed (version or header length)")]
    BadIpHeader,
    #[error("IPv4 header checksum wrong")]
    BadIpChecksum,
    #[error("IPv4 total length {total} does not fit the {available} bytes after the link header")]
    BadIpLength { total: u16, available: usize },
    #[error("an IPv4 fragment (refused: reassembly is the kernel's)")]
    Fragment,
    #[error("not UDP (IP protocol {0})")]
    NotUdp(u8),
    #[error("UDP length {udp} does not fit the IP payload of {available} bytes")]
    BadUdpLength { udp: u16, available: usize },
    #[error("UDP checksum wrong")]
    BadUdpChecksum,
}

/// A UDP datagram found in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub source: SocketAddrV4,
    pub destination: SocketAddrV4,
    /// The 802.1Q VLAN id, when the frame was tagged.
    pub vlan: Option<u16>,
    pub payload: &'a [u8],
}

#[inline]
fn be16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// The one's-complement sum of `bytes` (RFC 1071), not yet folded or inverted.
fn sum(bytes: &[u8], mut acc: u32) -> u32 {
    let mut words = bytes.chunks_exact(2);
    for word in &mut words {
        acc += u32::from(u16::from_be_bytes([word[0], word[1]]));
        // Folded as it goes, so a jumbo frame cannot overflow the accumulator.
        if acc > 0xffff_0000 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    if let [last] = words.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Finds the UDP datagram in an Ethernet frame, checking every header on the way (and the UDP
/// checksum when `verify_udp_checksum`).
pub fn parse(frame: &[u8], verify_udp_checksum: bool) -> Result<Datagram<'_>, PacketError> {
    if frame.len() < ETHERNET_HEADER {
        return Err(PacketError::Truncated);
    }
    let mut ethertype = be16(frame, 12);
    let mut at = ETHERNET_HEADER;
    let mut vlan = None;
    if ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
        if frame.len() < at + VLAN_TAG {
            return Err(PacketError::Truncated);
        }
        vlan = Some(be16(frame, at) & 0x0fff);
        ethertype = be16(frame, at + 2);
        at += VLAN_TAG;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(PacketError::NotIpv4(ethertype));
    }
    let ip = &frame[at..];
    if ip.len() < IPV4_MIN_HEADER {
        return Err(PacketError::Truncated);
    }
    if ip[0] >> 4 != 4 {
        return Err(PacketError::BadIpHeader);
    }
    let header = usize::from(ip[0] & 0x0f) * 4;
    if header < IPV4_MIN_HEADER {
        return Err(PacketError::BadIpHeader);
    }
    if ip.len() < header {
        return Err(PacketError::Truncated);
    }
    let total = be16(ip, 2);
    if usize::from(total) < header || usize::from(total) > ip.len() {
        return Err(PacketError::BadIpLength {
            total,
            available: ip.len(),
        });
    }
    if fold(sum(&ip[..header], 0)) != 0xffff {
        return Err(PacketError::BadIpChecksum);
    }
    // More-fragments, or a fragment offset: not a whole datagram.
    if be16(ip, 6) & 0x3fff != 0 {
        return Err(PacketError::Fragment);
    }
    if ip[9] != PROTOCOL_UDP {
        return Err(PacketError::NotUdp(ip[9]));
    }
    let source_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let destination_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let udp = &ip[header..usize::from(total)];
    if udp.len() < UDP_HEADER {
        return Err(PacketError::Truncated);
    }
    let length = be16(udp, 4);
    if usize::from(length) < UDP_HEADER || usize::from(length) > udp.len() {
        return Err(PacketError::BadUdpLength {
            udp: length,
            available: udp.len(),
        });
    }
    let udp = &udp[..usize::from(length)];
    if verify_udp_checksum && be16(udp, 6) != 0 {
        // The pseudo-header (RFC 768): addresses, protocol, UDP length; then the datagram,
        // whose checksum field is included (a correct one makes the sum all ones).
        let mut acc = sum(&ip[12..20], 0);
        acc += u32::from(PROTOCOL_UDP) + u32::from(length);
        if fold(sum(udp, acc)) != 0xffff {
            return Err(PacketError::BadUdpChecksum);
        }
    }
    Ok(Datagram {
        source: SocketAddrV4::new(source_ip, be16(udp, 0)),
        destination: SocketAddrV4::new(destination_ip, be16(udp, 2)),
        vlan,
        payload: &udp[UDP_HEADER..],
    })
}

/// Builds an Ethernet frame holding one UDP datagram, checksums included: what a sender puts on
/// the wire. For tests, the fuzz target's seeds and the benchmark; `vlan` adds an 802.1Q tag.
pub fn build(
    source: SocketAddrV4,
    destination: SocketAddrV4,
    vlan: Option<u16>,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    out.clear();
    // Destination MAC: the IPv4 multicast mapping (RFC 1112) or a fixed unicast one.
    let d = destination.ip().octets();
    if destination.ip().is_multicast() {
        out.extend_from_slice(&[0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]]);
    } else {
        out.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    }
    out.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    if let Some(id) = vlan {
        out.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        out.extend_from_slice(&(id & 0x0fff).to_be_bytes());
    }
    out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip_at = out.len();
    let udp_len = (UDP_HEADER + payload.len()) as u16;
    let total = IPV4_MIN_HEADER as u16 + udp_len;
    out.extend_from_slice(&[0x45, 0]);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0x40, 0, 64, PROTOCOL_UDP, 0, 0]);
    out.extend_from_slice(&source.ip().octets());
    out.extend_from_slice(&d);
    let ip_sum = !fold(sum(&out[ip_at..ip_at + IPV4_MIN_HEADER], 0));
    out[ip_at + 10..ip_at + 12].copy_from_slice(&ip_sum.to_be_bytes());
    let udp_at = out.len();
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    let mut acc = sum(&out[ip_at + 12..ip_at + 20], 0);
    acc += u32::from(PROTOCOL_UDP) + u32::from(udp_len);
    let mut udp_sum = !fold(sum(&out[udp_at..], acc));
    if udp_sum == 0 {
        udp_sum = 0xffff;
    }
    out[udp_at + 6..udp_at + 8].copy_from_slice(&udp_sum.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddrV4 {
        text.parse().unwrap()
    }

    fn frame(vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        build(
            addr("10.0.0.1:40000"),
            addr("233.54.12.111:26477"),
            vlan,
            payload,
            &mut out,
        );
        out
    }

    #[test]
    fn a_built_frame_parses_back_with_and_without_a_vlan_tag() {
        for vlan in [None, Some(42)] {
            let bytes = frame(vlan, b"hello, moldudp64");
            let datagram = parse(&bytes, true).unwrap();
            assert_eq!(datagram.source, addr("10.0.0.1:40000"));
            assert_eq!(datagram.destination, addr("233.54.12.111:26477"));
            assert_eq!(datagram.vlan, vlan);
            assert_eq!(datagram.payload, b"hello, moldudp64");
        }
    }

    /// The IPv4 header of Wikipedia's "Internet checksum" example (checksum 0xb861, a value
    /// no code of ours computed), carrying a UDP datagram without a checksum.
    #[test]
    fn a_published_ipv4_header_checksum_verifies() {
        let mut bytes = vec![0u8; 12];
        bytes.extend_from_slice(&[0x08, 0x00]);
        bytes.extend_from_slice(&[
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ]);
        let udp_len: u16 = 0x73 - 20;
        bytes.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        bytes.extend_from_slice(&udp_len.to_be_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes.extend(std::iter::repeat_n(0x61, usize::from(udp_len) - 8));
        let datagram = parse(&bytes, true).unwrap();
        assert_eq!(datagram.source, addr("192.168.0.1:12345"));
        assert_eq!(datagram.destination, addr("192.168.0.199:53"));
        assert_eq!(datagram.payload.len(), 0x73 - 28);
        bytes[14 + 11] = 0x62;
        assert_eq!(parse(&bytes, true), Err(PacketError::BadIpChecksum));
    }

    #[test]
    fn ip_options_are_skipped_and_padding_after_the_datagram_is_ignored() {
        let plain = frame(None, b"payload");
        // Rebuild the IP header with 4 bytes of options (a NOP and an end-of-list, padded).
        let mut bytes = plain[..ETHERNET_HEADER].to_vec();
        let ip = &plain[ETHERNET_HEADER..ETHERNET_HEADER + 20];
        let mut header = ip.to_vec();
        header[0] = 0x46;
        let total = u16::from_be_bytes([ip[2], ip[3]]) + 4;
        header[2..4].copy_from_slice(&total.to_be_bytes());
        header.extend_from_slice(&[1, 0, 0, 0]);
        header[10..12].copy_from_slice(&[0, 0]);
        let checksum = !fold(sum(&header, 0));
        header[10..12].copy_from_slice(&checksum.to_be_bytes());
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&plain[ETHERNET_HEADER + 20..]);
        bytes.extend_from_slice(&[0; 6]); // Ethernet padding
        assert_eq!(parse(&bytes, true).unwrap().payload, b"payload");
    }

    #[test]
    fn each_broken_header_is_its_own_error() {
        let good = frame(None, b"abcdefgh");
        const IP: usize = ETHERNET_HEADER;
        type Breaker = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Breaker, PacketError)> = vec![
            (Box::new(|f| f.truncate(10)), PacketError::Truncated),
            (
                Box::new(|f| f[12..14].copy_from_slice(&[0x86, 0xdd])),
                PacketError::NotIpv4(0x86dd),
            ),
            (Box::new(|f| f[IP] = 0x65), PacketError::BadIpHeader),
            (Box::new(|f| f[IP] = 0x44), PacketError::BadIpHeader),
            (Box::new(|f| f[IP + 8] = 1), PacketError::BadIpChecksum),
            (
                Box::new(|f| f.truncate(ETHERNET_HEADER + 30)),
                PacketError::BadIpLength {
                    total: 36,
                    available: 30,
                },
            ),
            (
                Box::new(|f| f[IP + 30] ^= 0xff),
                PacketError::BadUdpChecksum,
            ),
        ];
        for (break_it, expected) in cases {
            let mut bytes = good.clone();
            break_it(&mut bytes);
            assert_eq!(parse(&bytes, true), Err(expected));
        }
    }

    fn with_ip_header(mut bytes: Vec<u8>, change: impl Fn(&mut [u8])) -> Vec<u8> {
        let ip = &mut bytes[ETHERNET_HEADER..ETHERNET_HEADER + 20];
        change(ip);
        ip[10..12].copy_from_slice(&[0, 0]);
        let checksum = !fold(sum(ip, 0));
        ip[10..12].copy_from_slice(&checksum.to_be_bytes());
        bytes
    }

    #[test]
    fn fragments_are_refused_first_and_later_pieces_alike() {
        let more = with_ip_header(frame(None, b"x"), |ip| ip[6] = 0x20);
        assert_eq!(parse(&more, true), Err(PacketError::Fragment));
        let later = with_ip_header(frame(None, b"x"), |ip| ip[7] = 0x10);
        assert_eq!(parse(&later, true), Err(PacketError::Fragment));
        // Don't-fragment alone is a whole datagram.
        let df = with_ip_header(frame(None, b"x"), |ip| ip[6] = 0x40);
        assert!(parse(&df, true).is_ok());
    }

    #[test]
    fn udp_lengths_and_protocols_are_checked() {
        let tcp = with_ip_header(frame(None, b"x"), |ip| ip[9] = 6);
        assert_eq!(parse(&tcp, true), Err(PacketError::NotUdp(6)));
        let mut long = frame(None, b"abcd");
        let udp = ETHERNET_HEADER + 20;
        long[udp + 4..udp + 6].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(
            parse(&long, true),
            Err(PacketError::BadUdpLength {
                udp: 100,
                available: 12
            })
        );
        let mut short = frame(None, b"abcd");
        short[udp + 4..udp + 6].copy_from_slice(&7u16.to_be_bytes());
        assert!(matches!(
            parse(&short, true),
            Err(PacketError::BadUdpLength { udp: 7, .. })
        ));
        // No checksum (0) is allowed.
        let mut none = frame(None, b"abcd");
        none[udp + 6..udp + 8].copy_from_slice(&[0, 0]);
        none[udp + 9] ^= 1;
        assert!(parse(&none, true).is_ok());
    }

    #[test]
    fn an_unverified_udp_checksum_is_not_read() {
        let mut bytes = frame(None, b"abcdefgh");
        bytes[ETHERNET_HEADER + 30] ^= 0xff;
        assert_eq!(parse(&bytes, true), Err(PacketError::BadUdpChecksum));
        assert!(parse(&bytes, false).is_ok());
    }

    #[test]
    fn every_prefix_of_a_frame_is_refused_without_panicking() {
        let bytes = frame(Some(7), b"a payload of some length");
        for end in 0..bytes.len() {
            assert!(parse(&bytes[..end], true).is_err(), "prefix of {end} bytes");
        }
    }
}
