#!/usr/bin/env bash
# Every test of the workspace, as `cargo test --workspace --locked` runs
# them, except that the two backend suites run side by side: the AWS one
# (tests/tests/aws) spends its time waiting for the emulator, a Python
# process that uses at most one core, while the serve one (tests/tests/serve)
# waits for its `hookline serve` processes. `cargo test` would run them one
# after the other (and holds the build directory's lock while it runs
# tests), so the test binaries `cargo test --workspace --no-run` built are
# run directly, each from its package's directory as cargo would, with its
# output prefixed by its target's name (`[aws]`, `[serve]`, ...); the
# doctests run through `cargo test --doc`. Extra arguments go to every test
# binary (e.g. `--test-threads 2`).
#
# - The AWS suite is split into one shard per emulator named in
#   HOOKLINE_TEST_EMULATORS (space-separated endpoints; default: the one of
#   AWS_ENDPOINT_URL): its tests dealt round-robin by name, each shard a run
#   of the same binary with its own AWS_ENDPOINT_URL (`[aws 1/2]`, ...). One
#   emulator is one core at most, so two of them halve the suite's wait on
#   a 2-core machine. Every test creates its own resources under its own
#   prefix, so which emulator runs it changes nothing.
# - With OUTSIDE_CHECKS=1 (`make test`), the checks from outside that need
#   only `hookline serve` (tests/contract/run.sh quick, tests/browser/run.sh)
#   run as soon as the serve suite is done, beside the AWS shards.
#
# Needs the environment `make test` sets (the emulator's AWS_* variables,
# HOOKLINE_TEST_PYTHON, VENV) and the `hookline` binary built with
# failpoints.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
PYTHON="${PYTHON:-python3}"

artifacts="$(mktemp)"
private="$(mktemp -d)"
trap 'rm -rf "$artifacts" "$private"' EXIT

# The executables of cargo's JSON messages in file `$1` that are tests
# (`test`) or the `hookline` binary (`hookline`), by `$2`.
executables() {
    "$PYTHON" -c '
import json, os, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if sys.argv[2] == "test" and m.get("profile", {}).get("test"):
        print(m["target"]["name"], os.path.dirname(m["manifest_path"]), m["executable"])
    elif sys.argv[2] == "hookline" and m["target"]["name"] == "hookline" and "bin" in m["target"]["kind"]:
        print(m["executable"])
' "$@"
}

# The `hookline` binary the serve suite runs (with failpoints), copied
# aside at once: a build directory shared with other checkouts may get
# another `hookline` written over it while the tests run.
if [[ -z "${HOOKLINE_BIN:-}" ]]; then
    "$CARGO" build -p hookline --features failpoints --locked --message-format=json-render-diagnostics >"$artifacts" || exit 1
    built="$(executables "$artifacts" hookline | tail -1)"
    cp "$built" "$private/hookline" || exit 1
    export HOOKLINE_BIN="$private/hookline"
fi

"$CARGO" test --workspace --locked --no-run --message-format=json-render-diagnostics >"$artifacts" || exit 1

# Runs the test binary `$3` from the package directory `$2` (as cargo
# does), its lines prefixed with `[$1]`; the rest of the arguments go to it.
suite() {
    local name="$1" dir="$2" bin="$3"
    shift 3
    (cd "$dir" && "$bin" "$@" </dev/null 2>&1) | sed -u "s|^|[$name] |"
    return "${PIPESTATUS[0]}"
}

# The AWS suite's tests, dealt round-robin into `$1` shards: shard `$2`'s
# names (0-based), one per line.
shard_names() {
    local n="$1" k="$2" bin="$3" dir="$4"
    (cd "$dir" && "$bin" --list --format terse 2>/dev/null) | sed -n 's/: test$//p' | sort | awk -v n="$n" -v k="$k" 'NR % n == k'
}

read -r -a emulators <<<"${HOOKLINE_TEST_EMULATORS:-${AWS_ENDPOINT_URL:-}}"
[[ ${#emulators[@]} -ge 1 ]] || emulators=("")

status=0
pids=()
suites=0
while read -r name dir bin; do
    if [[ "$dir" == */tests && "$name" == aws ]]; then
        suites=$((suites + 1))
        shards=${#emulators[@]}
        for ((k = 0; k < shards; k++)); do
            mapfile -t names < <(shard_names "$shards" "$k" "$bin" "$dir")
            [[ ${#names[@]} -gt 0 ]] || continue
            AWS_ENDPOINT_URL="${emulators[$k]}" suite "aws $((k + 1))/$shards" "$dir" "$bin" --exact "${names[@]}" "$@" &
            pids+=($!)
        done
    elif [[ "$dir" == */tests && "$name" == serve ]]; then
        suites=$((suites + 1))
        if [[ "${OUTSIDE_CHECKS:-0}" == 1 ]]; then
            (
                st=0
                suite "$name" "$dir" "$bin" "$@" || st=1
                VENV="${VENV:-.venv}" HOOKLINE_BIN="$HOOKLINE_BIN" tests/contract/run.sh quick 2>&1 | sed -u "s/^/[contract] /"
                [[ ${PIPESTATUS[0]} -eq 0 ]] || st=1
                VENV="${VENV:-.venv}" HOOKLINE_BIN="$HOOKLINE_BIN" tests/browser/run.sh 2>&1 | sed -u "s/^/[browser] /"
                [[ ${PIPESTATUS[0]} -eq 0 ]] || st=1
                exit $st
            ) &
        else
            suite "$name" "$dir" "$bin" "$@" &
        fi
        pids+=($!)
    else
        suite "$name" "$dir" "$bin" "$@" || status=1
    fi
done < <(executables "$artifacts" test)
[[ $suites -eq 2 ]] || { echo "run.sh: expected the aws and serve suites, found $suites" >&2; status=1; }
# The documentation tests, as `cargo test --workspace` runs them last.
"$CARGO" test --workspace --locked --doc || status=1
for pid in "${pids[@]}"; do
    wait "$pid" || status=1
done
if [[ $status -eq 0 ]]; then echo "run.sh: every suite passed"; else echo "run.sh: FAILED" >&2; fi
exit $status
