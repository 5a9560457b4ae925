//! The hubwire conformance runner, as a library (the binary in `main.rs`
//! is its command line; `tests/` check the suite itself).
//!
//! * [`case`] loads cases: the YAML suites and the must-reject vectors.
//! * [`pattern`] builds frames from case data and matches frames against
//!   patterns, with variables.
//! * [`peer`] is the runner's raw side of the wire.
//! * [`testee`] starts the implementation under test and speaks the
//!   control protocol with it.
//! * [`run`] executes one case on one transport.
//! * [`upgrade`] offers the upgrade to shared memory (spec §11.4).
//! * [`report`] keeps the known-failing lists and prints the summary.

pub mod case;
pub mod pattern;
pub mod peer;
pub mod report;
pub mod run;
pub mod testee;
pub mod upgrade;
