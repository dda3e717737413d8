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
    // A bus of layout version 2 (one ring, before partitions), as an appliance of then made it.
    assert_eq!(bytes[8], 3, "the writer writes layout version 3");
    bytes[8] = 2;
    let other = dir.path().join("v2.bus");
    std::fs::write(&other, &bytes).unwrap();
    let error = BusReader::open(&other, Start::Latest, 8).err().unwrap();
    assert!(
        matches!(
            error,
            BusError::LayoutVersion {
                found: 2,
                supported: 3,
                ..
            }
        ),
        "{error}"
    );
    assert!(error
        .to_string()
        .contains("version 2; this reader reads version 3"));
    // A partition count the header page cannot hold, or none.
    for partitions in [0u8, 32] {
        let mut bad = std::fs::read(dir.path().join("test.bus")).unwrap();
        assert_eq!(bad[80], 1, "one partition");
        bad[80] = partitions;
        let path = dir.path().join("partitions.bus");
        std::fs::write(&path, &bad).unwrap();
        let error = BusReader::open(&path, Start::Latest, 8).err().unwrap();
        assert!(matches!(error, BusError::Malformed { .. }), "{error}");
        assert!(error.to_string().contains("partitions"), "{error}");
    }
}

fn partitioned(dir: &std::path::Path, capacity: u64, partitions: u32) -> Vec<BusWriter> {
    let options = BusOptions {
        path: dir.join("test.bus"),
        geometry: Geometry::new(capacity, 8)
            .unwrap()
            .with_partitions(partitions)
            .unwrap(),
        group: None,
    };
    assert!(
        matches!(
            BusWriter::create(&options, 1, 0),
            Err(BusError::Geometry(_))
        ),
        "one writer for several partitions is refused"
    );
    BusWriter::create_partitioned(&options, 42, 1_000).expect("the bus is made")
}

/// Partition `k`'s `n`th event: instrument `k`, sequence `n`.
fn event_of(k: u32, n: u64) -> Event {
    let mut event = event(n);
    event.header.instrument_id = k;
    event
}

#[test]
fn partitions_written_by_their_own_threads_are_read_as_one_ordered_stream() {
    let dir = tempfile::tempdir().unwrap();
    let writers = partitioned(dir.path(), 1 << 16, 3);
    let path = dir.path().join("test.bus");
    let mut reader = BusReader::open(&path, Start::Oldest, 64).unwrap();
    assert_eq!(reader.partitions(), 3);
    let per_partition = [20_000u64, 5_000, 12_345];
    let threads: Vec<_> = writers
        .into_iter()
        .map(|mut writer| {
            let k = writer.partition();
            let total = per_partition[k as usize];
            std::thread::spawn(move || {
                for n in 0..total {
                    writer.write(&event_of(k, n));
                    if n % 7 == 0 {
                        writer.publish();
                    }
                }
                writer.publish();
                // Dropped here: the last writer's drop closes the bus.
            })
        })
        .collect();
    let mut next = [0u64; 3];
    let mut out = vec![event(0); 64];
    let total: u64 = per_partition.iter().sum();
    let mut seen = 0u64;
    let mut partitions_seen = [false; 3];
    while seen < total {
        let batch = reader.read(&mut out).unwrap();
        assert_eq!(batch.missed, 0, "a ring of 65536 holds every event");
        for event in &out[..batch.count] {
            let k = event.header.instrument_id as usize;
            assert_eq!(k, batch.partition as usize, "a batch is one partition's");
            assert_eq!(event.header.venue_seq, next[k], "partition {k} in order");
            next[k] += 1;
            partitions_seen[k] = true;
        }
        seen += batch.count as u64;
        if batch.count == 0 {
            std::thread::yield_now();
        }
    }
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(next, per_partition, "every event exactly once");
    assert_eq!(reader.read(&mut out).unwrap(), Default::default());
    assert_eq!(reader.positions(), per_partition.to_vec());
    assert_eq!(reader.cursor(), total);
    assert!(reader.is_closed(), "the last writer's drop closed the bus");
}

#[test]
fn an_overrun_on_one_partition_is_counted_exactly_and_the_others_read_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut writers = partitioned(dir.path(), 1024, 2);
    let stats = writers[0].stats();
    assert_eq!(stats.partitions(), 2);
    let path = dir.path().join("test.bus");
    let mut reader = BusReader::open(&path, Start::Oldest, 256).unwrap();
    // Partition 1 laps the reader (5000 events in a ring of 1024); partition 0 writes 100.
    for n in 0..5000 {
        writers[1].write(&event_of(1, n));
    }
    writers[1].publish();
    for n in 0..100 {
        writers[0].write(&event_of(0, n));
    }
    writers[0].publish();
    assert_eq!(stats.cursor(), 5100);
    assert_eq!(stats.partition_cursor(1), 5000);
    let mut out = vec![event(0); 256];
    let (mut missed, mut read) = ([0u64; 2], [Vec::new(), Vec::new()]);
    loop {
        let batch = reader.read(&mut out).unwrap();
        if batch == Default::default() {
            break;
        }
        missed[batch.partition as usize] += batch.missed;
        read[batch.partition as usize]
            .extend(out[..batch.count].iter().map(|e| e.header.venue_seq));
    }
    assert_eq!(missed[0], 0, "partition 0 was not lapped");
    assert_eq!(read[0], (0..100).collect::<Vec<_>>(), "partition 0 whole");
    // Exact: what partition 1 lost and what it kept are all of its 5000, without a hole.
    assert_eq!(missed[1] + read[1].len() as u64, 5000);
    assert!(missed[1] >= 5000 - 1024, "{}", missed[1]);
    assert_eq!(read[1], (missed[1]..5000).collect::<Vec<_>>());
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
