#!/usr/bin/env bash
# Every test of the workspace, as `cargo test --workspace --locked` runs
# them, except that the two backend suites run side by side: the AWS one
# (tests/tests/aws) spends its time waiting for the emulator, a single
# Python process, while the serve one (tests/tests/serve) waits for its
# `hookline serve` processes, so on a small machine together they take
# little longer than the AWS one alone. `cargo test` would run them one
# after the other (and holds the build directory's lock while it runs
# tests), so the test binaries `cargo test --workspace --no-run` built are
# run directly, each from its package's directory as cargo would, with its
# output prefixed by its target's name (`[aws]`, `[serve]`, ...); the
# doctests then run through `cargo test --doc`. Extra arguments go to
# every test binary (e.g. `--test-threads 2`).
#
# Needs the environment `make test` sets (the emulator's AWS_* variables,
# HOOKLINE_TEST_PYTHON) and the `hookline` binary built with failpoints.
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
    (cd "$dir" && "$bin" "$@" </dev/null 2>&1) | sed -u "s/^/[$name] /"
    return "${PIPESTATUS[0]}"
}

status=0
pids=()
while read -r name dir bin; do
    if [[ "$dir" == */tests && ( "$name" == aws || "$name" == serve ) ]]; then
        suite "$name" "$dir" "$bin" "$@" &
        pids+=($!)
    else
        suite "$name" "$dir" "$bin" "$@" || status=1
    fi
done < <(executables "$artifacts" test)
[[ ${#pids[@]} -eq 2 ]] || { echo "run.sh: expected the aws and serve suites, found ${#pids[@]}" >&2; status=1; }
# The documentation tests, as `cargo test --workspace` runs them last.
"$CARGO" test --workspace --locked --doc || status=1
for pid in "${pids[@]}"; do
    wait "$pid" || status=1
done
if [[ $status -eq 0 ]]; then echo "run.sh: every suite passed"; else echo "run.sh: FAILED" >&2; fi
exit $status
