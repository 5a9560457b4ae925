//! The examples work as the README says: the client calls every method of
//! the provider, over a Unix socket and with the provider as a child
//! process, and reports every call as expected.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROVIDER: &str = env!("CARGO_BIN_EXE_example-provider");
const CLIENT: &str = env!("CARGO_BIN_EXE_example-client");

fn check(out: std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "example-client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" 0 unexpected"), "{stdout}");
    assert!(stdout.contains("division_by_zero") && stdout.contains("unknown_method"), "{stdout}");
    stdout
}

/// A directory removed when dropped: when the test ends, passed or failed.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn client_against_provider_on_a_unix_socket() {
    let dir = TempDir(std::env::temp_dir().join(format!("hw-examples-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let sock = dir.0.join("example.sock");
    let mut provider = Command::new(PROVIDER).arg("--unix").arg(&sock).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while !sock.exists() {
        assert!(start.elapsed() < Duration::from_secs(10), "the provider never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Command::new(CLIENT).arg("--unix").arg(&sock).output().unwrap();
    provider.kill().unwrap();
    let _ = provider.wait();
    check(out);
}

#[test]
fn client_spawning_the_provider_as_a_child() {
    let out = Command::new(CLIENT).arg("--spawn").arg(PROVIDER).output().unwrap();
    let stdout = check(out);
    assert!(stdout.contains("child exit"), "{stdout}");
}
