//! The XDP program that steers the feed's datagrams into the AF_XDP sockets, assembled here from
//! eBPF instructions (no clang, no BPF toolchain, no object file), loaded with `bpf(2)` and
//! attached through a BPF link.
//!
//! What it does, per frame (about 40 instructions on the feed's path):
//! 1. Ethernet II; one 802.1Q or 802.1ad tag is stepped over; anything but IPv4 passes.
//! 2. IPv4 with protocol UDP, the header length from the header (options allowed).
//! 3. The destination address compared with each configured feed's; then, for a whole
//!    datagram, the destination port. A fragment addressed to a feed's group is redirected too,
//!    so that user space counts and refuses it (`packet.rs`) rather than the kernel dropping it
//!    unseen.
//! 4. A match goes to `bpf_redirect_map(xsks, rx_queue_index, XDP_PASS)`: the socket bound to
//!    that queue, or the kernel's stack when no socket is (the low bits of the flags are the
//!    action on a miss, Linux 5.3 and later). Everything else gets `XDP_PASS`.
//!
//! Why assembled rather than compiled: the program is small and fixed but for the feeds it
//! matches, which it carries as immediates (no map lookup per frame); building tickwire must
//! not need clang; and every instruction is visible here and checked by the kernel's verifier
//! at load, whose log is returned in the error when it refuses.
//!
//! Why a link (`BPF_LINK_CREATE`) rather than the netlink attach: a link holds the program on the
//! interface only as long as its file descriptor is open. When the process exits in any way
//! (SIGTERM, a panic's abort, `kill -9`) the kernel closes it and detaches the program, so no
//! stale program can keep steering a feed into a socket nobody reads.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The most feeds one program matches (each costs a few instructions per frame).
pub const MAX_FEEDS: usize = 32;

// Instruction classes, sizes, modes and operations (linux/bpf_common.h, linux/bpf.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const ALU64: u8 = 0x07;
const W: u8 = 0x00;
const H: u8 = 0x08;
const B: u8 = 0x10;
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const AND: u8 = 0x50;
const LSH: u8 = 0x60;
const MOV: u8 = 0xb0;
const JA: u8 = 0x00;
const JEQ: u8 = 0x10;
const JGT: u8 = 0x20;
const JNE: u8 = 0x50;
const JLT: u8 = 0xa0;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const PSEUDO_MAP_FD: u8 = 1;

const HELPER_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

// bpf(2) commands, map, program and attach types.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const MAP_TYPE_XSKMAP: u32 = 17;
const PROG_TYPE_XDP: u32 = 6;
const ATTACH_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction as the kernel reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// Destination register in the low nibble, source in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

/// A jump's target, resolved when the program is finished.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    Pass,
    Redirect,
    Ipv4,
    Tagged,
    Fragment,
}

/// Instructions with forward jumps to labels.
struct Assembler {
    code: Vec<Insn>,
    fixups: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Assembler {
    fn new() -> Assembler {
        Assembler {
            code: Vec::with_capacity(64 + 4 * MAX_FEEDS),
            fixups: Vec::new(),
            labels: Vec::new(),
        }
    }

    fn push(&mut self, insn: Insn) {
        self.code.push(insn);
    }

    fn label(&mut self, label: Label) {
        self.labels.push((label, self.code.len()));
    }

    /// `if dst <op> imm goto label`; 32-bit compares (JMP32) for values loaded as 32 bits.
    fn jump_imm(&mut self, class: u8, op: u8, dst: u8, imm: i32, label: Label) {
        self.fixups.push((self.code.len(), label));
        self.push(insn(class | op | K, dst, 0, 0, imm));
    }

    fn jump_reg(&mut self, op: u8, dst: u8, src: u8, label: Label) {
        self.fixups.push((self.code.len(), label));
        self.push(insn(JMP | op | X, dst, src, 0, 0));
    }

    fn goto(&mut self, label: Label) {
        self.fixups.push((self.code.len(), label));
        self.push(insn(JMP | JA, 0, 0, 0, 0));
    }

    fn finish(mut self) -> Vec<Insn> {
        for &(at, label) in &self.fixups {
            let target = self
                .labels
                .iter()
                .find(|(name, _)| *name == label)
                .map(|&(_, index)| index)
                .expect("every label the program jumps to is placed");
            self.code[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.code
    }
}

fn mov_reg(dst: u8, src: u8) -> Insn {
    insn(ALU64 | MOV | X, dst, src, 0, 0)
}
fn mov_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | MOV | K, dst, 0, 0, imm)
}
fn add_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | ADD | K, dst, 0, 0, imm)
}
fn add_reg(dst: u8, src: u8) -> Insn {
    insn(ALU64 | ADD | X, dst, src, 0, 0)
}
fn and_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | AND | K, dst, 0, 0, imm)
}
fn lsh_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | LSH | K, dst, 0, 0, imm)
}
fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    insn(LDX | size | MEM, dst, src, off, 0)
}

