//! The guards that end a run (a hang, a stack overflow, an allocation past
//! the hard cap) report it and keep the input: each self-test target of the
//! binary must die of `SIGABRT` with the input written to
//! `<regressions>/<target>/fatal-seed<N>`.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

fn run_selftest(name: &str) -> (std::process::Output, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("hookline-fuzz-fatal-{name}-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_hookline-fuzz"))
        .args(["--selftest", name, "--inputs", "3", "--seed", "5", "--hang-ms", "300"])
        .arg("--regressions")
        .arg(&dir)
        .output()
        .expect("the fuzzer runs");
    let saved = std::fs::read(dir.join(format!("selftest-{name}")).join("fatal-seed5")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (out, saved)
}

#[test]
fn a_hang_a_stack_overflow_and_runaway_memory_end_the_run_with_the_input_saved() {
    for (name, says) in [
        ("hang", "HANG in target selftest-hang: input 0 (seed 5)"),
        ("stack", "has overflowed its stack"),
        ("memory", "memory allocation of"),
    ] {
        let (out, saved) = run_selftest(name);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{name}: {:?}\n{stderr}", out.status);
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(stderr.contains("saved as a regression"), "{name}: {stderr}");
        assert_eq!(saved, name.as_bytes(), "{name}: the input in flight is saved");
    }
}
