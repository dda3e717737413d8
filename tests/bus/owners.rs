//! Whose files: another local user who makes one of the bus's names first (in a folder like
//! `/dev/shm`, which every user may write) neither stops the appliance silently, nor leads it
//! through a symbolic link, nor feeds readers a forged bus. The second user is real: uid 65534
//! (`nobody`), as a shell or as this binary's writer role, so these tests need root (as in CI)
//! and skip with a printed reason without it.

use super::{binary_for_others, bus_dir, is_root, ChildRole, Credentials};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use tickwire_bus::{
    bind_request_socket, BusError, BusOptions, BusReader, BusWriter, Geometry, Owner, Start,
};
use tickwire_client::{Client, ClientError};

/// The second user.
const NOBODY: u32 = 65534;

fn skipped(test: &str) -> bool {
    if is_root() {
        return false;
    }
    crate::support::skip::skipped(format_args!(
        "{test} acts as a second user (uid {NOBODY}), which needs root"
    ));
    true
}

/// A folder like `/dev/shm`: every user may make files in it, only a file's owner remove it.
fn shared_dir() -> tempfile::TempDir {
    let dir = bus_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// Runs `script` with `/bin/sh` in `dir` as the second user.
fn as_nobody(dir: &Path, script: &str) {
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .status()
        .unwrap();
    assert!(status.success(), "as uid {NOBODY}: {script}");
}

fn options(path: &Path) -> BusOptions {
    BusOptions {
        path: path.to_owned(),
        geometry: Geometry::new(1024, 4).unwrap(),
        group: None,
    }
}

/// The appliance's start: the bus, then its request socket. A lock still held is waited out
/// (bounded): a start that failed after taking it released it, but a child another test forked
/// meanwhile holds the lock's descriptor until it runs its program.
fn start(path: &Path) -> Result<(BusWriter, UnixDatagram), BusError> {
    let deadline = std::time::Instant::now() + super::PATIENCE;
    loop {
        let started = BusWriter::create(&options(path), 1, 0)
            .and_then(|writer| Ok((writer, bind_request_socket(path, None)?)));
        match started {
            Err(BusError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            started => return started,
        }
    }
}

/// The error names the file and its owner.
fn assert_foreign(error: &BusError, file: &Path) {
    assert!(
        matches!(error, BusError::ForeignFile { uid: NOBODY, path, .. } if path == file),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("{} (", file.display()))
            && message.contains(&format!("uid {NOBODY})"))
            && message.contains("another user made it"),
        "{message}"
    );
}

/// Each name the appliance makes beside the bus, and what the second user plants there.
const NAMES: [&str; 5] = ["bus.lock", "bus.tmp", "bus", "bus.requests", "bus.rqd"];

#[test]
fn another_users_file_at_any_of_the_buss_names_is_refused_naming_its_owner() {
    if skipped("another_users_file_at_any_of_the_buss_names_is_refused_naming_its_owner") {
        return;
    }
    for name in NAMES {
        let dir = shared_dir();
        let path = dir.path().join("bus");
        let planted = dir.path().join(name);
        if name.ends_with(".rqd") {
            as_nobody(dir.path(), &format!("mkdir {name}"));
        } else {
            as_nobody(dir.path(), &format!("echo forged > {name}"));
        }
        let error = start(&path).err().expect("refused");
        assert_foreign(&error, &planted);
        // Left as it was: the appliance does not take over another user's file.
        assert_eq!(std::fs::symlink_metadata(&planted).unwrap().uid(), NOBODY);
        assert!(!dir.path().join("bus.tmp").exists() || name == "bus.tmp");
        // Once it is gone, the appliance starts.
        let _ = std::fs::remove_file(&planted);
        let _ = std::fs::remove_dir(&planted);
        let (_writer, _socket) = start(&path).expect("starts once the file is gone");
    }
}

#[test]
fn symbolic_links_at_the_buss_names_are_never_followed() {
    if skipped("symbolic_links_at_the_buss_names_are_never_followed") {
        return;
    }
    let dir = shared_dir();
    let path = dir.path().join("bus");
    // A file of the appliance's user that a followed link would change: its mode (chmod 0660 of
    // the socket), its contents (the pid written to the lock), its size (the bus sized).
    let canary = dir.path().join("canary");
    std::fs::write(&canary, "canary").unwrap();
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o600)).unwrap();
    let unchanged = || {
        let metadata = std::fs::metadata(&canary).unwrap();
        assert_eq!(metadata.mode() & 0o7777, 0o600, "the canary's mode changed");
        assert_eq!(std::fs::read_to_string(&canary).unwrap(), "canary");
    };
    for name in NAMES {
        let link = dir.path().join(name);
        as_nobody(dir.path(), &format!("ln -s canary {name}"));
        let error = start(&path).err().expect("refused");
        assert_foreign(&error, &link);
        unchanged();
        std::fs::remove_file(&link).unwrap();
    }
    // The appliance's own links (an earlier run as its user cannot have made them, but whoever
    // did): removed, not followed.
    for name in NAMES {
        let at = dir.path().join(name);
        let _ = std::fs::remove_file(&at);
        let _ = std::fs::remove_dir_all(&at);
        std::os::unix::fs::symlink("canary", at).unwrap();
    }
    let (_writer, _socket) = start(&path).expect("starts");
    unchanged();
    let lock = std::fs::symlink_metadata(dir.path().join("bus.lock")).unwrap();
    assert!(lock.is_file(), "a lock file of its own");
    let socket = std::fs::symlink_metadata(dir.path().join("bus.requests")).unwrap();
    assert!(socket.file_type().is_socket());
    assert_eq!(socket.mode() & 0o777, 0o660);
    assert!(!dir.path().join("bus.rqd").exists());
    BusReader::open(&path, Start::Oldest, 8).expect("a bus at the path");
}

