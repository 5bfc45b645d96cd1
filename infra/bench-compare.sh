#!/usr/bin/env bash
# Compare two builds of `hookline serve` on the same load: the BASE commit's
# hookline binary against the current tree's, both driven by the current
# tree's benchmark driver (its `bench` bin), interleaved round by round. The
# order alternates within rounds (odd rounds base then current, even rounds
# current then base) so that the machine's drift cancels out. Prints every
# run's raw figures, each figure's ratio current/base per round, and the
# median ratio per figure.
#
#   BASE=<commit> [ROUNDS=5] [ARGS="--events 20000 --rate 1000"] infra/bench-compare.sh
#   make bench-compare BASE=HEAD~20 ROUNDS=3 ARGS="--events 5000"
#
# Variables:
#   BASE              commit-ish to compare against (required)
#   ROUNDS            rounds, each one run of each build (default 5)
#   ARGS              passed through to the driver (not --bin: the script sets it)
#   BENCH_DRIVER_PKG  package holding the `bench` driver bin (default: the
#                     package of the current tree's Cargo metadata that has a
#                     bin named `bench`, e.g. hookline-tests or hookline-bench)
#   CARGO             cargo command (default cargo)
#   CARGO_TARGET_DIR  the current tree's target directory, as for any build;
#                     the base is built in its subdirectory bench-compare-base
#                     (override with BENCH_COMPARE_BASE_TARGET) so it does not
#                     thrash the current build
#   BENCH_COMPARE_WORKTREE  where the base's temporary `git worktree` goes
#                     (default ${TMPDIR:-/tmp}/hookline-bench-compare-base;
#                     removed at the end)
set -euo pipefail

: "${BASE:?BASE=<commit> is required (e.g. make bench-compare BASE=HEAD~20)}"
ROUNDS=${ROUNDS:-5}
ARGS=${ARGS:-}
CARGO=${CARGO:-cargo}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }
case " $ARGS " in *" --bin "*) echo "ARGS must not hold --bin: the script passes each build's hookline itself" >&2; exit 2 ;; esac

root=$(git rev-parse --show-toplevel)
cd "$root"
base_sha=$(git rev-parse --verify "$BASE^{commit}") || { echo "BASE '$BASE' is not a commit" >&2; exit 2; }
cur_desc="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo '+uncommitted changes')"

