//! `[bridge]` in the appliance file: its keys are checked with file, line and column like every
//! other table, and with `in_appliance = true` `tickwire run` runs the bridge as a thread of its
//! own process, which answers directory requests on `tickwire.<name>.directory`.

use super::{nats_server_binary, NatsServer, PATIENCE};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tickwire::config;

#[test]
fn bridge_keys_are_checked_with_line_column_and_what_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tickwire.toml");
    std::fs::write(
        &path,
        "[threads]\n[bridge]\nname = \"ny4-a\"\n\
         nats_urls = [\"nats://10.0.0.5:4222\", \"http://x\"]\n\
         in_appliance = true\njetstream_stream = \"A.B\"\n",
    )
    .unwrap();
    let errors = config::load(&path).unwrap_err().0;
    let found: Vec<(&str, usize)> = errors
        .iter()
        .map(|error| (error.key.as_str(), error.line))
        .collect();
    assert_eq!(
        found,
        [
            ("bridge.nats_urls[1]", 4),
            ("bridge.in_appliance", 5),
            ("bridge.jetstream_stream", 6)
        ],
        "{errors:#?}"
    );
    assert!(
        errors[0].message.contains("nats://10.0.0.5:4222"),
        "{}",
        errors[0]
    );
    assert!(errors[1].message.contains("[bus]"), "{}", errors[1]);

    std::fs::write(
        &path,
        "[threads]\n[bus]\n[bridge]\nname = \"ny4-a\"\nnats_urls = [\"nats://10.0.0.5:4222\"]\n\
         in_appliance = true\n",
    )
    .unwrap();
    let loaded = config::load(&path).unwrap();
    let bridge = loaded.appliance.bridge.unwrap();
    assert_eq!(bridge.resolved_name(), "ny4-a");
    assert_eq!(bridge.queue_messages, 8192);
}

/// Sends directory requests over NATS's text protocol until the bridge answers; the reply.
fn ask_directory(port: u16, appliance: &str) -> Vec<u8> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("INFO"), "{line}");
    write!(
        writer,
        "CONNECT {{\"verbose\":false,\"pedantic\":false}}\r\nSUB _INBOX.test 1\r\n"
    )
    .unwrap();
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < PATIENCE,
            "the appliance's bridge never answered"
        );
        write!(
            writer,
            "PUB tickwire.{appliance}.directory _INBOX.test 0\r\n\r\n"
        )
        .unwrap();
        line.clear();
        match reader.read_line(&mut line) {
            Ok(_) if line.starts_with("MSG _INBOX.test") => {
                let length: usize = line.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
                let mut payload = vec![0u8; length + 2];
                reader.read_exact(&mut payload).unwrap();
                payload.truncate(length);
                return payload;
            }
            Ok(_) if line.starts_with("PING") => writer.write_all(b"PONG\r\n").unwrap(),
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[test]
fn run_with_in_appliance_bridge_serves_the_directory_over_nats() {
    let Some(binary) = nats_server_binary() else {
        return;
    };
    let server = NatsServer::start(&binary);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tickwire.toml");
    std::fs::write(
        &config,
        format!(
            "[threads.net]\nwait = \"park\"\n[threads.decoder]\nwait = \"park\"\n\
             [threads.strategy]\nwait = \"park\"\n[bus]\npath = {:?}\n\
             [bridge]\nname = \"cfg-app\"\nnats_urls = [{:?}]\nin_appliance = true\n",
            dir.path().join("tickwire.bus").display().to_string(),
            server.url()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tickwire"))
        .args(["run", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reply = ask_directory(server.port, "cfg-app");
    let reply = tickwire_nats::wire::decode_directory_reply(&reply).unwrap();
    // No venues: an empty directory, from the appliance's own bus (its epoch).
    assert_eq!((reply.total, reply.entries.len()), (0, 0));
    assert_ne!(reply.stream, 0);
    // SAFETY: kill(2) on the id of a child this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    assert!(log.contains("nats bridge stopped"), "{log}");
}
