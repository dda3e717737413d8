//! Faults across processes: none of them may disturb the writer or another reader, and each
//! ends in exactly the state the client documents.

use super::{bus_dir, read_until, run, ChildRole, Seen};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;
use tickwire_bus::{BusError, BusOptions, BusWriter, Geometry};
use tickwire_client::{Client, ClientError, Next, Start};

#[test]
fn a_killed_reader_leaves_the_writer_and_the_other_readers_whole() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let go = dir.path().join("go");
    let writer = ChildRole::spawn(&format!(
        "writer path={} count=50000 capacity=65536 go={}",
        path.display(),
        go.display()
    ));
    writer.expect("created");
    // One reader that never finishes (it wants more than is written): killed mid-read.
    let doomed = ChildRole::spawn(&format!("reader path={} count=1000000000", path.display()));
    let survivor = ChildRole::spawn(&format!("reader path={} count=50000", path.display()));
    doomed.expect("attached");
    survivor.expect("attached");
    let mut local = Client::options()
        .start(Start::Oldest)
        .attach(&path)
        .unwrap();
    std::fs::write(&go, b"").unwrap();
    doomed.expect("progress");
    let mut doomed = doomed;
    doomed.child.kill().unwrap();
    assert_eq!(doomed.finish().signal(), Some(libc::SIGKILL));
    survivor.expect("progress");
    assert_eq!(survivor.expect("read"), "read events=50000 missed=0");
    assert!(survivor.finish().success());
    assert_eq!(writer.expect("written"), "written 50000");
    assert!(writer.finish().success());
    let seen = read_until(&mut local, |seen| seen.len() >= 50_001);
    assert_eq!(&seen[..50_000], &run(1, 0, 50_000)[..]);
    assert_eq!(seen[50_000], Seen::Closed);
}

#[test]
fn a_reader_that_never_reads_is_lapped_and_told_exactly_what_it_missed() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let go = dir.path().join("go");
    let writer = ChildRole::spawn(&format!(
        "writer path={} count=10000 capacity=1024 go={}",
        path.display(),
        go.display()
    ));
    writer.expect("created");
    let mut client = Client::options()
        .start(Start::Oldest)
        .attach(&path)
        .unwrap();
    assert_eq!(client.counters().events_read, 0);
    std::fs::write(&go, b"").unwrap();
    writer.expect("written");
    assert!(writer.finish().success());
    let Next::Overrun { missed, .. } = client.poll().unwrap() else {
        panic!("a lapped reader's first poll reports the overrun");
    };
    // At least the events beyond a ring, at most a claim (capacity / 16) more: the writer
    // claims slots ahead of writing them.
    assert!(
        (10_000 - 1024..=10_000 - 1024 + 64).contains(&missed),
        "{missed}"
    );
    let seen = read_until(&mut client, |seen| seen.last() == Some(&Seen::Closed));
    let events = seen.len() as u64 - 1;
    // The positions skipped are exactly the ones counted missed, and nothing else is lost.
    assert_eq!(
        &seen[..events as usize],
        &run(1, missed, 10_000 - missed)[..]
    );
    assert_eq!(events + missed, 10_000);
    let counters = client.counters();
    assert_eq!((counters.overruns, counters.missed), (1, missed));
    assert_eq!(counters.events_read + counters.missed, 10_000);
}

#[test]
fn a_hundred_readers_in_four_processes_each_read_every_event() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let go = dir.path().join("go");
    let writer = ChildRole::spawn(&format!(
        "writer path={} count=20000 capacity=32768 go={}",
        path.display(),
        go.display()
    ));
    writer.expect("created");
    let readers: Vec<ChildRole> = (0..4)
        .map(|_| {
            ChildRole::spawn(&format!(
                "reader path={} threads=25 count=20000",
                path.display()
            ))
        })
        .collect();
    for reader in &readers {
        assert_eq!(reader.expect("attached"), "attached 25");
    }
    std::fs::write(&go, b"").unwrap();
    for reader in readers {
        reader.expect("progress");
        for _ in 0..25 {
            assert_eq!(reader.expect("read"), "read events=20000 missed=0");
        }
        assert!(reader.finish().success());
    }
    assert_eq!(writer.expect("written"), "written 20000");
    assert!(writer.finish().success());
}

#[test]
fn a_reader_started_before_the_writer_waits_for_it_or_says_there_is_no_bus() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let error = Client::attach(&path).err().unwrap();
    assert!(
        matches!(error, ClientError::Bus(BusError::NotFound { .. })),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("no bus at {}", path.display())),
        "{error}"
    );
    let waiting = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut client = Client::options()
                .start(Start::Oldest)
                .attach_wait(&path, super::PATIENCE)
                .unwrap();
            read_until(&mut client, |seen| seen.len() >= 1001)
        })
    };
    // Not a timing assertion: the reader is very likely waiting by now, and the test holds
    // either way.
    std::thread::sleep(Duration::from_millis(100));
    let writer = ChildRole::spawn(&format!("writer path={} count=1000", path.display()));
    assert!(writer.finish().success());
    let seen = waiting.join().unwrap();
    assert_eq!(&seen[..1000], &run(1, 0, 1000)[..]);
    assert_eq!(seen[1000], Seen::Closed);
}

