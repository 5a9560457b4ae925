//! N unary round trips of one variant, for profilers (`perf`, `strace`,
//! `valgrind --tool=callgrind`) that want a plain process rather than a
//! criterion run.
//!
//! `rtt-loop <kind> <n> [socket-path]`: with a socket path, connects to a
//! `bench-peer` already listening there (so the peer can be profiled on its
//! own); without, starts the sibling `bench-peer` itself and kills it at
//! the end. Prints the mean round trip.

use hubwire_bench::{socket_path, Client, Peer, Variant, PAYLOAD_LEN};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: rtt-loop <echo-blocking|echo-spin|hubwire-efficient|hubwire-lowlatency> <n> [socket-path]";
    let variant = args
        .get(1)
        .and_then(|k| Variant::parse(k))
        .unwrap_or_else(|| {
            eprintln!("{usage}");
            std::process::exit(2)
        });
    let n: u64 = args.get(2).and_then(|n| n.parse().ok()).unwrap_or_else(|| {
        eprintln!("{usage}");
        std::process::exit(2)
    });
    let (peer, path) = match args.get(3) {
        Some(p) => (None, std::path::PathBuf::from(p)),
        None => {
            let path = socket_path(variant);
            (
                Some(Peer::spawn(
                    &hubwire_bench::sibling_peer_exe()?,
                    variant,
                    path.clone(),
                )?),
                path,
            )
        }
    };
    let mut client = Client::connect(variant, &path, PAYLOAD_LEN)?;
    client.run(n.min(1000)); // warm-up
    let t = client.run(n);
    println!(
        "{}: {n} round trips, mean {:.2} µs",
        variant.bench_id(),
        t.as_secs_f64() * 1e6 / n as f64
    );
    drop(client);
    drop(peer);
    Ok(())
}
