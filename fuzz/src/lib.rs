//! A mutation fuzzer for Hookline's parsers, on stable Rust (no nightly,
//! no libFuzzer): per target ([`targets::TARGETS`]) a seed corpus (files
//! of `corpus/<target>/`, the docs' examples, inputs made by the code under
//! test) and mutations of it ([`mutate`]), deterministic from `--seed`, so
//! a failure reproduces.
//!
//! Every input runs under three guards:
//!
//! * a panic is caught ([`std::panic::catch_unwind`]), reported with the
//!   target, the seed and the input's index, and the input is written to
//!   `regressions/<target>/<hash>`, which [`replay_regressions`] (a test of
//!   this crate, so `make test`) replays from then on;
//! * a hang: a watchdog thread aborts the run when one input takes longer
//!   than [`Options::hang`], and the input is saved by the fatal handler
//!   ([`fatal`]) as a regression too (also on a stack overflow);
//! * memory: the counting allocator ([`alloc`]) measures the most bytes one
//!   input had live at once; past [`Options::max_memory`] the input is
//!   reported like a panic, past [`alloc::HARD_CAP`] the allocation fails
//!   and the process aborts (input saved).
//!
//! Targets run on a thread with a 2 MiB stack, as tokio's workers (which
//! serve requests in `hookline serve`) have.

pub mod alloc;
pub mod fatal;
pub mod mutate;
pub mod rng;
pub mod targets;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rng::Rng;
use targets::Target;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// How a run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Inputs per target.
    pub inputs: u64,
    /// The seed of the mutations.
    pub seed: u64,
    /// The longest input, in bytes.
    pub max_len: usize,
    /// The most one input may take before the run is aborted as hung.
    pub hang: Duration,
    /// The most bytes one input may have live at once (above what was
    /// live before it).
    pub max_memory: usize,
    /// Where crashing inputs are written (`<dir>/<target>/<hash>`).
    pub regressions: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            inputs: 1_000_000,
            seed: 1,
            max_len: 64 * 1024,
            hang: Duration::from_secs(2),
            max_memory: 64 * 1024 * 1024,
            regressions: regressions_dir(),
        }
    }
}

/// `fuzz/regressions/`, where crashing inputs are kept.
pub fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regressions")
}

/// One failing input.
#[derive(Debug, Clone)]
pub struct Crash {
    /// Its index in the run (with the seed, it reproduces).
    pub index: u64,
    /// The panic message and location, or the memory bound it passed.
    pub message: String,
    /// Where it failed: the first line of the message (`panicked at
    /// file:line:column:`), by which failures are told apart.
    pub place: String,
    /// Inputs of the run that failed there.
    pub count: u64,
    /// Where the input was written.
    pub saved: PathBuf,
}

/// What one target's run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target.
    pub target: &'static str,
    /// Inputs run.
    pub inputs: u64,
    /// Inputs some parser accepted.
    pub accepted: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// The most bytes one input had live at once.
    pub peak_bytes: usize,
    /// The longest one input took.
    pub slowest: Duration,
    /// The corpus at the end (seeds and accepted inputs kept).
    pub corpus: usize,
    /// Failing inputs, the first of each place ([`Crash::place`]).
    pub crashes: Vec<Crash>,
}

/// The last panic's message and location, filled by the hook [`run`] sets.
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Most corpus entries kept: seeds, then accepted inputs (one in 64).
const MAX_CORPUS: usize = 2048;

/// Runs `target` for `opts.inputs` inputs (on a 2 MiB stack) and reports.
pub fn run(target: &'static Target, opts: &Options) -> Report {
    let opts = opts.clone();
    std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .stack_size(2 << 20)
        .spawn(move || run_here(target, &opts))
        .expect("a fuzzing thread")
        .join()
        .expect("the fuzzing loop itself does not panic")
}

/// The watchdog's view of the input in flight: when it started, in
/// milliseconds since the run began (0: none), and its index.
struct Watch {
    started_ms: AtomicU64,
    index: AtomicU64,
    done: AtomicBool,
}

