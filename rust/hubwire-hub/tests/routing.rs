//! Calls through a real hub process: every call kind, unknown methods and
//! kind mismatches, deadlines and cancellation end to end, duplicate
//! method names, the CLI, the HTTP gateway and JSON logs.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{http, Hub};
use hubwire::{CallOptions, Code, ItemStream};

const ONE: &str = "[[provider]]\nname = \"test\"\nexec = [\"{provider}\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_kind_passes_through_the_hub() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    // The hub's HELLO lists the provider's methods beside its own.
    let names: Vec<&str> = c.peer().methods.iter().map(|m| m.name.as_str()).collect();
    for m in ["hubwire.status", "hubwire.methods", "echo", "count", "sum", "upper"] {
        assert!(names.contains(&m), "{m} missing from the hub's HELLO: {names:?}");
    }
    let echoed = c.call_raw("echo", Bytes::from_static(b"\x00\xffraw bytes")).await.unwrap();
    assert_eq!(&echoed[..], b"\x00\xffraw bytes");
    let opts = CallOptions::new();
    let items: ItemStream<u32> = c.server_stream("count", &5000u32, &opts).await.unwrap();
    assert_eq!(items.collect().await.unwrap(), (0..5000).collect::<Vec<u32>>(), "a long stream, under flow control on both hops");
    let sum = c.client_stream::<i64, i64>("sum", &opts).await.unwrap();
    for i in 1..=100 {
        sum.send(&i).await.unwrap();
    }
    assert_eq!(sum.finish().await.unwrap(), 5050);
    let (sink, mut out) = c.bidi::<String, String>("upper", &opts).await.unwrap();
    for w in ["hub", "wire"] {
        sink.send(&w.to_string()).await.unwrap();
        assert_eq!(out.next().await.unwrap().as_deref(), Some(w.to_uppercase().as_str()));
    }
    sink.end().unwrap();
    assert_eq!(out.next().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_wrong_kinds_get_clear_errors() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let e = c.call_raw("nope", Bytes::new()).await.unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod);
    assert!(e.message().contains("\"nope\"") && e.message().contains("echo"), "names the method and what exists: {e}");
    let e = c.call::<u32, Vec<u32>>("count", &3).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("server_stream"), "{e}");
    // The connection is unaffected.
    assert_eq!(&c.call_raw("echo", Bytes::from_static(b"ok")).await.unwrap()[..], b"ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_and_cancellation_reach_the_provider() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let c = hub.connect().await;
    let opts = CallOptions::new().timeout(Duration::from_millis(300));
    let started = Instant::now();
    let e = c.call_with::<_, String>("sleep", &serde_json::json!({"ms": 30_000}), &opts).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "the deadline was not enforced");
    // A call dropped by its caller is cancelled at the provider too: its
    // handler stops (the provider counts its live `sleep` handlers).
    let long = serde_json::json!({"ms": 30_000});
    let call = c.call::<_, String>("sleep", &long);
    let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let live: usize = c.call("live", &()).await.unwrap();
        let s = hub.status().await;
        if live == 0 && s.providers[0].replicas[0].in_flight == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "cancelled calls still running: {live} handlers at the provider; {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A live handler is counted, so the check above can fail.
    let call = tokio::spawn({
        let c = c.clone();
        async move { c.call::<_, String>("sleep", &serde_json::json!({"ms": 30_000})).await }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.call::<_, usize>("live", &()).await.unwrap() != 1 {
        assert!(Instant::now() < deadline, "the sleep never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    call.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_before_a_provider_says_hello_fail_at_once_naming_it() {
    let hub = Hub::start("[[provider]]\nname = \"slow\"\nexec = [\"{provider}\", \"--hello-after\", \"1500\"]\n");
    // No wait_ready: the provider has not said HELLO, so the hub does not
    // know its methods yet, and does not hold the call for it.
    let c = hub.connect().await;
    let e = c.call_raw("echo", Bytes::from_static(b"early")).await.unwrap_err();
    assert_eq!(e.code(), Code::UnknownMethod, "{e}");
    assert!(e.message().contains("still starting") && e.message().contains("slow"), "{e}");
    // Once it has registered, its methods are known.
    hub.wait_ready("slow", 1).await;
    let echoed = c.call_raw("echo", Bytes::from_static(b"later")).await.unwrap();
    assert_eq!(&echoed[..], b"later");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_method_name_is_refused_with_both_names() {
    let hub = Hub::start(&format!("{ONE}[[provider]]\nname = \"copycat\"\nexec = [\"{{provider}}\"]\n"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let s = hub.status().await;
        if let Some(r) = s.providers.iter().flat_map(|p| &p.replicas).find(|r| r.state == "failed") {
            break r.reason.clone().unwrap();
        }
        assert!(Instant::now() < deadline, "no provider was refused: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(failed.contains("duplicate method") && (failed.contains("\"test\"") || failed.contains("\"copycat\"")), "{failed}");
    // The provider that came first keeps serving.
    let c = hub.connect().await;
    assert_eq!(&c.call_raw("echo", Bytes::from_static(b"x")).await.unwrap()[..], b"x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_calls_lists_and_shows_status() {
    let hub = Hub::start(ONE);
    hub.wait_ready("test", 1).await;
    let (code, out, err) = hub.cli(&["call", "count", "3"]);
    assert_eq!((code, out.as_str()), (0, "0\n1\n2\n"), "{err}");
    let (code, out, err) = hub.cli(&["call", "sleep", r#"{"ms": 1}"#]);
    assert_eq!((code, out.as_str()), (0, "\"slept 1 ms\"\n"), "{err}");
    let (code, out, _) = hub.cli(&["call", "sum", "1\n2\n39"]);
    assert_eq!((code, out.as_str()), (0, "42\n"));
    // --timeout: a deadline; 0 is none, as on the wire.
    let (code, _, err) = hub.cli(&["call", "sleep", r#"{"ms": 5000}"#, "--timeout", "50ms"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: deadline_exceeded:"), "{err}");
    let (code, out, err) = hub.cli(&["call", "sleep", r#"{"ms": 20}"#, "--timeout", "0s"]);
    assert_eq!((code, out.as_str()), (0, "\"slept 20 ms\"\n"), "{err}");
    let raw = common::path_in(&hub, "in.bin");
    std::fs::write(&raw, b"raw \x00\x01 bytes").unwrap();
    let out = std::process::Command::new(common::HUB)
        .args(["call", "echo", "--raw"])
        .arg(&raw)
        .arg("--hub")
        .arg(format!("unix:{}", hub.socket.display()))
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"raw \x00\x01 bytes", "--raw sends and prints bytes untouched");
    // For an input stream, --raw bytes go as its one item.
    let out = std::process::Command::new(common::HUB)
        .args(["call", "bytes", "--raw"])
        .arg(&raw)
        .arg("--hub")
        .arg(format!("unix:{}", hub.socket.display()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "12\n", "{}", String::from_utf8_lossy(&out.stderr));
    let (code, _, err) = hub.cli(&["call", "nope"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: unknown_method:"), "{err}");
    let (code, out, _) = hub.cli(&["list"]);
    assert_eq!(code, 0);
    assert!(
        out.lines().any(|l| l.starts_with("echo") && l.contains("unary") && l.contains("test") && l.contains("Returns its input bytes")),
        "{out}"
    );
    let (code, out, _) = hub.cli(&["status"]);
    assert_eq!(code, 0);
    let header = out.lines().next().unwrap();
    for col in ["PROVIDER", "REPLICA", "PID", "STATE", "RESTARTS", "IN FLIGHT", "CALLS", "ERRORS", "P50", "P99"] {
        assert!(header.contains(col), "status header lacks {col}: {header}");
    }
    let row = out.lines().find(|l| l.starts_with("test")).unwrap();
    assert!(row.contains("ready"), "{row}");
    let (code, _, err) = cli_at("unix:/nonexistent/hub.sock", &["call", "echo"]);
    assert_ne!(code, 0);
    assert!(err.contains("is `hubwire hub` running?") || err.contains("cannot reach"), "{err}");
}

fn cli_at(hub: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(common::HUB).args(args).arg("--hub").arg(hub).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listener_and_the_http_gateway_serve_calls() {
    let hub = Hub::start_with("http = \"127.0.0.1:0\"\ntcp = \"127.0.0.1:0\"", ONE, &[]);
    hub.wait_ready("test", 1).await;
    let (addr, tcp) = (hub.listening("HTTP gateway"), hub.listening("accepting clients listen=tcp:"));
    // The hubwire protocol over the TCP listener too.
    let over_tcp =
        hubwire::Connection::dial(hubwire::transport::tcp::connect(tcp.as_str()).await.unwrap(), &hubwire::ConnectionOptions::new("t"))
            .await
            .unwrap();
    assert_eq!(&over_tcp.call_raw("echo", Bytes::from_static(b"tcp")).await.unwrap()[..], b"tcp");
    let (status, body) = http(&addr, "POST", "/v1/call/sleep", r#"{"ms": 1}"#);
    assert_eq!((status, body.as_str()), (200, "\"slept 1 ms\""));
    let (status, body) = http(&addr, "POST", "/v1/call/count", "3");
    assert_eq!((status, body.as_str()), (200, "0\n1\n2\n"));
    let (status, body) = http(&addr, "POST", "/v1/call/sum", "1\n2\n3\n");
    assert_eq!((status, body.as_str()), (200, "6"));
    // Bad NDJSON is refused before the call starts, naming the line.
    let (status, body) = http(&addr, "POST", "/v1/call/sum", "1\n{oops\n");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("line 2"), "{body}");
    // The method in the path is percent-decoded.
    assert_eq!(http(&addr, "POST", "/v1/call/sl%65ep", r#"{"ms": 1}"#), (200, "\"slept 1 ms\"".into()));
    assert_eq!(http(&addr, "POST", "/v1/call/sleep%zz", "").0, 400);
    // hubwire-timeout-ms: a deadline; 0 is none, as on the wire; anything else not a number is refused.
    let (status, body) = common::http_with(&addr, "POST", "/v1/call/sleep", "hubwire-timeout-ms: 50\r\n", r#"{"ms": 5000}"#);
    assert_eq!(status, 504, "{body}");
    assert!(body.contains("deadline_exceeded"), "{body}");
    let (status, body) = common::http_with(&addr, "POST", "/v1/call/sleep", "hubwire-timeout-ms: 0\r\n", r#"{"ms": 20}"#);
    assert_eq!((status, body.as_str()), (200, "\"slept 20 ms\""));
    let (status, body) = common::http_with(&addr, "POST", "/v1/call/sleep", "hubwire-timeout-ms: soon\r\n", r#"{"ms": 1}"#);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("hubwire-timeout-ms"), "{body}");
    let (status, body) = http(&addr, "POST", "/v1/call/nope", "");
    assert_eq!(status, 404);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["code"], "unknown_method");
    let (status, body) = http(&addr, "POST", "/v1/call/sleep", "{not json");
    assert_eq!(status, 400, "{body}");
    let (status, body) = http(&addr, "GET", "/v1/methods", "");
    assert_eq!(status, 200);
    let methods: Vec<hubwire_hub::status::MethodRow> = serde_json::from_str(&body).unwrap();
    assert!(methods.iter().any(|m| m.name == "upper" && m.kind == "bidi" && m.provider == "test"), "{body}");
    assert_eq!(http(&addr, "GET", "/healthz", ""), (200, "ok\n".into()));
    let (status, metrics) = http(&addr, "GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(metrics.contains("hubwire_calls_total{provider=\"test\",replica=\"0\",code=\"ok\"}"), "{metrics}");
    assert!(metrics.contains("hubwire_replica_up{provider=\"test\",replica=\"0\"} 1"), "{metrics}");
    assert!(metrics.contains("# TYPE hubwire_calls_refused_total counter"), "{metrics}");
    assert_eq!(http(&addr, "GET", "/v1/call/x", "").0, 405);
}

#[test]
fn every_code_maps_to_the_http_status_of_the_spec() {
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/codes.json")).unwrap()).unwrap();
    for c in table["codes"].as_array().unwrap() {
        let code = Code::from_name(c["name"].as_str().unwrap()).unwrap();
        assert_eq!(hubwire_hub::gateway::http_status(code) as u64, c["http"].as_u64().unwrap(), "{code:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_provider_output_tagged_with_its_name() {
    let mut hub = Hub::start_with("", ONE, &["--log-format", "json"]);
    hub.wait_ready("test", 1).await;
    hub.terminate(Duration::from_secs(20));
    let log = hub.log();
    let lines: Vec<serde_json::Value> =
        log.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    assert!(
        lines.iter().any(|v| v["provider"] == "test" && v["stream"] == "stderr" && v["message"] == "test provider: a line on stderr"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialled_provider_is_reached_and_redialled_after_it_restarts() {
    let dir = common::temp_dir();
    let sock = dir.join("p.sock");
    let serve = |sock: &std::path::Path| {
        std::process::Command::new(common::PROVIDER)
            .arg("--unix")
            .arg(sock)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // The hub starts first: the provider is unreachable, dialled again and
    // again, and never given up on (more failures than crash_loop_limit).
    let hub = Hub::start(&format!(
        "[[provider]]\nname = \"remote\"\ndial = \"unix:{}\"\nrestart_backoff = \"10ms\"\nrestart_backoff_max = \"50ms\"\ncrash_loop_limit = 2\n",
        sock.display()
    ));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = hub.status().await;
        let r = &s.providers[0].replicas[0];
        assert_ne!(r.state, "failed", "a dialled provider was given up on: {s:?}");
        if r.state == "unreachable" && r.restarts >= 4 {
            break;
        }
        assert!(Instant::now() < deadline, "not shown as unreachable: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut remote = serve(&sock);
    hub.wait_ready("remote", 1).await;
    let c = hub.connect().await;
    let first: u32 = c.call("pid", &()).await.unwrap();
    assert_eq!(first, remote.id());
    remote.kill().unwrap();
    remote.wait().unwrap();
    // A call routed before the hub sees the connection close fails
    // `unavailable`, as any call in flight to a dead provider does; the one
    // below is meant to arrive after, and wait for the redial.
    let deadline = Instant::now() + Duration::from_secs(10);
    while hub.status().await.providers[0].replicas[0].state == "ready" {
        assert!(Instant::now() < deadline, "the hub did not notice the provider's death");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut again = serve(&sock);
    let second: u32 = tokio::time::timeout(Duration::from_secs(10), c.call("pid", &())).await.expect("never redialled").unwrap();
    assert_eq!(second, again.id(), "the call went to the new process");
    let s = hub.status().await;
    assert!(s.providers[0].launch.starts_with("unix:") && s.providers[0].replicas[0].restarts >= 1, "{s:?}");
    again.kill().unwrap();
    again.wait().unwrap();
}