/// A 16-bit field in network order as a little-endian load reads it.
fn wire16(value: u16) -> i32 {
    i32::from(u16::from_le_bytes(value.to_be_bytes()))
}
/// An IPv4 address as a little-endian 32-bit load reads it.
fn wire32(address: std::net::Ipv4Addr) -> i32 {
    i32::from_le_bytes(address.octets())
}

/// The program for these feeds (destination group and port), redirecting into the XSKMAP whose
/// file descriptor is `map_fd`.
pub fn assemble(feeds: &[SocketAddrV4], map_fd: RawFd) -> Vec<Insn> {
    assemble_with(feeds, OnMatch::Redirect(map_fd))
}

/// What the program does with a feed's frame.
#[derive(Clone, Copy)]
enum OnMatch {
    /// `bpf_redirect_map` into this XSKMAP.
    Redirect(RawFd),
    /// Returns this action: the same program with the redirect left out, so that
    /// `BPF_PROG_TEST_RUN` tells a match from a pass (`tests`).
    #[cfg_attr(not(test), allow(dead_code))]
    Return(i32),
}

fn assemble_with(feeds: &[SocketAddrV4], on_match: OnMatch) -> Vec<Insn> {
    // Registers: r6 the context, r2 a packet pointer, r3 data_end, r4 scratch for bounds,
    // r5/r7/r8/r9 fields.
    let mut a = Assembler::new();
    a.push(mov_reg(6, 1));
    a.push(ldx(W, 2, 6, 0)); // ctx->data
    a.push(ldx(W, 3, 6, 4)); // ctx->data_end
    a.push(mov_reg(4, 2));
    a.push(add_imm(4, 14));
    a.jump_reg(JGT, 4, 3, Label::Pass);
    a.push(ldx(H, 5, 2, 12)); // ethertype
    a.push(mov_imm(7, 14));
    a.jump_imm(JMP32, JEQ, 5, wire16(0x0800), Label::Ipv4);
    // One VLAN tag (802.1Q or 802.1ad), then IPv4 or pass.
    a.jump_imm(JMP32, JEQ, 5, wire16(0x8100), Label::Tagged);
    a.jump_imm(JMP32, JNE, 5, wire16(0x88a8), Label::Pass);
    a.label(Label::Tagged);
    a.push(mov_reg(4, 2));
    a.push(add_imm(4, 18));
    a.jump_reg(JGT, 4, 3, Label::Pass);
    a.push(ldx(H, 5, 2, 16));
    a.jump_imm(JMP32, JNE, 5, wire16(0x0800), Label::Pass);
    a.push(mov_imm(7, 18));
    a.label(Label::Ipv4);
    a.push(add_reg(2, 7)); // r2: the IPv4 header
    a.push(mov_reg(4, 2));
    a.push(add_imm(4, 20));
    a.jump_reg(JGT, 4, 3, Label::Pass);
    a.push(ldx(B, 5, 2, 0)); // version and header length
    a.push(mov_reg(8, 5));
    a.push(and_imm(8, 0xf0));
    a.jump_imm(JMP32, JNE, 8, 0x40, Label::Pass);
    a.push(and_imm(5, 0x0f));
    a.jump_imm(JMP32, JLT, 5, 5, Label::Pass);
    a.push(lsh_imm(5, 2)); // header bytes, 20 to 60
    a.push(ldx(B, 8, 2, 9)); // protocol
    a.jump_imm(JMP32, JNE, 8, 17, Label::Pass);
    a.push(ldx(W, 8, 2, 16)); // destination address
    a.push(ldx(H, 9, 2, 6)); // flags and fragment offset
    a.push(and_imm(9, wire16(0x3fff)));
    a.jump_imm(JMP32, JNE, 9, 0, Label::Fragment);
    a.push(add_reg(2, 5)); // r2: the UDP header
    a.push(mov_reg(4, 2));
    a.push(add_imm(4, 8));
    a.jump_reg(JGT, 4, 3, Label::Pass);
    a.push(ldx(H, 9, 2, 2)); // destination port
    for feed in feeds.iter().take(MAX_FEEDS) {
        // if addr != feed.addr skip 2; if port == feed.port goto redirect
        a.push(insn(JMP32 | JNE | K, 8, 0, 1, wire32(*feed.ip())));
        a.jump_imm(JMP32, JEQ, 9, wire16(feed.port()), Label::Redirect);
    }
    a.goto(Label::Pass);
    a.label(Label::Fragment);
    let mut groups: Vec<_> = feeds
        .iter()
        .take(MAX_FEEDS)
        .map(|feed| *feed.ip())
        .collect();
    groups.dedup();
    for group in groups {
        a.jump_imm(JMP32, JEQ, 8, wire32(group), Label::Redirect);
    }
    a.goto(Label::Pass);
    a.label(Label::Redirect);
    match on_match {
        OnMatch::Redirect(map_fd) => {
            a.push(insn(LD | DW | IMM, 1, PSEUDO_MAP_FD, 0, map_fd));
            a.push(insn(0, 0, 0, 0, 0));
            a.push(ldx(W, 2, 6, 16)); // ctx->rx_queue_index
            a.push(mov_imm(3, XDP_PASS));
            a.push(insn(JMP | CALL, 0, 0, 0, HELPER_REDIRECT_MAP));
        }
        OnMatch::Return(action) => a.push(mov_imm(0, action)),
    }
    a.push(insn(JMP | EXIT, 0, 0, 0, 0));
    a.label(Label::Pass);
    a.push(mov_imm(0, XDP_PASS));
    a.push(insn(JMP | EXIT, 0, 0, 0, 0));
    a.finish()
}

