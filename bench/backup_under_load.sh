#!/usr/bin/env bash
# What `hookline backup` costs a running `hookline serve`: the benchmark
# driver (`bench`, paced at RATE events/s) run ROUNDS times in pairs,
# interleaved: once alone, once with `hookline backup` of its database taken
# back to back for the whole run (each copy deleted once written). Prints
# each run's figures, the with/without ratios per round and their medians,
# and the backups' own figures (size, time, snapshot).
#
#   cargo build --release -p hookline -p hookline-bench
#   ROUNDS=5 EVENTS=20000 RATE=1000 bench/backup_under_load.sh
#
# BENCH and HOOKLINE name the binaries (default: target/release/…, or under
# CARGO_TARGET_DIR).
set -euo pipefail

target=${CARGO_TARGET_DIR:-target}
BENCH=${BENCH:-$target/release/bench}
HOOKLINE=${HOOKLINE:-$target/release/hookline}
ROUNDS=${ROUNDS:-3}
EVENTS=${EVENTS:-20000}
RATE=${RATE:-1000}
for b in "$BENCH" "$HOOKLINE"; do
    [ -x "$b" ] || { echo "$b missing: cargo build --release -p hookline -p hookline-bench" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The figure of one bench output: the first number on the line starting with $2.
figure() { awk -v k="$2" 'index($0, k) == 1 { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' "$1"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for r in $(seq 1 "$ROUNDS"); do
    for mode in alone backups; do
        marker="$out/marker-$r-$mode"
        touch "$marker"
        "$BENCH" --bin "$HOOKLINE" --events "$EVENTS" --rate "$RATE" >"$out/$r-$mode.txt" &
        pid=$!
        if [ "$mode" = backups ]; then
            db=""
            while [ -z "$db" ] && kill -0 "$pid" 2>/dev/null; do
                db=$(find "${TMPDIR:-/tmp}" -maxdepth 2 -path '*/hookline-test-bench-*/bench.db' -newer "$marker" 2>/dev/null | head -1)
                [ -n "$db" ] || sleep 0.05
            done
            n=0
            while kill -0 "$pid" 2>/dev/null; do
                if "$HOOKLINE" backup --db "$db" --out "$out/copy.db" -o json >"$out/$r-backup-$n.json" 2>/dev/null; then
                    n=$((n + 1))
                fi
                rm -f "$out/copy.db"
            done
            echo "round $r: $n backups during the run"
        fi
        wait "$pid"
        echo "round $r, $mode:"
        sed 's/^/    /' "$out/$r-$mode.txt"
    done
done

echo
echo "with backups / alone, per round (lower is better for p99 and CPU, higher for deliveries/s):"
for key in "latency p99" "end-to-end" "hookline CPU"; do
    ratios=""
    for r in $(seq 1 "$ROUNDS"); do
        a=$(figure "$out/$r-alone.txt" "$key")
        b=$(figure "$out/$r-backups.txt" "$key")
        ratios="$ratios $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')"
    done
    printf '  %-14s %s   median %s\n' "$key" "$ratios" "$(echo "$ratios" | tr ' ' '\n' | grep . | median)"
done
shopt -s nullglob
backups=("$out"/*-backup-*.json)
if [ ${#backups[@]} -gt 0 ]; then
    field() { for f in "${backups[@]}"; do sed -n "s/^  \"$1\": \([0-9]*\).*/\1/p" "$f"; done | median; }
    echo "backups: ${#backups[@]} taken; median size $(field bytes) bytes, $(field events) events," \
        "took $(field took_ms) ms, of which the snapshot (read transaction) $(field snapshot_ms) ms"
fi
