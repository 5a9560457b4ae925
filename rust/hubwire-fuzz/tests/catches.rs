//! The fuzzer itself must find what it is for: a panic hidden behind one
//! byte value, and an allocation sized by a length field. Both fake
//! targets are fuzzed from an innocent seed; each must be caught, saved,
//! and replay the same way.

use std::time::Duration;

use hubwire_fuzz::alloc::Counting;
use hubwire_fuzz::run::{self, Options};
use hubwire_fuzz::targets::Target;

#[global_allocator]
static ALLOC: Counting = Counting;

fn seeds() -> Vec<Vec<u8>> {
    vec![b"hello, fuzzer".to_vec()]
}

/// Panics when byte 3 is 0xab: a bug one mutation away, 1 in 256 values.
fn panics_on_ab(input: &[u8]) -> u64 {
    assert!(input.get(3) != Some(&0xab), "byte 3 is 0xab");
    input.first().copied().unwrap_or(0) as u64
}

/// Reserves what the first four bytes announce, as a careless decoder does.
fn trusts_length(input: &[u8]) -> u64 {
    let n = input.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let v: Vec<u8> = Vec::with_capacity(n.min(64 << 20) as usize);
    std::hint::black_box(&v);
    v.capacity() as u64 / 4096
}

static PANICS: Target = Target { name: "panics", doc: "", seeds, dict: &[], run: panics_on_ab };
static GREEDY: Target = Target { name: "greedy", doc: "", seeds, dict: &[], run: trusts_length };

/// One fuzz run at a time: the counting allocator's live and peak bytes
/// and the last panic are the process's, so the greedy target's 64 MiB
/// reservations, made on the other test's thread, were counted against
/// the panicking target's inputs (which then "failed" by allocating).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn options(dir: &std::path::Path) -> Options {
    Options { iterations: 2_000_000, time_limit: Some(Duration::from_secs(60)), seed: 9, crashes: dir.to_path_buf(), progress: None }
}

/// Where a test's fuzzer saves what it finds: removed when the test
/// passes; kept when it fails (drops while panicking), with the inputs
/// saved there, for the failure report.
struct Crashes(std::path::PathBuf);

impl Crashes {
    fn new(name: &str) -> Crashes {
        Crashes(std::env::temp_dir().join(format!("{name}-{}", std::process::id())))
    }
}

impl Drop for Crashes {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} for the failure report", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn a_panic_behind_one_byte_is_found_saved_and_replayed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    run::quiet_panics();
    let dir = Crashes::new("hubwire-fuzz-test");
    let report = run::fuzz(&PANICS, &options(&dir.0));
    let f = report.failure.expect("the fuzzer found the panic");
    assert!(f.message.contains("byte 3 is 0xab"), "{}", f.message);
    assert_eq!(f.input[3], 0xab);
    let saved = std::fs::read_to_string(f.saved.expect("saved")).unwrap();
    assert_eq!(hex::decode(saved.trim()).unwrap(), f.input);
    assert!(run::run_one(&PANICS, &f.input).is_err(), "the saved input fails again");
}

#[test]
fn an_allocation_sized_by_a_length_field_is_caught() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    run::quiet_panics();
    let dir = Crashes::new("hubwire-fuzz-test-greedy");
    let report = run::fuzz(&GREEDY, &options(&dir.0));
    let f = report.failure.expect("the fuzzer caught the allocation");
    assert!(f.message.contains("allocated"), "{}", f.message);
}