fn bpf(command: libc::c_long, attr: &mut [u64]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zeroed, 8-byte aligned buffer at least as long as every field the
    // command reads (the kernel checks that the bytes past what it knows are zero), and it
    // outlives the call; pointers stored in it point at buffers that also outlive the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr) as libc::c_uint,
        )
    };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

fn fd_of(result: libc::c_long) -> OwnedFd {
    // SAFETY: a successful bpf() that creates an object returns a new descriptor that nothing
    // else owns.
    unsafe { OwnedFd::from_raw_fd(result as RawFd) }
}

fn pair(low: u32, high: u32) -> u64 {
    u64::from(low) | (u64::from(high) << 32)
}

/// Why the program could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("creating the XSKMAP: {0} (needs CAP_BPF or CAP_SYS_ADMIN)")]
    Map(io::Error),
    #[error("loading the XDP program: {error}; verifier: {log}")]
    Load { error: io::Error, log: String },
    #[error("attaching the XDP program to interface {ifindex}: native mode: {native}; generic mode: {generic}")]
    Attach {
        ifindex: u32,
        native: io::Error,
        generic: io::Error,
    },
    #[error("adding the socket of queue {queue} to the XSKMAP: {error}")]
    Insert { queue: u32, error: io::Error },
}

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// After the kernel made an skb (`XDP_FLAGS_SKB_MODE`): slower, works on any interface.
    Generic,
}

impl AttachMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
}

/// The program attached to an interface. Dropping it (or the process ending, however it ends)
/// closes the link and detaches the program.
pub struct Attached {
    map: OwnedFd,
    _program: OwnedFd,
    _link: OwnedFd,
    pub mode: AttachMode,
    pub instructions: usize,
}

