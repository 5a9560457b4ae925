//! Broken configs: `hubwire hub` refuses each with exit status 2 and one
//! line on stderr naming the file, the line and the cause — before it
//! starts any provider.

mod common;

use std::process::Command;

/// Runs `hubwire hub` on `config`; returns (exit code, stderr).
fn run(config: &str) -> (Option<i32>, String) {
    let dir = common::temp_dir();
    let path = dir.join("hubwire.toml");
    std::fs::write(&path, config.replace("{provider}", common::PROVIDER)).unwrap();
    // Whatever the umask: a config others could write is refused.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut child = Command::new(common::HUB)
        .args(["hub", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::wait_exit(&mut child, std::time::Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
    }
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.and_then(|s| s.code()), err)
}

fn refused(config: &str, line: usize, cause: &str) {
    let (code, err) = run(config);
    assert_eq!(code, Some(2), "expected exit status 2 for:\n{config}\nstderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line, got:\n{err}");
    assert!(err.starts_with("error: ") && err.contains(&format!("hubwire.toml:{line}: ")), "names file and line {line}: {err}");
    assert!(err.contains(cause), "names the cause {cause:?}: {err}");
}

const HUB: &str = "[hub]\nunix = \"hub.sock\"\n";

#[test]
fn an_unknown_key_is_named_with_its_line() {
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nexce = [\"x\"]\n"), 6, "unknown field `exce`");
    refused("[hub]\nunix = \"hub.sock\"\nlisten = \"x\"\n", 3, "unknown field `listen`");
}

#[test]
fn a_provider_without_a_command_is_refused() {
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nreplicas = 2\n"), 4, "missing command");
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = []\n"), 6, "exec is empty");
}

#[test]
fn duplicate_provider_names_are_refused() {
    let c =
        format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"{{provider}}\"]\n\n[[provider]]\nname = \"a\"\nexec = [\"{{provider}}\"]\n");
    refused(&c, 8, "duplicate provider name \"a\" (first defined on line 4)");
}

#[test]
fn a_port_in_use_is_refused_with_its_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    refused(&format!("{HUB}tcp = \"{addr}\"\n"), 3, "address in use");
    refused(&format!("{HUB}http = \"{addr}\"\n"), 3, "address in use");
}

#[test]
fn a_unix_socket_in_use_or_out_of_reach_is_refused_with_its_line() {
    let dir = common::temp_dir();
    let sock = dir.join("taken.sock");
    let _taken = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    refused(&format!("[hub]\nunix = {:?}\n", sock.display().to_string()), 2, "another process is already listening there");
    refused("[hub]\nname = \"h\"\nunix = \"/nonexistent-dir/hub.sock\"\n", 3, "No such file or directory");
}

#[test]
fn bad_values_are_refused() {
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\nmin_uptime = \"soon\"\n"), 7, "not a duration");
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\nreplicas = 0\n"), 7, "replicas = 0 must be between 1 and 1024");
    refused(
        &format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\nmax_in_flight = 9223372036854775807\n"),
        7,
        "must be between 1 and 1000000",
    );
    refused(
        &format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\ncrash_loop_limit = 4294967297\n"),
        7,
        "must be between 1 and 1000",
    );
    refused(
        &format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\nhealth_interval = \"0s\"\n"),
        7,
        "health_interval must be more than zero",
    );
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\\\"b\"\nexec = [\"x\"]\n"), 5, "use only letters, digits");
    refused(
        &format!("{HUB}\n[[provider]]\nname = \"a\"\ndial = \"tcp:localhost\"\n"),
        6,
        "expected \"unix:PATH\", \"tcp:HOST:PORT\" or \"nats:NAME\"",
    );
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\nexec = [\"x\"]\ndial = \"unix:/x\"\n"), 7, "not both");
    refused(
        &format!("{HUB}\n[[provider]]\nname = \"a\"\ndial = \"ftp:x\"\n"),
        6,
        "expected \"unix:PATH\", \"tcp:HOST:PORT\" or \"nats:NAME\"",
    );
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\ndial = \"nats:a.b\"\n"), 6, "or \"nats:NAME\"");
    refused(&format!("{HUB}\n[[provider]]\nname = \"a\"\ndial = \"nats:prov\"\n"), 4, "needs a [nats] section");
    refused("[hub]\nwait = \"fast\"\nunix = \"hub.sock\"\n", 2, "expected \"adaptive\" (the default), \"efficient\" or \"low-latency\"");
    refused("[hub]\nunix = \"hub.sock\"\n[[provider]]\nname = \"a\"\nexec = \"x\"\n", 5, "invalid type");
    refused("[hub\nunix = 1\n", 1, "");
}

#[test]
fn a_missing_file_and_no_listener_are_refused() {
    let out = Command::new(common::HUB).args(["hub", "--config", "/nonexistent/hubwire.toml"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.starts_with("error: /nonexistent/hubwire.toml: cannot read the config"), "{err}");
    let (code, err) = run("[[provider]]\nname = \"a\"\nexec = [\"x\"]\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("no listener"), "{err}");
}

// Authentication (h19-auth): a token file others can read, or an empty one,
// is refused with the line of `token_file`, and the token never printed.
#[test]
fn a_token_file_others_can_read_or_an_empty_one_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = common::temp_dir();
    let token = dir.join("token");
    std::fs::write(&token, "never-printed-7f3a\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = format!("{HUB}token_file = \"{}\"\n", token.display());
    refused(&config, 3, "accessible by group or others (mode 0644)");
    assert!(!run(&config).1.contains("never-printed"), "the token is not printed");
    std::fs::write(&token, "  \nsecond line\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    refused(&config, 3, "is empty");
}