#[test]
fn an_earlier_runs_files_of_the_appliances_user_are_replaced() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    std::fs::write(dir.path().join("bus.tmp"), "half a bus").unwrap();
    std::fs::write(dir.path().join("bus"), "an old bus").unwrap();
    drop(UnixDatagram::bind(dir.path().join("bus.requests")).unwrap());
    std::fs::create_dir(dir.path().join("bus.rqd")).unwrap();
    std::fs::write(dir.path().join("bus.rqd/s"), "").unwrap();
    // A second name for another file of the appliance's: writing the pid into the lock must not
    // cut it.
    let precious = dir.path().join("precious");
    std::fs::write(&precious, "precious").unwrap();
    std::fs::hard_link(&precious, dir.path().join("bus.lock")).unwrap();
    let (_writer, socket) = start(&path).expect("an earlier run's files are replaced");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("bus.lock")).unwrap(),
        format!("{}\n", std::process::id())
    );
    assert!(!dir.path().join("bus.tmp").exists());
    assert!(!dir.path().join("bus.rqd").exists());
    let reader = BusReader::open(&path, Start::Oldest, 8).expect("the new bus");
    assert_eq!(reader.epoch(), 1);
    // The new socket takes requests.
    let client = UnixDatagram::unbound().unwrap();
    client
        .send_to(b"0123456789abcdef", dir.path().join("bus.requests"))
        .unwrap();
    let mut buffer = [0u8; 16];
    assert_eq!(socket.recv(&mut buffer).unwrap(), 16);
}

