//! `bench-peer`: the server side of every benchmarked system.

fn main() {
    hubwire_bench::peer_main::main()
}
