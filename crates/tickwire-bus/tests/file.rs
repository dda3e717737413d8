//! The bus file between a writer and readers in one process: what a reader sees of a real
//! mapping, and every way a file can be wrong, each a clear error.

use std::os::unix::fs::PermissionsExt;
use tickwire_bus::event::{Body, Event, EventHeader, EventKind, Gap, GapReason};
use tickwire_bus::{
    BusError, BusOptions, BusReader, BusWriter, DirectoryEntry, Geometry, ReadError, Start,
};

fn event(position: u64) -> Event {
    Event::new(
        EventHeader {
            exchange_ts_ns: position,
            recv_ts_ns: position + 1,
            venue_seq: position,
            instrument_id: 7,
            venue_id: 1,
            kind: EventKind::Gap,
            flags: 0,
        },
        Body::Gap(Gap::new(GapReason::SequenceBreak, position, position + 1)),
    )
}

fn writer(dir: &std::path::Path, capacity: u64) -> BusWriter {
    let options = BusOptions {
        path: dir.join("test.bus"),
        geometry: Geometry::new(capacity, 8).unwrap(),
        group: None,
    };
    BusWriter::create(&options, 42, 1_000).expect("the bus is made")
}

fn read_all(reader: &mut BusReader) -> (Vec<Event>, u64) {
    let mut out = vec![event(0); 256];
    let (mut events, mut missed) = (Vec::new(), 0);
    loop {
        let batch = reader.read(&mut out).unwrap();
        missed += batch.missed;
        events.extend_from_slice(&out[..batch.count]);
        if batch == Default::default() {
            return (events, missed);
        }
    }
}

#[test]
fn a_reader_sees_published_events_the_directory_and_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path(), 1024);
    let path = dir.path().join("test.bus");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    writer
        .add_instrument(&DirectoryEntry {
            instrument_id: 7,
            venue_id: 1,
            venue: "sim".into(),
            symbol: "BTCUSDT".into(),
            venue_symbol: "btcusdt".into(),
        })
        .unwrap();
    let mut reader = BusReader::open(&path, Start::Latest, 64).unwrap();
    assert_eq!(reader.epoch(), 42);
    assert_eq!(reader.capacity(), 1024);
    assert_eq!(reader.directory()[0].venue_symbol, "btcusdt");
    for position in 0..100 {
        writer.write(&event(position));
    }
    assert_eq!(
        read_all(&mut reader).0.len(),
        0,
        "nothing before the publication"
    );
    writer.publish();
    let (events, missed) = read_all(&mut reader);
    assert_eq!(missed, 0);
    assert_eq!(events, (0..100).map(event).collect::<Vec<_>>());
    assert!(!reader.is_closed() && !reader.replaced());
    drop(writer);
    assert!(reader.is_closed());
}

#[test]
fn a_lapped_reader_resynchronises_with_an_exact_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path(), 1024);
    let mut reader = BusReader::open(&dir.path().join("test.bus"), Start::Latest, 64).unwrap();
    for position in 0..5000 {
        writer.write(&event(position));
        writer.publish();
    }
    let (events, missed) = read_all(&mut reader);
    assert_eq!(missed + events.len() as u64, 5000);
    assert!(missed >= 5000 - 1024);
    let first = missed;
    assert_eq!(
        events[0],
        event(first),
        "the reader goes on right after what it missed"
    );
    assert_eq!(events.last(), Some(&event(4999)));
}

#[test]
fn a_second_writer_is_refused_and_a_new_one_makes_a_new_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let first = writer(dir.path(), 1024);
    let path = dir.path().join("test.bus");
    let reader = BusReader::open(&path, Start::Latest, 8).unwrap();
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(1024, 8).unwrap(),
        group: None,
    };
    let error = BusWriter::create(&options, 43, 0).err().unwrap();
    assert!(matches!(error, BusError::Locked { .. }), "{error}");
    assert!(error
        .to_string()
        .contains(&format!("pid {}", std::process::id())));
    drop(first);
    let _second = BusWriter::create(&options, 43, 0).unwrap();
    assert!(reader.replaced(), "the path names a new file");
    assert_eq!(
        BusReader::open(&path, Start::Latest, 8).unwrap().epoch(),
        43
    );
}