metadata=$("$CARGO" metadata --no-deps --format-version 1)
target_dir=$(printf '%s' "$metadata" | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
if [[ -z ${BENCH_DRIVER_PKG:-} ]]; then
  BENCH_DRIVER_PKG=$(printf '%s' "$metadata" | python3 -c '
import json, sys
pkgs = [p["name"] for p in json.load(sys.stdin)["packages"]
        if any(t["name"] == "bench" and "bin" in t["kind"] for t in p["targets"])]
if len(pkgs) != 1:
    sys.exit("expected one package with a bin named bench, found: %s (set BENCH_DRIVER_PKG)" % (pkgs or "none"))
print(pkgs[0])')
fi
base_target=${BENCH_COMPARE_BASE_TARGET:-$target_dir/bench-compare-base}
worktree=${BENCH_COMPARE_WORKTREE:-${TMPDIR:-/tmp}/hookline-bench-compare-base}
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/hookline-bench-compare.XXXXXX")

worktree_added=
cleanup() {
  [[ -z $worktree_added ]] || git -C "$root" worktree remove --force "$worktree" >/dev/null 2>&1 || true
  rm -rf "$run_dir"
}
trap cleanup EXIT

echo "== base    $BASE ($(git log -1 --format='%h %s' "$base_sha" | cut -c1-72))"
echo "== current $cur_desc (working tree $root)"
echo "== driver  $BENCH_DRIVER_PKG --bin bench (current tree), rounds $ROUNDS, args: ${ARGS:-(none)}"

# The base: a temporary worktree at BASE, built into its own target dir.
# (a worktree left at that path by an interrupted run is replaced; anything
# else there is left alone)
git worktree prune
if git worktree list --porcelain | grep -qxF "worktree $worktree"; then
  git worktree remove --force "$worktree"
elif [[ -e $worktree ]]; then
  echo "$worktree exists and is not a worktree of this repository; set BENCH_COMPARE_WORKTREE" >&2
  exit 2
fi
git worktree add --quiet --detach "$worktree" "$base_sha"
worktree_added=1
echo "== building base hookline (release) in $worktree, target $base_target"
(cd "$worktree" && CARGO_TARGET_DIR=$base_target "$CARGO" build --release -p hookline)
cp "$base_target/release/hookline" "$run_dir/hookline-base"

# The current tree: hookline alone first (as `make bench` does: built with
# the driver, the driver's features would be compiled into hookline), copied
# aside before the driver is built.
echo "== building current hookline (release), target $target_dir"
"$CARGO" build --release -p hookline
cp "$target_dir/release/hookline" "$run_dir/hookline-current"
echo "== building the driver ($BENCH_DRIVER_PKG --bin bench)"
"$CARGO" build --release -p "$BENCH_DRIVER_PKG" --bin bench
cp "$target_dir/release/bench" "$run_dir/bench"

# shellcheck disable=SC2206 # ARGS is split into words on purpose
driver_args=($ARGS)
run() { # run <round> <base|current>
  local out="$run_dir/round-$1-$2.txt"
  if ! "$run_dir/bench" --bin "$run_dir/hookline-$2" "${driver_args[@]}" >"$out" 2>&1; then
    echo "round $1, $2: the driver failed:" >&2
    head -n 20 "$out" >&2
    exit 1
  fi
}

# Figures are the driver's lines "<label, 18 columns><number> <unit> (...)";
# a figure is named by its label and unit. Throughput (units ending in /s)
# is better higher; everything else (ms, MB) better lower.
cat >"$run_dir/report.py" <<'EOF'
import os, re, statistics, sys

run_dir, rounds, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
SKIP = {"events", "extra subs", "metric"}

def figures(path):
    out = {}
    for line in open(path):
        label, rest = line[:18].strip(), line[18:]
        m = re.match(r"\s*(-?[0-9][0-9.]*)\s+([^(]+)", rest)
        if label and label not in SKIP and m:
            out[f"{label} ({m.group(2).strip()})"] = float(m.group(1))
    return out

def load(r):
    b = figures(os.path.join(run_dir, f"round-{r}-base.txt"))
    c = figures(os.path.join(run_dir, f"round-{r}-current.txt"))
    return b, c

def better(name):
    return "higher" if name.rstrip(")").endswith("/s") else "lower"

def ratio(c, b):
    return c / b if b else float("nan")

if mode == "round":
    b, c = load(rounds)
    order = "base, current" if rounds % 2 else "current, base"
    print(f"round {rounds} (ran {order})")
    print(f"  {'figure':<40} {'base':>12} {'current':>12} {'current/base':>13}")
    for k in b:
        if k in c:
            print(f"  {k:<40} {b[k]:>12.3f} {c[k]:>12.3f} {ratio(c[k], b[k]):>13.3f}")
    sys.stdout.flush()
else:
    per = [load(r) for r in range(1, rounds + 1)]
    names = [k for k in per[0][0] if all(k in b and k in c for b, c in per)]
    print(f"median over {rounds} rounds (ratio current/base; >1 is better where higher is better)")
    print(f"  {'figure':<40} {'better':>6} {'base median':>12} {'cur. median':>12} {'median ratio':>13}   per-round ratios")
    for k in names:
        rs = [ratio(c[k], b[k]) for b, c in per]
        print(f"  {k:<40} {better(k):>6} {statistics.median(b[k] for b, _ in per):>12.3f} "
              f"{statistics.median(c[k] for _, c in per):>12.3f} {statistics.median(rs):>13.3f}   "
              + " ".join(f"{x:.3f}" for x in rs))
EOF

for r in $(seq 1 "$ROUNDS"); do
  if ((r % 2)); then run "$r" base; run "$r" current; else run "$r" current; run "$r" base; fi
  python3 "$run_dir/report.py" "$run_dir" "$r" round
done
echo
python3 "$run_dir/report.py" "$run_dir" "$ROUNDS" summary
