//! The hubwire benchmark suite (`hubwire bench`, `hubwire-bench`).
//!
//! Scenario files in `bench/scenarios/` say what to measure; every row is
//! hubwire, a raw floor (a hand-written echo on the same transport), or a
//! peer a user would pick instead (a process per call, HTTP/1.1, JSON-RPC
//! over stdio, tonic, grpc-go, ipc-channel), all measured in one run on
//! one machine, so each row carries its ratio to the floor and to the best
//! peer. See `bench/README.md` for the method.
//!
//! | module | what |
//! |---|---|
//! | [`model`] | the vocabulary: systems, transports, encodings, modes, jobs |
//! | [`scenario`] | scenario files → jobs |
//! | [`payload`] | the payloads of `payloads.toml` |
//! | [`client`] | the client interface and the loops that drive it (the one timed sequential loop) |
//! | [`runner`] | the target interface; measuring a job in each mode, interleaving comparisons |
//! | [`systems`] | hubwire, the floors and the peers, client and server side |
//! | [`frame_io`] | the floor's length-prefixed echo over file descriptors |
//! | [`cpu`], [`machine`] | CPU accounting; machine info and the idle check |
//! | [`results`], [`targets`] | rows and ratios, the JSON file; the targets, with where their numbers come from |
//! | [`report`] | markdown tables, SVG charts, `--compare` |
//! | [`cli`] | `hubwire-bench`'s command line |
//! | [`peer`], [`serve`], [`peer_main`] | server processes: starting them; their accept loops; `bench-peer`'s main |

pub mod cli;
pub mod client;
pub mod cpu;
pub mod frame_io;
pub mod machine;
pub mod model;
pub mod payload;
pub mod peer;
pub mod peer_main;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod serve;
pub mod stats;
pub mod systems;
pub mod targets;