#[test]
fn files_that_are_not_a_bus_of_this_version_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let missing = BusReader::open(&dir.path().join("none.bus"), Start::Latest, 8)
        .err()
        .unwrap();
    assert!(matches!(missing, BusError::NotFound { .. }), "{missing}");
    assert!(missing.to_string().contains("no bus at"));
    let text = dir.path().join("text.bus");
    std::fs::write(&text, vec![b'x'; 8192]).unwrap();
    let error = BusReader::open(&text, Start::Latest, 8).err().unwrap();
    assert!(matches!(error, BusError::NotABus { .. }), "{error}");
    let _writer = writer(dir.path(), 1024);
    let mut bytes = std::fs::read(dir.path().join("test.bus")).unwrap();
    let short = dir.path().join("short.bus");
    std::fs::write(&short, &bytes[..8192]).unwrap();
    let error = BusReader::open(&short, Start::Latest, 8).err().unwrap();
    assert!(matches!(error, BusError::Malformed { .. }), "{error}");
    // A bus of layout version 1 (before the liquidation kind).
    assert_eq!(bytes[8], 2, "the writer writes layout version 2");
    bytes[8] = 1;
    let other = dir.path().join("v1.bus");
    std::fs::write(&other, &bytes).unwrap();
    let error = BusReader::open(&other, Start::Latest, 8).err().unwrap();
    assert!(
        matches!(
            error,
            BusError::LayoutVersion {
                found: 1,
                supported: 2,
                ..
            }
        ),
        "{error}"
    );
    assert!(error
        .to_string()
        .contains("version 1; this reader reads version 2"));
}

#[test]
fn a_file_truncated_under_a_reader_is_an_error_not_a_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path(), 1024);
    let path = dir.path().join("test.bus");
    let mut reader = BusReader::open(&path, Start::Oldest, 64).unwrap();
    for position in 0..10 {
        writer.write(&event(position));
    }
    writer.publish();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let mut out = vec![event(0); 64];
    let error = reader
        .read(&mut out)
        .expect_err("a truncated bus is an error");
    assert!(matches!(error, ReadError::Truncated { .. }), "{error}");
    assert!(error.to_string().contains("truncated"));
}

#[test]
fn the_writer_survives_its_file_being_truncated_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path(), 1024);
    let stats = writer.stats();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("test.bus"))
        .unwrap()
        .set_len(0)
        .unwrap();
    assert!(!stats.truncated());
    for position in 0..10 {
        writer.write(&event(position));
    }
    writer.publish();
    assert!(stats.truncated(), "the fault was repaired and marked");
    drop(writer);
}

#[test]
fn truncations_while_other_threads_map_and_unmap_repair_only_the_truncated_bus() {
    // The SIGBUS handler replaces a page only inside a mapping that is still registered: threads
    // that keep opening and dropping readers of a healthy bus, and mapping memory of their own
    // where those mappings were, must never see a page of theirs replaced by zeros, while the
    // main thread reads buses truncated under it.
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let steady_dir = dir.path().join("steady");
    std::fs::create_dir(&steady_dir).unwrap();
    let mut steady = writer(&steady_dir, 1024);
    for position in 0..100 {
        steady.write(&event(position));
    }
    steady.publish();
    let steady_path = steady_dir.join("test.bus");
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                let mut out = vec![event(0); 100];
                while !stop.load(Ordering::Relaxed) {
                    let mut reader = BusReader::open(&steady_path, Start::Oldest, 100).unwrap();
                    let batch = reader.read(&mut out).unwrap();
                    assert_eq!(batch.count, 100);
                    assert_eq!(out, (0..100).map(event).collect::<Vec<_>>());
                    drop(reader);
                    let len = 64 * 1024;
                    // SAFETY: a fresh private anonymous mapping, written and read only here,
                    // unmapped once.
                    unsafe {
                        let base = libc::mmap(
                            std::ptr::null_mut(),
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        assert_ne!(base, libc::MAP_FAILED);
                        let bytes = std::slice::from_raw_parts_mut(base.cast::<u8>(), len);
                        bytes.fill(0xA5);
                        std::thread::yield_now();
                        assert!(
                            bytes.iter().all(|&byte| byte == 0xA5),
                            "a page of an unrelated mapping was replaced"
                        );
                        libc::munmap(base, len);
                    }
                }
            });
        }
        for round in 0..40 {
            let round_dir = dir.path().join(format!("round-{round}"));
            std::fs::create_dir(&round_dir).unwrap();
            let mut writer = writer(&round_dir, 1024);
            let path = round_dir.join("test.bus");
            let mut reader = BusReader::open(&path, Start::Oldest, 64).unwrap();
            for position in 0..10 {
                writer.write(&event(position));
            }
            writer.publish();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
            let mut out = vec![event(0); 64];
            let error = reader.read(&mut out).expect_err("truncated");
            assert!(matches!(error, ReadError::Truncated { .. }), "{error}");
            drop(reader);
            // The writer's own stores into the cut file (the close) are repaired too.
            drop(writer);
        }
        stop.store(true, Ordering::Relaxed);
    });
}
