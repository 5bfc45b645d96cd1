//! `hookline-fuzz`: runs the fuzz targets and prints, per target, the
//! inputs run, the time, inputs per second, the most memory one input
//! held, the slowest input and the crashes; exits non-zero on a crash.
//!
//! ```text
//! cargo run --profile fuzz -p hookline-fuzz -- [--inputs N] [--target NAME]... [--seed N]
//!     [--max-len BYTES] [--hang-ms MS] [--max-memory BYTES] [--list]
//! ```

use std::time::Duration;

use hookline_fuzz::targets::{by_name, TARGETS};
use hookline_fuzz::{peak_rss, run, Options};

fn main() {
    let mut opts = Options::default();
    let mut names: Vec<String> = Vec::new();
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

fn fail(message: &str) -> ! {
    eprintln!("hookline-fuzz: {message}");
    std::process::exit(2)
}