fn run_here(target: &'static Target, opts: &Options) -> Report {
    let mut corpus = seeds(target);
    let seeds_len = corpus.len();
    let mut keys = Vec::new();
    if target.json {
        for c in &corpus {
            if let Ok(v) = serde_json::from_slice(c) {
                mutate::keys_of(&v, &mut keys);
            }
        }
    }
    let dir = opts.regressions.join(target.name);
    let _ = std::fs::create_dir_all(&dir);
    fatal::arm(&dir.join(format!("fatal-seed{}", opts.seed)));

    let begun = Instant::now();
    let watch =
        Arc::new(Watch { started_ms: AtomicU64::new(0), index: AtomicU64::new(0), done: AtomicBool::new(false) });
    let watchdog = {
        let (watch, hang, seed, name) = (watch.clone(), opts.hang, opts.seed, target.name);
        std::thread::spawn(move || {
            while !watch.done.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                let started = watch.started_ms.load(Relaxed);
                let now = begun.elapsed().as_millis() as u64;
                if started != 0 && now.saturating_sub(started) > hang.as_millis() as u64 {
                    eprintln!(
                        "hookline-fuzz: HANG in target {name}: input {} (seed {seed}) has run for more than {hang:?}",
                        watch.index.load(Relaxed)
                    );
                    std::process::abort();
                }
            }
        })
    };

    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = info.to_string();
        }
    }));

    let mut rng = Rng::new(opts.seed ^ fnv(target.name.as_bytes()));
    let mut input: Vec<u8> = Vec::with_capacity(opts.max_len + 64);
    let mut report = Report {
        target: target.name,
        inputs: 0,
        accepted: 0,
        elapsed: Duration::ZERO,
        peak_bytes: 0,
        slowest: Duration::ZERO,
        corpus: 0,
        crashes: Vec::new(),
    };
    for index in 0..opts.inputs {
        // The first inputs are the seeds themselves, then mutations.
        input.clear();
        if (index as usize) < seeds_len {
            input.extend_from_slice(&corpus[index as usize]);
        } else {
            let base = rng.below(corpus.len());
            input.extend_from_slice(&corpus[base]);
            let other = &corpus[rng.below(corpus.len())];
            let json_done = target.json && rng.one_in(3) && mutate::json(&mut rng, &mut input, &keys, opts.max_len);
            if !json_done || rng.one_in(4) {
                mutate::bytes(&mut rng, &mut input, other, opts.max_len);
            }
        }

        fatal::in_flight(&input);
        watch.index.store(index, Relaxed);
        watch.started_ms.store(begun.elapsed().as_millis() as u64 + 1, Relaxed);
        let t0 = Instant::now();
        alloc::start();
        let outcome = std::panic::catch_unwind(|| (target.run)(&input));
        let peak = alloc::stop();
        let took = t0.elapsed();
        watch.started_ms.store(0, Relaxed);
        fatal::clear();

        report.inputs += 1;
        report.peak_bytes = report.peak_bytes.max(peak);
        report.slowest = report.slowest.max(took);
        let failure = match outcome {
            Ok(accepted) => {
                if accepted {
                    report.accepted += 1;
                    if corpus.len() < MAX_CORPUS && rng.one_in(64) {
                        corpus.push(input.clone());
                    }
                }
                (peak > opts.max_memory)
                    .then(|| format!("one input had {peak} bytes live at once; the bound is {}", opts.max_memory))
            }
            Err(_) => Some(LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default()),
        };
        if let Some(message) = failure {
            // One report and one saved input per place that failed (the
            // panic's location, or the memory bound); later ones are counted.
            let place = message.lines().next().unwrap_or_default().to_string();
            if let Some(c) = report.crashes.iter_mut().find(|c| c.place == place) {
                c.count += 1;
            } else {
                let saved = dir.join(format!("{:016x}", fnv(&input)));
                let _ = std::fs::write(&saved, &input);
                eprintln!(
                    "hookline-fuzz: CRASH in target {}: input {index} (seed {}), saved as {}:\n  {}",
                    target.name,
                    opts.seed,
                    saved.display(),
                    shorten(&message)
                );
                report.crashes.push(Crash { index, message, place, saved, count: 1 });
            }
        }
    }
    report.elapsed = begun.elapsed();
    report.corpus = corpus.len();
    std::panic::set_hook(previous_hook);
    watch.done.store(true, Relaxed);
    let _ = watchdog.join();
    // An empty directory is left out of the repository anyway; remove it.
    let _ = std::fs::remove_dir(&dir);
    report
}

/// A target's seeds: its corpus files, what the target makes, and its
/// saved regressions (so they stay covered and are mutated further).
fn seeds(target: &Target) -> Vec<Vec<u8>> {
    let mut s = targets::corpus_files(target.name);
    s.extend((target.seeds)());
    s.extend(targets::files(&regressions_dir().join(target.name)));
    if s.is_empty() {
        s.push(Vec::new());
    }
    s
}

