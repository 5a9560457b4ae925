//! Every case can fail: with a deliberate fault switched on in the Rust
//! testee (`HUBWIRE_TESTEE_FAULT`), the cases meant to catch it fail, and
//! the same cases pass without it. Also: a known-failing entry turns a
//! failure into an expected one, and an entry for a case that passes fails
//! the run. Runs in-process over the memory transport, so it needs no
//! testee binary.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Runs the suite on the cases matching `glob`; returns (exit code, output).
fn run(glob: &str, fault: Option<&str>, known_failing: Option<&Path>) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hubwire-conformance"));
    cmd.args(["--lang", "rust", "--testee", "in-process", "--transports", "memory", "--wait", "2", "--cases", glob]);
    cmd.arg("--root").arg(root());
    if let Some(dir) = known_failing {
        cmd.arg("--known-failing").arg(dir);
    }
    cmd.env_remove("HUBWIRE_TESTEE_FAULT");
    if let Some(f) = fault {
        cmd.env("HUBWIRE_TESTEE_FAULT", f);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// (fault, a case glob, role, the case that must fail)
const FAULTS: &[(&str, &str, &str, &str)] = &[
    ("echo-flip", "unary/echo-*", "provider", "unary/echo-raw"),
    ("failure-as-defect", "errors/fail*", "provider", "errors/fail"),
    ("deaf-to-cancel", "cancel/*", "provider", "cancel/unary-sleep"),
    ("never-end", "stream/client/*", "client", "stream/client/sum"),
];

#[test]
fn each_fault_fails_the_cases_meant_to_catch_it() {
    for (fault, glob, role, case) in FAULTS {
        let (code, out) = run(glob, None, None);
        assert_eq!(code, 0, "without a fault, {glob} must pass:\n{out}");
        let (code, out) = run(glob, Some(fault), None);
        assert_eq!(code, 1, "fault {fault} must fail the run:\n{out}");
        let line = format!("FAIL  rust {role} memory  {case} ");
        assert!(out.contains(&line), "fault {fault} must fail {case} ({role}):\n{out}");
    }
}

#[test]
fn known_failing_entries_excuse_failures_and_must_not_go_stale() {
    // Removed when dropped, whether the test passes or fails.
    let dir = hubwire_tests::harness::TempDir::new("conformance-kf");
    std::fs::write(dir.0.join("rust-provider.txt"), "# test list\nunary/echo-raw@memory\n").unwrap();

    // Listed and failing: an expected failure, the run passes.
    let (code, out) = run("unary/echo-raw", Some("echo-flip"), Some(&dir.0));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("conformance: 1 passed, 0 failed"), "{out}");

    // Listed but passing: the list is stale, the run fails and says where.
    let (code, out) = run("unary/echo-raw", None, Some(&dir.0));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("XPASS") && out.contains("rust-provider.txt:2"), "{out}");
}