impl Attached {
    /// Loads the program for `feeds` and attaches it to `ifindex`, in native mode unless that
    /// fails or `force_generic`, then in generic mode. `queues` sizes the socket map.
    pub fn attach(
        ifindex: u32,
        queues: u32,
        feeds: &[SocketAddrV4],
        force_generic: bool,
    ) -> Result<Attached, ProgramError> {
        let mut attr = [0u64; 16];
        attr[0] = pair(MAP_TYPE_XSKMAP, 4); // map_type, key_size
        attr[1] = pair(4, queues.max(1)); // value_size, max_entries
        let map = fd_of(bpf(BPF_MAP_CREATE, &mut attr).map_err(ProgramError::Map)?);
        let code = assemble(feeds, map.as_raw_fd());
        let program = load_program(&code)?;
        let mut native_error = None;
        if !force_generic {
            match link(program.as_raw_fd(), ifindex, XDP_FLAGS_DRV_MODE) {
                Ok(link) => {
                    return Ok(Attached {
                        map,
                        _program: program,
                        _link: link,
                        mode: AttachMode::Native,
                        instructions: code.len(),
                    })
                }
                Err(error) => native_error = Some(error),
            }
        }
        match link(program.as_raw_fd(), ifindex, XDP_FLAGS_SKB_MODE) {
            Ok(link) => Ok(Attached {
                map,
                _program: program,
                _link: link,
                mode: AttachMode::Generic,
                instructions: code.len(),
            }),
            Err(generic) => Err(ProgramError::Attach {
                ifindex,
                native: native_error.unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::Unsupported, "not tried (generic mode asked)")
                }),
                generic,
            }),
        }
    }

    /// Steers queue `queue`'s matching frames to the AF_XDP socket `socket`.
    pub fn insert(&self, queue: u32, socket: RawFd) -> Result<(), ProgramError> {
        let key = queue;
        let value = socket as u32;
        let mut attr = [0u64; 4];
        attr[0] = u64::from(self.map.as_raw_fd() as u32);
        attr[1] = &key as *const u32 as u64;
        attr[2] = &value as *const u32 as u64;
        attr[3] = 0; // BPF_ANY
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
            .map(|_| ())
            .map_err(|error| ProgramError::Insert { queue, error })
    }
}

fn load_program(code: &[Insn]) -> Result<OwnedFd, ProgramError> {
    let license = c"Dual MIT/GPL";
    let name = *b"tickwire_feed\0\0\0";
    let attempt = |log: Option<&mut Vec<u8>>| {
        let mut attr = [0u64; 16];
        attr[0] = pair(PROG_TYPE_XDP, code.len() as u32);
        attr[1] = code.as_ptr() as u64;
        attr[2] = license.as_ptr() as u64;
        if let Some(log) = log {
            attr[3] = pair(1, log.len() as u32); // log_level, log_size
            attr[4] = log.as_mut_ptr() as u64;
        }
        // kern_version, prog_flags: 0. prog_name (16 bytes) at byte 48.
        attr[6] = u64::from_le_bytes(name[..8].try_into().expect("8 bytes"));
        attr[7] = u64::from_le_bytes(name[8..].try_into().expect("8 bytes"));
        // prog_ifindex 0, expected_attach_type BPF_XDP.
        attr[8] = pair(0, ATTACH_XDP);
        bpf(BPF_PROG_LOAD, &mut attr)
    };
    match attempt(None) {
        Ok(fd) => Ok(fd_of(fd)),
        Err(error) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; 64 * 1024];
            let _ = attempt(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: String = text.lines().rev().take(8).collect::<Vec<_>>().join(" | ");
            Err(ProgramError::Load {
                error,
                log: if tail.is_empty() {
                    "(none)".into()
                } else {
                    tail
                },
            })
        }
    }
}

