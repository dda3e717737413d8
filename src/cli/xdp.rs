//! `tickwire xdp-recv`: attach the AF_XDP receive path to an interface, count what arrives for
//! the given feeds, and say what the host gave (native or generic mode, zero-copy, queues). For
//! an operator checking that a feed reaches this host by AF_XDP before configuring a venue with
//! it, and for the tests that check the program leaves with the process however it stops.

use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tickwire::net::xdp::socket::UmemConfig;
use tickwire::net::xdp::{XdpConfig, XdpReceiver};

#[derive(clap::Args, Debug)]
pub struct XdpRecvArgs {
    /// The interface that carries the feed.
    #[arg(long)]
    interface: String,
    /// A feed's destination group and port (GROUP:PORT), repeatable.
    #[arg(long = "feed", required = true, value_name = "GROUP:PORT")]
    feeds: Vec<SocketAddrV4>,
    /// Receive queues to bind (default: every one of the interface).
    #[arg(long = "queue", value_name = "N")]
    queues: Vec<u32>,
    /// Attach in generic (skb) mode without trying native mode.
    #[arg(long)]
    generic: bool,
    /// Busy-poll for this many microseconds per round (0: sleep in poll(2)).
    #[arg(long, default_value_t = 0)]
    busy_poll_us: u32,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
    /// Stop after this many datagrams.
    #[arg(long)]
    count: Option<u64>,
    /// Verify UDP checksums (off by default: the NIC checked the frame's FCS).
    #[arg(long)]
    verify_udp_checksum: bool,
    /// Attach, say what the host gave (mode, zero-copy, queues) and exit: what
    /// `tuning/check-host --xdp-interface` runs.
    #[arg(long)]
    probe: bool,
    /// Print each datagram (source, destination, length) on stdout.
    #[arg(long)]
    print: bool,
}

pub fn xdp_recv(args: XdpRecvArgs) -> ExitCode {
    let Some(stop) = super::signals::stop_flag("xdp-recv") else {
        return ExitCode::FAILURE;
    };
    let config = XdpConfig {
        interface: args.interface.clone(),
        feeds: args.feeds.clone(),
        queues: (!args.queues.is_empty()).then(|| args.queues.clone()),
        umem: UmemConfig {
            busy_poll_us: args.busy_poll_us,
            ..UmemConfig::default()
        },
        force_generic: args.generic,
        verify_udp_checksum: args.verify_udp_checksum,
    };
    let mut receiver = match XdpReceiver::open(&config) {
        Ok(receiver) => receiver,
        Err(error) => {
            let hint = if error.is_permission() {
                " (needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW)"
            } else {
                ""
            };
            eprintln!("tickwire xdp-recv: {error}{hint}");
            return ExitCode::FAILURE;
        }
    };
    // The first line says what runs; scripts and tests wait for it.
    println!("xdp-recv: {}", receiver.describe());
    if args.probe {
        return ExitCode::SUCCESS;
    }
    let started = Instant::now();
    let deadline = args.seconds.map(|s| started + Duration::from_secs_f64(s));
    let mut last_report = started;
    let mut reported = 0u64;
    let mut seen = 0u64;
    let print = args.print;
    loop {
        let read = receiver.poll(64, |datagram| {
            seen += 1;
            if print {
                println!(
                    "{} -> {} {} bytes",
                    datagram.source,
                    datagram.destination,
                    datagram.payload.len()
                );
            }
        });
        let now = Instant::now();
        if stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|deadline| now >= deadline)
            || args.count.is_some_and(|count| seen >= count)
        {
            break;
        }
        if now.duration_since(last_report) >= Duration::from_secs(1) {
            let counters = receiver.counters();
            eprintln!(
                "xdp-recv: {} datagrams/s, {} in all",
                counters.datagrams - reported,
                counters.datagrams
            );
            reported = counters.datagrams;
            last_report = now;
        }
        if read == 0 {
            if args.busy_poll_us > 0 {
                std::hint::spin_loop();
            } else {
                receiver.wait(100);
            }
        }
    }
    let counters = receiver.counters();
    let kernel = receiver.kernel_counters();
    println!(
        "xdp-recv: summary: frames={} datagrams={} not_a_feed={} fragments={} truncated={} \
         bad_headers={} bad_checksums={} kernel_rx_dropped={} kernel_rx_ring_full={} \
         kernel_fill_ring_empty={} seconds={:.1}",
        counters.frames,
        counters.datagrams,
        counters.not_a_feed,
        counters.fragments,
        counters.truncated,
        counters.bad_headers,
        counters.bad_checksums,
        kernel.rx_dropped,
        kernel.rx_ring_full,
        kernel.rx_fill_ring_empty,
        started.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
