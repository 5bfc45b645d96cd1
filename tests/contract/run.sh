#!/usr/bin/env bash
# The API's contract checked from outside, against a running `hookline
# serve` (a temporary database, a known admin key, `--dev` so callbacks may
# go to loopback receivers) and two `hookline listen` receivers (one
# answering 200, one 500 to make dead letters):
#
# 1. schemathesis (PyPI, pinned in tests/python/requirements.txt) fuzzes
#    every operation of the document the server serves (GET /openapi.json),
#    its examples, the coverage and fuzzing phases and the stateful phase
#    that follows the document's links (create a subscription, then read,
#    change, delete it; post an event, then read it...), with the checks
#    not_a_server_error, status_code_conformance,
#    response_schema_conformance and content_type_conformance; prints its
#    figures (operations, test cases, failures);
# 2. a Python client generated from docs/openapi.json by
#    openapi-python-client (into a temporary directory, never committed)
#    runs the README walk-through (tests/contract/walkthrough.py).
#
# Usage: tests/contract/run.sh [quick|long] (quick: the bounded run of
# `make test`, a fixed seed, MAX_EXAMPLES per operation; long: `make
# schemathesis`, more examples and a random seed). Environment: VENV (the
# repo-local venv, .venv), HOOKLINE_BIN (default: the debug build in
# CARGO_TARGET_DIR or target/), MAX_EXAMPLES, SEED, SCHEMATHESIS_ARGS (more
# arguments for schemathesis), CONTRACT_STEPS (`fuzz client`, the default).
set -uo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-quick}"
VENV="$(cd "${VENV:-.venv}" && pwd)" || { echo "contract: no venv (make venv)" >&2; exit 1; }
HOOKLINE_BIN="${HOOKLINE_BIN:-${CARGO_TARGET_DIR:-target}/debug/hookline}"
STEPS="${CONTRACT_STEPS:-fuzz client}"
case "$mode" in
    quick) MAX_EXAMPLES="${MAX_EXAMPLES:-10}"; SEED="${SEED:-25}"; BUDGET=480 ;;
    long) MAX_EXAMPLES="${MAX_EXAMPLES:-200}"; SEED="${SEED:-$RANDOM}"; BUDGET=3600 ;;
    *) echo "usage: $0 [quick|long]" >&2; exit 2 ;;
esac
[[ -x "$HOOKLINE_BIN" ]] || { echo "contract: no hookline binary at $HOOKLINE_BIN (make build)" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# A free loopback port.
port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits until `$1` answers (at most 30 s).
wait_for() {
    for _ in $(seq 300); do
        "$VENV/bin/python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "contract: $1 did not answer" >&2
    return 1
}

api_port=$(port); ok_port=$(port); fail_port=$(port)
export HOOKLINE_API_KEY="hlk_contract_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
"$HOOKLINE_BIN" listen --listen "127.0.0.1:$ok_port" >"$work/ok.log" 2>&1 &
pids+=($!)
"$HOOKLINE_BIN" listen --listen "127.0.0.1:$fail_port" --status 500 >"$work/fail.log" 2>&1 &
pids+=($!)
"$HOOKLINE_BIN" serve --dev --listen "127.0.0.1:$api_port" --db "$work/hookline.db" >"$work/serve.log" 2>&1 &
pids+=($!)
base="http://127.0.0.1:$api_port"
wait_for "$base/healthz" || { cat "$work/serve.log" >&2; exit 1; }
echo "contract: hookline serve at $base, receivers at :$ok_port (200) and :$fail_port (500)"

# Data for the stateful phase to start from: a subscription to each
# receiver (the failing one dead-letters at once), events for both, so the
# listings have items whose ids the document's links pass on.
"$VENV/bin/python" - "$base" "$HOOKLINE_API_KEY" "http://127.0.0.1:$ok_port/seed" "http://127.0.0.1:$fail_port/seed" <<'PY' || exit 1
import json, sys, urllib.request
base, key, ok, failing = sys.argv[1:]
def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
post("/v1/subscriptions", {"callback_url": ok, "event_types": ["*"]})
post("/v1/subscriptions", {"callback_url": failing, "event_types": ["seed.*"], "dead_letter_on": [500]})
for n in range(5):
    post("/v1/events", {"type": "seed.created", "data": {"n": n}, "partition_key": f"seed:{n}"})
PY

status=0
for step in $STEPS; do
    case "$step" in
    fuzz)
        echo "contract: schemathesis ($mode: at most $MAX_EXAMPLES examples per operation, seed $SEED)"
        # shellcheck disable=SC2086
        # Run from the temporary directory: schemathesis and Hypothesis
        # keep their caches (.schemathesis/, .hypothesis/) in the current one.
        (cd "$work" && CONTRACT_RECEIVERS="http://127.0.0.1:$ok_port/fuzz http://127.0.0.1:$fail_port/fuzz" \
            PYTHONPATH="$OLDPWD/tests/contract" SCHEMATHESIS_HOOKS=hooks \
            timeout "$BUDGET" "$VENV/bin/schemathesis" run "$base/openapi.json" \
            --url "$base" \
            -H "Authorization: Bearer $HOOKLINE_API_KEY" \
            --checks not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance \
            --phases examples,coverage,fuzzing,stateful \
            --max-examples "$MAX_EXAMPLES" --seed "$SEED" \
            --workers 2 --request-timeout 20 --suppress-health-check all \
            --report junit,ndjson --report-dir "$work/report" \
            --no-color ${SCHEMATHESIS_ARGS:-}) || status=1
        "$VENV/bin/python" tests/contract/figures.py "$work/report" || status=1
        ;;
    client)
        echo "contract: generating a Python client from docs/openapi.json (openapi-python-client)"
        "$VENV/bin/openapi-python-client" generate --path docs/openapi.json --meta none --config tests/contract/client.yaml \
            --output-path "$work/client/hookline_client" >"$work/generate.log" 2>&1 \
            || { cat "$work/generate.log" >&2; status=1; continue; }
        grep -i -A3 "warning" "$work/generate.log" && { echo "contract: the generator warned about docs/openapi.json" >&2; status=1; }
        PYTHONPATH="$work/client" timeout 300 "$VENV/bin/python" tests/contract/walkthrough.py \
            --url "$base" --key "$HOOKLINE_API_KEY" \
            --receiver "http://127.0.0.1:$ok_port/hooks" --failing "http://127.0.0.1:$fail_port/hooks" || status=1
        ;;
    *) echo "contract: unknown step $step" >&2; status=1 ;;
    esac
done
if ! kill -0 "${pids[2]}" 2>/dev/null; then
    echo "contract: hookline serve died:" >&2; tail -50 "$work/serve.log" >&2; status=1
fi
if grep -q "panicked" "$work/serve.log"; then
    echo "contract: hookline serve panicked:" >&2; grep -A5 "panicked" "$work/serve.log" >&2; status=1
fi
if [[ $status -eq 0 ]]; then echo "contract: passed"; else echo "contract: FAILED" >&2; fi
exit $status
