//! `tickwire bench e2e` as a user runs it, cut down to what a test may take: two clients
//! (tickwire blocking on io_uring or epoll, and the tcp-floor, which the harness builds with
//! cargo) at 1000 messages per second for a second, twice (`--repeat 2`), tickwire in the tuned
//! layout (`--housekeeping-core`) where the host has two cores. Checks what the run must
//! produce, never its timings: every message each client was sent reached it, in both runs;
//! the hot thread of each was found and read; and the table, the spread of the runs, the JSON,
//! the Markdown report and the plot are written. The output directory is relative to the working
//! directory, as with the default `target/bench-e2e` (the configs the run writes there name
//! files beside them, which must resolve from wherever the run starts).

use std::process::Command;

#[test]
fn bench_e2e_quick_writes_the_table_json_report_and_plot() {
    let cwd = tempfile::tempdir().unwrap();
    let out = cwd.path().join("bench-out");
    let two_cores = std::thread::available_parallelism().map_or(1, usize::from) >= 2;
    let mut command = Command::new(env!("CARGO_BIN_EXE_tickwire"));
    command.args(["bench", "e2e"]);
    if two_cores {
        command.args([
            "--sim-core",
            "0",
            "--client-core",
            "1",
            "--housekeeping-core",
            "0",
        ]);
    } else {
        eprintln!("one core: the run without --housekeeping-core");
    }
    let output = command
        .current_dir(cwd.path())
        .args([
            "--quick",
            "--rate",
            "1000",
            "--duration",
            "1",
            "--symbols",
            "3",
            "--clients",
            "tickwire-uring-block,tcp-floor",
            "--out",
            "bench-out",
            "--repeat",
            "2",
        ])
        .output()
        .expect("tickwire runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for client in ["tickwire-uring-block", "tcp-floor"] {
        assert!(
            stdout
                .lines()
                .any(|line| line.trim_start().starts_with(client)),
            "no row for {client}:\n{stdout}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("e2e.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(2), "{json}");
    for (index, run) in json["runs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(run["rate"], 1000.0);
        assert_eq!(run["run"].as_u64(), Some(index as u64 + 1));
        for client in ["tickwire-uring-block", "tcp-floor"] {
            let result = &run["clients"][client];
            let sent = result["sent"].as_u64().expect("sent");
            assert_eq!(sent, 1000, "{client}: {result}");
            assert_eq!(
                result["received"].as_u64(),
                Some(sent),
                "{client}: {result}"
            );
            assert_eq!(result["lost"].as_u64(), Some(0), "{client}: {result}");
            assert!(result["p50_ns"].as_u64().unwrap() > 0, "{client}: {result}");
            assert!(result["rss_kb"].as_u64().unwrap() > 0, "{client}: {result}");
            assert!(
                result["per_message"]["task_clock_ns"].is_number()
                    || result["per_message"]["task_clock_ns"].is_string()
            );
            let hot = &result["hot_thread"];
            let expected_thread = if client == "tcp-floor" {
                "tw-peer-tcp-flo"
            } else {
                "tw-net"
            };
            assert_eq!(hot["thread"], expected_thread, "{client}: {result}");
            assert!(hot["voluntary_switches"].is_u64(), "{client}: {result}");
        }
    }
    assert!(stdout.contains("Repeated runs"), "{stdout}");
    let report = std::fs::read_to_string(out.join("e2e.md")).unwrap();
    assert!(report.contains("| tcp-floor |"), "{report}");
    assert!(report.contains("Repeated runs"), "{report}");
    assert!(
        report.contains("- tcp-floor at 1000 (run 2): tw-peer-tcp-flo on core"),
        "{report}"
    );
    let plot = std::fs::read_to_string(out.join("e2e-1000.svg")).unwrap();
    assert_eq!(
        plot.matches("<polyline").count(),
        4,
        "one curve per client and run"
    );
}