#[test]
fn a_directory_anyone_may_write_without_the_sticky_bit_is_refused() {
    let dir = bus_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = BusWriter::create(&options(&dir.path().join("bus")), 1, 0)
        .err()
        .expect("refused");
    assert!(
        matches!(error, BusError::UnsafeDirectory { mode: 0o777, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("no sticky bit"), "{error}");
}

#[test]
fn a_fifo_at_the_bus_path_is_refused_without_hanging_the_reader() {
    let dir = bus_dir();
    let path = dir.path().join("bus");
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let error = BusReader::open(&path, Start::Oldest, 8)
        .err()
        .expect("refused");
    assert!(
        matches!(error, BusError::NotAFile { kind: "a FIFO", .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("it is a FIFO, not a regular file"),
        "{error}"
    );
}

#[test]
fn a_bus_another_user_made_is_refused_by_the_reader_unless_named_as_its_owner() {
    if skipped("a_bus_another_user_made_is_refused_by_the_reader_unless_named_as_its_owner") {
        return;
    }
    let dir = shared_dir();
    let binary = binary_for_others(dir.path());
    let nobody = Credentials {
        uid: NOBODY,
        gid: NOBODY,
        groups: vec![],
        umask: 0o022,
    };
    // The second user makes a bus at the appliance's path first: a real one, through BusWriter.
    let forged = dir.path().join("tickwire.bus");
    let writer = ChildRole::spawn_as(
        &format!("writer path={} count=10 marker=66", forged.display()),
        &binary,
        &nobody,
    );
    assert!(writer.finish().success());
    assert_eq!(std::fs::metadata(&forged).unwrap().uid(), NOBODY);
    // The shared folder is root's, and any user may write in it: only root's, the reader's own
    // and the named owner's files are read.
    let error = BusReader::open(&forged, Start::Oldest, 8)
        .err()
        .expect("refused");
    assert!(
        matches!(error, BusError::Untrusted { uid: NOBODY, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "bus {} belongs to {}",
            forged.display(),
            tickwire_bus::describe_user(NOBODY)
        )) && message.contains("does not trust")
            && message.contains("forged feed"),
        "{message}"
    );
    let error = Client::attach(&forged).err().expect("refused");
    assert!(
        matches!(error, ClientError::Bus(BusError::Untrusted { .. })),
        "{error:?}"
    );
    // Named as the owner, it is read.
    let owner = Owner::Uid(tickwire_bus::user_id(&NOBODY.to_string()).unwrap());
    let mut client = Client::options()
        .start(Start::Oldest)
        .owner(owner)
        .attach(&forged)
        .expect("the named owner's bus");
    let seen = super::read_until(&mut client, |seen| seen.len() >= 10);
    assert_eq!(seen, super::run(66, 0, 10));
    // Another owner named: refused, saying whom it expected.
    let error = BusReader::open_owned(&forged, Start::Oldest, 8, Owner::Uid(0))
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("uid 0) only, as asked"),
        "{error}"
    );

    // A directory of the second user's that no one else may write: its owner's buses are
    // trusted (as /run/tickwire's owner, the appliance's user, is under systemd)...
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let in_home = home.join("tickwire.bus");
    let writer = ChildRole::spawn_as(
        &format!("writer path={} count=10", in_home.display()),
        &binary,
        &nobody,
    );
    assert!(writer.finish().success());
    BusReader::open(&in_home, Start::Oldest, 8).expect("the directory's owner's bus");
    // ... but not when others may write there too.
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o775)).unwrap();
    let error = BusReader::open(&in_home, Start::Oldest, 8)
        .err()
        .expect("refused");
    assert!(matches!(error, BusError::Untrusted { .. }), "{error:?}");
}

#[test]
fn tail_refuses_a_bus_another_user_made_unless_given_its_owner() {
    if skipped("tail_refuses_a_bus_another_user_made_unless_given_its_owner") {
        return;
    }
    let dir = shared_dir();
    let binary = binary_for_others(dir.path());
    let forged = dir.path().join("tickwire.bus");
    let writer = ChildRole::spawn_as(
        &format!("writer path={} count=3 marker=66", forged.display()),
        &binary,
        &Credentials {
            uid: NOBODY,
            gid: NOBODY,
            groups: vec![],
            umask: 0o022,
        },
    );
    assert!(writer.finish().success());
    let tail = |owner: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tickwire"));
        command
            .args(["tail", "--from", "oldest", "--bus"])
            .arg(&forged);
        if let Some(owner) = owner {
            command.args(["--bus-owner", owner]);
        }
        // The bus is closed: tail prints its events, then `closed`, and waits; end it then
        // (a refused bus ends it at once).
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap())) {
            let line = line.unwrap();
            let closed = line.contains("\"closed\"");
            lines.push(line);
            if closed {
                // SAFETY: kill takes no memory; the pid is our child's, not reaped yet.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
                }
                break;
            }
        }
        let output = child.wait_with_output().unwrap();
        (
            output.status,
            lines,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (status, _, stderr) = tail(None);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("bus {} belongs to", forged.display()))
            && stderr.contains(&format!("uid {NOBODY})"))
            && stderr.contains("(here: --bus-owner USER)"),
        "{stderr}"
    );
    let (status, lines, stderr) = tail(Some(&NOBODY.to_string()));
    assert!(status.success(), "{stderr}");
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.contains("\"trade\""))
            .count(),
        3,
        "{lines:?}"
    );
    let (status, _, stderr) = tail(Some("no-such-user-here"));
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--bus-owner: no user"), "{stderr}");
}