fn link(program: RawFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = [0u64; 8];
    attr[0] = pair(program as u32, ifindex); // prog_fd, target_ifindex
    attr[1] = pair(ATTACH_XDP, flags); // attach_type, flags
    bpf(BPF_LINK_CREATE, &mut attr).map(fd_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_inside_the_program_and_it_ends_in_exits() {
        let feeds: Vec<SocketAddrV4> = vec![
            "233.54.12.111:26477".parse().unwrap(),
            "233.49.196.111:26477".parse().unwrap(),
        ];
        let code = assemble(&feeds, 3);
        assert_eq!(code.last().unwrap().code, JMP | EXIT);
        for (index, insn) in code.iter().enumerate() {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            if (class == JMP || class == JMP32) && op != CALL && op != EXIT {
                let target = index as isize + 1 + insn.off as isize;
                assert!(
                    (0..code.len() as isize).contains(&target),
                    "instruction {index} jumps to {target}"
                );
            }
        }
        // The map's descriptor is in the wide load, marked as a map.
        let wide = code.iter().position(|i| i.code == LD | DW | IMM).unwrap();
        assert_eq!(code[wide].imm, 3);
        assert_eq!(code[wide].regs >> 4, PSEUDO_MAP_FD);
    }

    const BPF_PROG_TEST_RUN: libc::c_long = 10;
    const MATCHED: i32 = 3; // XDP_TX: a value the program never returns otherwise

    /// Runs the filter in the kernel (`BPF_PROG_TEST_RUN`: the real verifier and JIT, no
    /// interface) on each frame; `None` when this process may not load programs.
    fn run_in_kernel(feeds: &[SocketAddrV4], frames: &[Vec<u8>]) -> Option<Vec<i32>> {
        let code = assemble_with(feeds, OnMatch::Return(MATCHED));
        let program = match load_program(&code) {
            Ok(program) => program,
            Err(ProgramError::Load { error, .. })
                if error.raw_os_error() == Some(libc::EPERM)
                    && std::env::var("TICKWIRE_REQUIRE_NETNS").as_deref() != Ok("1") =>
            {
                eprintln!("SKIPPED: loading BPF programs needs CAP_BPF: {error}");
                return None;
            }
            Err(error) => panic!("the verifier refused the filter: {error}"),
        };
        let mut results = Vec::new();
        for frame in frames {
            let mut out = vec![0u8; frame.len() + 256];
            let mut attr = [0u64; 10];
            attr[0] = pair(program.as_raw_fd() as u32, 0); // prog_fd, retval
            attr[1] = pair(frame.len() as u32, out.len() as u32); // data_size_in, _out
            attr[2] = frame.as_ptr() as u64;
            attr[3] = out.as_mut_ptr() as u64;
            attr[4] = pair(1, 0); // repeat, duration
            bpf(BPF_PROG_TEST_RUN, &mut attr).expect("BPF_PROG_TEST_RUN");
            results.push((attr[0] >> 32) as i32);
        }
        Some(results)
    }

    #[test]
    fn the_filter_matches_exactly_the_feeds_in_the_kernel() {
        use crate::net::xdp::packet::build;
        let feed: SocketAddrV4 = "233.54.12.111:26477".parse().unwrap();
        let other_feed: SocketAddrV4 = "233.49.196.111:26478".parse().unwrap();
        let source: SocketAddrV4 = "10.0.0.1:40000".parse().unwrap();
        let frame = |destination: SocketAddrV4, vlan: Option<u16>| {
            let mut out = Vec::new();
            build(source, destination, vlan, &[7u8; 40], &mut out);
            out
        };
        let plain = frame(feed, None);
        let mut qinq = frame(feed, Some(5));
        qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
        let mut fragment = plain.clone();
        fragment[14 + 6] = 0x20; // more fragments (the checksum is not the filter's business)
        let mut options = plain[..14].to_vec();
        options.extend_from_slice(&[0x46]);
        options.extend_from_slice(&plain[15..34]);
        options.extend_from_slice(&[1, 1, 1, 0]);
        options.extend_from_slice(&plain[34..]);
        let mut tcp = plain.clone();
        tcp[14 + 9] = 6;
        let mut ipv6 = plain.clone();
        ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
        let cases: Vec<(&str, Vec<u8>, bool)> = vec![
            ("a feed", plain.clone(), true),
            ("the other feed", frame(other_feed, None), true),
            ("802.1Q tagged", frame(feed, Some(100)), true),
            ("802.1ad tagged", qinq, true),
            ("IP options", options, true),
            ("a fragment of a feed's group", fragment, true),
            (
                "the group on another port",
                frame("233.54.12.111:26478".parse().unwrap(), None),
                false,
            ),
            (
                "another group on the port",
                frame("233.54.12.112:26477".parse().unwrap(), None),
                false,
            ),
            ("TCP", tcp, false),
            ("IPv6", ipv6, false),
            ("cut in the IP header", plain[..30].to_vec(), false),
            ("cut in the UDP header", plain[..40].to_vec(), false),
            (
                "cut in the VLAN tag",
                frame(feed, Some(1))[..16].to_vec(),
                false,
            ),
        ];
        let frames: Vec<Vec<u8>> = cases.iter().map(|(_, frame, _)| frame.clone()).collect();
        let Some(results) = run_in_kernel(&[feed, other_feed], &frames) else {
            return;
        };
        for ((name, _, matches), result) in cases.iter().zip(results) {
            let expected = if *matches { MATCHED } else { XDP_PASS };
            assert_eq!(result, expected, "{name}");
        }
    }

    #[test]
    fn fields_are_compared_as_a_little_endian_load_reads_them() {
        assert_eq!(wire16(0x0800), 0x0008);
        assert_eq!(
            wire16(26477),
            i32::from(u16::from_le_bytes(26477u16.to_be_bytes()))
        );
        assert_eq!(
            wire32("233.54.12.111".parse().unwrap()),
            i32::from_le_bytes([233, 54, 12, 111])
        );
    }
}
