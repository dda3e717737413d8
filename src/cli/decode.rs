//! `tickwire decode`: a capture file in, normalized events out as JSON lines, with the same
//! decoder the appliance runs.
//!
//! The venues are the ones whose protocol has a capture decoder
//! (`Protocol::capture_decoder`, `venue::capture`), found through `VenueKind::ALL`; each decoder
//! lives in its venue's folder, so this file names no venue. Input here: plain or gzip (told
//! apart by the gzip magic bytes, not the name); one message per line, raw, optionally prefixed
//! by its receive time in ns and a space (hftbacktest's capture format); a decoder that reads its files whole (DBN) opens the
//! path itself. Output: one object per normalized event on stdout, notes and a summary on
//! stderr. An error ends the decode with exit 1 naming the file, after the events decoded
//! before it are written.

use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter};
use std::path::Path;
use std::process::ExitCode;
use tickwire::config::VenueKind;
use tickwire::venue::capture::{Capture, CaptureDecoder, OnMessage};

/// Opens `path`, decompressing when it starts with the gzip magic bytes.
pub fn open_lines(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let mut file = BufReader::with_capacity(1 << 20, File::open(path)?);
    let gzip = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    Ok(if gzip {
        Box::new(BufReader::with_capacity(1 << 20, MultiGzDecoder::new(file)))
    } else {
        Box::new(file)
    })
}

/// Splits `<ns> <json>` into its parts; a line with no numeric prefix is all message.
pub fn split_line(line: &[u8]) -> (u64, &[u8]) {
    if let Some(space) = line.iter().position(|&byte| byte == b' ') {
        let prefix = &line[..space];
        if !prefix.is_empty() && prefix.len() <= 20 && prefix.iter().all(u8::is_ascii_digit) {
            if let Some(ns) = std::str::from_utf8(prefix)
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
            {
                return (ns, &line[space + 1..]);
            }
        }
    }
    (0, line)
}

/// Every capture decoder, in `VenueKind::ALL`'s order (a kind whose captures another kind's
/// decoder reads has none of its own).
fn decoders() -> Vec<&'static dyn CaptureDecoder> {
    VenueKind::ALL
        .into_iter()
        .filter_map(|kind| kind.protocol().capture_decoder())
        .collect()
}

pub fn decode(venue: &str, path: &Path, dbn_version: Option<u8>) -> ExitCode {
    let label = venue;
    let all = decoders();
    let decoder = all.iter().copied().find(|decoder| decoder.label() == label);
    if dbn_version.is_some() && !decoder.is_some_and(|decoder| decoder.takes_dbn_version()) {
        let takers: Vec<&str> = all
            .iter()
            .filter(|decoder| decoder.takes_dbn_version())
            .map(|decoder| decoder.label())
            .collect();
        eprintln!(
            "decode: --dbn-version is for --venue {} only",
            takers.join(" or ")
        );
        return ExitCode::from(2);
    }
    let Some(decoder) = decoder else {
        let valid: Vec<&str> = all.iter().map(|decoder| decoder.label()).collect();
        eprintln!(
            "decode: venue {label:?} is not supported; valid: {}",
            valid.join(", ")
        );
        return ExitCode::from(2);
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut notes = std::io::stderr();
    let lines = |on_message: &mut OnMessage<'_>| for_each_message(path, on_message);
    let result = decoder.decode(&mut Capture {
        path,
        dbn_version,
        lines: &lines,
        out: &mut out,
        notes: &mut notes,
    });
    match result {
        Ok(summary) => {
            eprintln!("{summary}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("decode: {}: {error:#}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// Each non-blank line of `path`, as (line number, receive time, message); returns the lines
/// read.
fn for_each_message(
    path: &Path,
    mut on_message: impl FnMut(u64, u64, &[u8]) -> std::io::Result<()>,
) -> anyhow::Result<u64> {
    let mut input = open_lines(path)?;
    let mut raw = Vec::with_capacity(1 << 16);
    let mut lines = 0u64;
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        lines += 1;
        let line = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (recv_ts_ns, message) = split_line(line);
        on_message(lines, recv_ts_ns, message)?;
    }
    Ok(lines)
}