#[test]
fn a_bus_of_another_layout_version_is_refused_naming_both_versions() {
    // A bus an appliance of layout version 2 wrote (one ring, before partitions): this reader
    // reads version 3.
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let options = BusOptions {
        path: path.clone(),
        geometry: Geometry::new(1024, 4).unwrap(),
        group: None,
    };
    drop(BusWriter::create(&options, 1, 0).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        bytes[8..12],
        3u32.to_le_bytes(),
        "the writer writes version 3"
    );
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let other = dir.path().join("bus-v2");
    std::fs::write(&other, &bytes).unwrap();
    let error = Client::attach(&other).err().unwrap();
    assert!(
        matches!(
            error,
            ClientError::Bus(BusError::LayoutVersion {
                found: 2,
                supported: 3,
                ..
            })
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("layout version 2"), "{message}");
    assert!(message.contains("reads version 3"), "{message}");
    // attach_wait does not wait out an error other than a missing bus.
    assert!(matches!(
        Client::attach_wait(&other, super::PATIENCE),
        Err(ClientError::Bus(BusError::LayoutVersion { .. }))
    ));
}

#[test]
fn a_restarted_writer_is_a_new_epoch_with_no_stale_data() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let first = ChildRole::spawn(&format!(
        "writer path={} epoch=11 marker=1 count=1000",
        path.display()
    ));
    first.expect("created");
    let mut client = Client::options()
        .start(Start::Oldest)
        .attach(&path)
        .unwrap();
    assert!(first.finish().success());
    let mut seen = read_until(&mut client, |seen| seen.last() == Some(&Seen::Closed));
    // The second writer is killed (no clean stop, so no `closed`) after its events.
    let second = ChildRole::spawn(&format!(
        "writer path={} epoch=22 marker=2 count=500 hold=1",
        path.display()
    ));
    second.expect("created");
    second.expect("written");
    seen.extend(read_until(&mut client, |seen| seen.len() >= 501));
    let mut second = second;
    second.child.kill().unwrap();
    assert_eq!(second.finish().signal(), Some(libc::SIGKILL));
    let third = ChildRole::spawn(&format!(
        "writer path={} epoch=33 marker=3 count=300",
        path.display()
    ));
    assert!(third.finish().success());
    seen.extend(read_until(&mut client, |seen| {
        seen.last() == Some(&Seen::Closed)
    }));
    let mut expected = run(1, 0, 1000);
    expected.push(Seen::Closed);
    expected.push(Seen::Epoch(22));
    expected.extend(run(2, 0, 500));
    expected.push(Seen::Epoch(33));
    expected.extend(run(3, 0, 300));
    expected.push(Seen::Closed);
    assert_eq!(seen, expected);
    assert_eq!(client.counters().epochs, 2);
    assert_eq!(client.epoch(), 33);
    assert_eq!(client.directory().get(1, 3).unwrap().symbol, "SYM3");
    assert!(
        client.directory().get(1, 1).is_none(),
        "the old epoch's directory is gone"
    );
}

#[test]
fn a_deleted_bus_keeps_its_mapping_until_a_new_writer_comes() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let go2 = dir.path().join("go2");
    let first = ChildRole::spawn(&format!(
        "writer path={} marker=1 count=100 more=100 go2={}",
        path.display(),
        go2.display()
    ));
    first.expect("created");
    let mut client = Client::options()
        .start(Start::Oldest)
        .attach(&path)
        .unwrap();
    first.expect("written 100");
    let mut seen = read_until(&mut client, |seen| seen.len() >= 100);
    std::fs::remove_file(&path).unwrap();
    seen.extend(read_until(&mut client, |seen| !seen.is_empty()));
    // The writer goes on into the unlinked file, and the reader still gets its events.
    std::fs::write(&go2, b"").unwrap();
    first.expect("written 200");
    assert!(first.finish().success());
    seen.extend(read_until(&mut client, |seen| seen.len() >= 100));
    let second = ChildRole::spawn(&format!(
        "writer path={} epoch=2 marker=2 count=50",
        path.display()
    ));
    assert!(second.finish().success());
    seen.extend(read_until(&mut client, |seen| {
        seen.last() == Some(&Seen::Closed)
    }));
    let mut expected = run(1, 0, 100);
    expected.push(Seen::Removed);
    expected.extend(run(1, 100, 100));
    expected.push(Seen::Epoch(2));
    expected.extend(run(2, 0, 50));
    expected.push(Seen::Closed);
    assert_eq!(seen, expected);
}

#[test]
fn a_truncated_bus_is_an_error_in_the_reader_never_a_sigbus() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let go = dir.path().join("go");
    let writer = ChildRole::spawn(&format!("writer path={} count=100", path.display()));
    assert!(writer.finish().success());
    let reader = ChildRole::spawn(&format!(
        "truncated-reader path={} count=100 go={}",
        path.display(),
        go.display()
    ));
    reader.expect("ready");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::fs::write(&go, b"").unwrap();
    let error = reader.expect("error");
    assert!(error.contains("was truncated under this reader"), "{error}");
    let status = reader.finish();
    assert!(
        status.success(),
        "the reader died ({status:?}; signal {:?}: 7 is SIGBUS)",
        status.signal()
    );
}

#[test]
fn a_sigbus_that_is_not_the_buss_still_kills_the_reader() {
    // The bus's SIGBUS handler repairs faults in bus mappings only: a truncated mapping of the
    // program's own kills it, as it would have without the handler.
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let writer = ChildRole::spawn(&format!("writer path={} count=10", path.display()));
    assert!(writer.finish().success());
    let role = ChildRole::spawn(&format!(
        "stray-sigbus path={} kind=mapping file={}",
        path.display(),
        dir.path().join("own").display()
    ));
    role.expect("armed");
    let status = role.finish();
    assert_eq!(
        status.signal(),
        Some(libc::SIGBUS),
        "the process should have died of SIGBUS: {status:?}"
    );
}
