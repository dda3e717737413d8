//! `[bus] group` under the shipped unit: the runtime directory systemd makes as
//! `systemd/tickwire.service` says (read from the file, not copied here) lets a reader in the
//! configured group, and only such a reader, read the bus and ask for snapshots, whatever the
//! service's own group is.
//!
//! As root, the test lays out what systemd would: a `/run` stand-in, and in it the unit's
//! `RuntimeDirectory=` owned by the unit's `User=`/`Group=` with its `RuntimeDirectoryMode=`.
//! The users and groups are stand-in ids (the host need not have a `tickwire` user): the
//! appliance runs as the service's user and group, in the bus group as a supplementary group (the
//! unit's `SupplementaryGroups=`), with the unit's `UMask=`; one reader is in the bus group and
//! not in the service's, another is in the service's group and not in the bus group.

use super::{binary_for_others, bus_dir, is_root, ChildRole, Credentials};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::process::Command;

/// The unit's `User=` and `Group=`.
const APPLIANCE_UID: u32 = 64801;
const SERVICE_GID: u32 = 64801;
/// `[bus] group`: another group than the service's.
const BUS_GID: u32 = 64802;
/// A consumer in the bus group.
const MEMBER_UID: u32 = 64803;
/// A user in the service's group but not in the bus group.
const OUTSIDER_UID: u32 = 64804;

/// The `[Service]` settings of the shipped unit (the last value of each key).
fn service_settings() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(crate::bus_clients::root().join("systemd/tickwire.service"))
        .expect("systemd/tickwire.service");
    let mut section = String::new();
    let mut settings = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        if section == "[Service]" {
            if let Some((key, value)) = line.split_once('=') {
                settings.insert(key.trim().to_owned(), value.trim().to_owned());
            }
        }
    }
    settings
}

fn octal(settings: &BTreeMap<String, String>, key: &str) -> u32 {
    let value = settings
        .get(key)
        .unwrap_or_else(|| panic!("the unit sets no {key}="));
    u32::from_str_radix(value, 8).unwrap_or_else(|_| panic!("{key}={value}: not octal"))
}

#[test]
fn a_reader_in_the_bus_group_reads_the_bus_in_the_units_runtime_directory_and_no_other_does() {
    if !is_root() {
        crate::support::skip::skipped(
            "the unit's runtime directory test runs the appliance and readers as other users, \
             which needs root",
        );
        return;
    }
    let unit = service_settings();
    let directory_mode = octal(&unit, "RuntimeDirectoryMode");
    let umask = octal(&unit, "UMask");
    let runtime_name = unit.get("RuntimeDirectory").expect("RuntimeDirectory=");
    assert!(unit.contains_key("User") && unit.contains_key("Group"));
    // /run, searchable by everyone.
    let run = bus_dir();
    std::fs::set_permissions(run.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = run.path().join(runtime_name);
    std::fs::create_dir(&runtime).unwrap();
    std::os::unix::fs::chown(&runtime, Some(APPLIANCE_UID), Some(SERVICE_GID)).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(directory_mode)).unwrap();
    let bus = runtime.join("tickwire.bus");
    let binary = binary_for_others(run.path());

    let appliance = Credentials {
        uid: APPLIANCE_UID,
        gid: SERVICE_GID,
        groups: vec![BUS_GID],
        umask,
    };
    let writer = ChildRole::spawn_as(
        &format!(
            "writer path={} count=1000 group={BUS_GID} socket=1",
            bus.display()
        ),
        &binary,
        &appliance,
    );
    writer.expect("created");
    assert_eq!(writer.expect("written"), "written 1000");
    // The files as `[bus] group` says, whatever the unit's umask.
    let file = std::fs::metadata(&bus).unwrap();
    assert_eq!(
        (file.uid(), file.gid(), file.mode() & 0o7777),
        (APPLIANCE_UID, BUS_GID, 0o640)
    );
    let socket = std::fs::symlink_metadata(tickwire_bus::request_socket_path(&bus)).unwrap();
    assert!(socket.file_type().is_socket());
    assert_eq!(
        (socket.uid(), socket.gid(), socket.mode() & 0o7777),
        (APPLIANCE_UID, BUS_GID, 0o660)
    );

    // Not in the bus group (in the service's): can reach the directory, not read the bus nor
    // ask for snapshots.
    let outsider = ChildRole::spawn_as(
        &format!("denied-reader path={}", bus.display()),
        &binary,
        &Credentials {
            uid: OUTSIDER_UID,
            gid: OUTSIDER_UID,
            groups: vec![SERVICE_GID],
            umask: 0o022,
        },
    );
    let attach = outsider.expect("attach");
    assert!(
        attach.contains(&format!("bus {}: permission denied", bus.display())),
        "{attach}"
    );
    let request = outsider.expect("request");
    assert!(request.contains("Permission denied"), "{request}");
    assert!(outsider.finish().success());

    let member = Credentials {
        uid: MEMBER_UID,
        gid: MEMBER_UID,
        groups: vec![BUS_GID],
        umask: 0o022,
    };
    // The C reader too, as the member.
    if crate::bus_clients::cc_available() {
        let dump = crate::bus_clients::build_c(
            &crate::bus_clients::root().join("tests/bus_clients/dump.c"),
            run.path(),
        );
        std::fs::set_permissions(&dump, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = Command::new(&dump);
        command.arg(&bus).current_dir("/");
        member.apply(&mut command);
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "dump.c as a member of the bus group: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout
                .lines()
                .filter(|line| line.contains(" trade "))
                .count(),
            1000,
            "{stdout}"
        );
    }
    // In the bus group: reads every event and asks for a snapshot.
    let reader = ChildRole::spawn_as(
        &format!("reader path={} count=1000 request=1", bus.display()),
        &binary,
        &member,
    );
    reader.expect("attached");
    reader.expect("progress");
    assert_eq!(reader.expect("read"), "read events=1000 missed=0");
    reader.expect("requested");
    assert!(reader.finish().success());
    assert_eq!(writer.expect("request"), "request 1 1");
    assert!(writer.finish().success());
}
