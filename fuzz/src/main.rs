//! `hookline-fuzz`: runs the fuzz targets and prints, per target, the
//! inputs run, the time, inputs per second, the most memory one input
//! held, the slowest input and the crashes; exits non-zero on a crash.
//!
//! ```text
//! cargo run --profile fuzz -p hookline-fuzz -- [--inputs N] [--target NAME]... [--seed N]
//!     [--max-len BYTES] [--hang-ms MS] [--max-memory BYTES] [--regressions DIR] [--list]
//! ```
//!
//! `--selftest hang|stack|memory` runs a target that hangs, overflows its
//! stack or allocates past the hard cap, to show (tests/fatal.rs) that each
//! ends the run with a report and the input saved.

use std::time::Duration;

use hookline_fuzz::targets::{by_name, Target, TARGETS};
use hookline_fuzz::{peak_rss, run, Options};

fn main() {
    let mut opts = Options::default();
    let mut names: Vec<String> = Vec::new();
    let mut selftest_name = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().unwrap_or_else(|| fail(&format!("{name} needs a value")));
        let number = |name: &str, v: String| {
            v.replace('_', "").parse::<u64>().unwrap_or_else(|_| fail(&format!("{name}: not a number: {v}")))
        };
        match arg.as_str() {
            "--inputs" => opts.inputs = number("--inputs", value("--inputs")),
            "--seed" => opts.seed = number("--seed", value("--seed")),
            "--max-len" => opts.max_len = number("--max-len", value("--max-len")) as usize,
            "--hang-ms" => opts.hang = Duration::from_millis(number("--hang-ms", value("--hang-ms"))),
            "--max-memory" => opts.max_memory = number("--max-memory", value("--max-memory")) as usize,
            "--target" => names.push(value("--target")),
            "--regressions" => opts.regressions = value("--regressions").into(),
            "--selftest" => selftest_name = Some(value("--selftest")),
            "--list" => {
                for t in TARGETS {
                    println!("{:<10} {}", t.name, t.about);
                }
                return;
            }
            "-h" | "--help" => {
                println!(
                    "hookline-fuzz [--inputs N (1000000)] [--target NAME]... [--seed N (1)] [--max-len BYTES (65536)] \
                     [--hang-ms MS (2000)] [--max-memory BYTES (67108864)] [--list]"
                );
                return;
            }
            other => fail(&format!("unknown argument {other}; see --help")),
        }
    }
    if let Some(name) = selftest_name {
        let r = run(selftest(&name), &opts);
        println!("{} survived {} inputs", r.target, r.inputs);
        return;
    }
    let targets: Vec<_> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names.iter().map(|n| by_name(n).unwrap_or_else(|| fail(&format!("no target {n}; see --list")))).collect()
    };
    println!(
        "seed {}, {} inputs per target, inputs up to {} bytes, hang limit {:?}, memory bound {} MiB per input",
        opts.seed,
        opts.inputs,
        opts.max_len,
        opts.hang,
        opts.max_memory >> 20
    );
    println!(
        "{:<10} {:>10} {:>10} {:>9} {:>10} {:>13} {:>11} {:>7} {:>8}",
        "target", "inputs", "accepted", "time s", "inputs/s", "peak/input", "slowest ms", "corpus", "crashes"
    );
    let mut crashed = false;
    for t in targets {
        let r = run(t, &opts);
        println!(
            "{:<10} {:>10} {:>10} {:>9.1} {:>10.0} {:>10} KiB {:>11.1} {:>7} {:>8}",
            r.target,
            r.inputs,
            r.accepted,
            r.elapsed.as_secs_f64(),
            r.inputs as f64 / r.elapsed.as_secs_f64().max(1e-9),
            r.peak_bytes.div_ceil(1024),
            r.slowest.as_secs_f64() * 1000.0,
            r.corpus,
            r.crashes.len()
        );
        for c in &r.crashes {
            println!(
                "  {} input(s) crashed, first at input {} (seed {}): {}\n    saved as {}",
                c.count,
                c.index,
                opts.seed,
                hookline_fuzz::shorten(&c.message),
                c.saved.display()
            );
        }
        crashed |= !r.crashes.is_empty();
    }
    if let Some(rss) = peak_rss() {
        println!("process peak RSS: {} MiB", rss >> 20);
    }
    if crashed {
        std::process::exit(1);
    }
}

/// A target that ends the run fatally, one way each.
fn selftest(name: &str) -> &'static Target {
    static HANG: Target = Target {
        name: "selftest-hang",
        about: "never returns",
        json: false,
        seeds: || vec![b"hang".to_vec()],
        run: |_| loop {
            std::thread::sleep(Duration::from_millis(10));
        },
    };
    static STACK: Target = Target {
        name: "selftest-stack",
        about: "recurses without end",
        json: false,
        seeds: || vec![b"stack".to_vec()],
        run: |input| deep(input, 0) > 0,
    };
    static MEMORY: Target = Target {
        name: "selftest-memory",
        about: "allocates past the hard cap",
        json: false,
        seeds: || vec![b"memory".to_vec()],
        run: |input| {
            std::hint::black_box(Vec::<u8>::with_capacity(hookline_fuzz::alloc::HARD_CAP + input.len())).capacity() > 0
        },
    };
    match name {
        "hang" => &HANG,
        "stack" => &STACK,
        "memory" => &MEMORY,
        other => fail(&format!("no self-test {other}: hang, stack or memory")),
    }
}

/// Recursion with a frame the optimizer keeps.
fn deep(input: &[u8], depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 512]);
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    deep(input, depth + 1) + u64::from(frame[input.len() % 512])
}

fn fail(message: &str) -> ! {
    eprintln!("hookline-fuzz: {message}");
    std::process::exit(2)
}
