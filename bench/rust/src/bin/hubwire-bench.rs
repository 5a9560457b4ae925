//! `hubwire-bench`: the benchmark suite (also run as `hubwire bench`).

fn main() -> std::process::ExitCode {
    hubwire_bench::cli::main()
}
