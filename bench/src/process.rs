//! What `/proc` says of a measured process (Linux): its CPU time and its
//! memory, shared by the benchmarks that watch a `hookline serve` process
//! (`#[path]`-included: the benchmark crate has no library).

/// User plus system CPU seconds of process `pid` so far (`/proc/<pid>/stat`,
/// in clock ticks of 1/100 s, Linux's USER_HZ).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// A `kB` line of `/proc/<pid>/status` (`VmHWM`, `VmRSS`).
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.trim_start_matches(':').split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
