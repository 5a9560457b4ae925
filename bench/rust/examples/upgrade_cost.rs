//! The upgrade's own cost (issue 16): connect + HELLO + the upgrade to
//! shared memory (`spec/PROTOCOL.md` §11.4) against connect + HELLO, on a
//! Unix socket to a provider on another thread, measured in alternating
//! slices so that the machine's load hits both alike. Not yet a row of the
//! suite (the runner has no per-connection mode); run it with
//! `cargo run --release -p hubwire-bench --example upgrade_cost`.

use std::time::{Duration, Instant};

use hubwire::transport::unix;
use hubwire::{Connection, ConnectionOptions};

/// Connections per slice, and slices per mode.
const PER_SLICE: usize = 100;
const SLICES: usize = 10;

fn main() -> std::io::Result<()> {
    let dir = std::env::temp_dir().join(format!("hubwire-upgrade-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("p.sock");
    let server_path = path.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let l = unix::UnixListener::bind(&server_path).expect("bind");
            ready_tx.send(()).expect("main waits");
            let _ = hubwire_bench::systems::hubwire::provider().serve(l, ConnectionOptions::new("bench").shm(true)).await;
        });
    });
    ready_rx.recv().map_err(std::io::Error::other)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    rt.block_on(async {
        for _ in 0..SLICES {
            for (i, shm) in [false, true].into_iter().enumerate() {
                let options = ConnectionOptions::new("bench-client").shm(shm);
                for _ in 0..PER_SLICE {
                    let t0 = Instant::now();
                    let conn = Connection::dial(unix::connect(&path).await?, &options).await.map_err(std::io::Error::other)?;
                    if shm && !conn.upgraded().await {
                        return Err(std::io::Error::other("not upgraded"));
                    }
                    times[i].push(t0.elapsed());
                    conn.close();
                }
            }
        }
        Ok::<_, std::io::Error>(())
    })?;
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (plain, upgraded) = (p50(&mut times[0]), p50(&mut times[1]));
    println!("connect + HELLO:           p50 {plain:?}");
    println!("connect + HELLO + upgrade: p50 {upgraded:?} ({:.2}× the first)", upgraded.as_secs_f64() / plain.as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