/// Replays every file of `regressions/<target>/` through its target,
/// under the same guards as a run; the failures, as (file, message).
pub fn replay_regressions() -> Vec<(PathBuf, String)> {
    let mut failures = Vec::new();
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = info.to_string();
        }
    }));
    for target in targets::TARGETS {
        let dir = regressions_dir().join(target.name);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let Ok(input) = std::fs::read(&path) else { continue };
            alloc::start();
            let outcome = std::panic::catch_unwind(|| (target.run)(&input));
            let peak = alloc::stop();
            match outcome {
                Err(_) => failures.push((path, LAST_PANIC.lock().map(|m| m.clone()).unwrap_or_default())),
                Ok(_) if peak > Options::default().max_memory => {
                    failures.push((path, format!("{peak} bytes live at once")))
                }
                Ok(_) => {}
            }
        }
    }
    std::panic::set_hook(previous_hook);
    failures
}

/// `message` cut to its first 400 characters, for a terminal.
pub fn shorten(message: &str) -> String {
    match message.char_indices().nth(400) {
        Some((at, _)) => format!("{}… ({} bytes)", &message[..at], message.len()),
        None => message.to_string(),
    }
}

/// The process's peak resident set (`VmHWM`), in bytes, where Linux says.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// FNV-1a, 64 bits: names of saved inputs, per-target seeds.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guards are process-wide (the panic hook, the allocation
    /// counts): one test at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The short pass `make test` runs (through `cargo test --workspace`):
    /// every target for a few thousand inputs, no crash, no hang, within
    /// the memory bound; then every saved regression replayed.
    #[test]
    fn every_target_survives_a_short_pass_and_every_regression_replays() {
        let _one = serial();
        let failures = replay_regressions();
        assert!(failures.is_empty(), "saved regressions fail again: {failures:#?}");
        let inputs = std::env::var("HOOKLINE_FUZZ_TEST_INPUTS").ok().and_then(|n| n.parse().ok()).unwrap_or(20_000);
        let opts = Options { inputs, hang: Duration::from_secs(20), ..Options::default() };
        for target in targets::TARGETS {
            let r = run(target, &opts);
            assert_eq!(r.inputs, inputs, "{}", r.target);
            assert!(r.crashes.is_empty(), "target {} crashed: {:#?}", r.target, r.crashes);
            assert!(r.accepted > 0, "target {}: no input was accepted; the seeds do not reach the parser", r.target);
        }
    }

    #[test]
    fn a_panicking_target_is_reported_and_its_input_saved() {
        let _one = serial();
        static PANICKY: Target = Target {
            name: "selftest-panic",
            about: "panics on inputs that contain `!`",
            json: false,
            seeds: || vec![b"abc".to_vec()],
            run: |input| {
                assert!(!input.contains(&b'!'), "found a bang");
                true
            },
        };
        let dir = std::env::temp_dir().join(format!("hookline-fuzz-selftest-{}", std::process::id()));
        let opts = Options { inputs: 5_000, regressions: dir.clone(), ..Options::default() };
        let r = run(&PANICKY, &opts);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(r.crashes.len(), 1, "{r:?}");
        assert!(r.crashes[0].message.contains("found a bang"), "{r:?}");
        assert!(r.crashes[0].saved.starts_with(dir.join("selftest-panic")));
        // Deterministic: the same seed finds it at the same input.
        let again = run(&PANICKY, &opts);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(again.crashes[0].index, r.crashes[0].index);
    }

    #[test]
    fn an_input_past_the_memory_bound_is_a_crash() {
        let _one = serial();
        static HUNGRY: Target = Target {
            name: "selftest-memory",
            about: "holds 8 MiB at once",
            json: false,
            seeds: || vec![b"x".to_vec()],
            run: |input| std::hint::black_box(vec![input.len() as u8; 8 << 20]).len() > 1,
        };
        let dir = std::env::temp_dir().join(format!("hookline-fuzz-memtest-{}", std::process::id()));
        let opts = Options { inputs: 3, max_memory: 1 << 20, regressions: dir.clone(), ..Options::default() };
        let r = run(&HUNGRY, &opts);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(r.peak_bytes >= 8 << 20, "{r:?}");
        assert!(!r.crashes.is_empty() && r.crashes[0].message.contains("bytes live at once"), "{r:?}");
    }
}
