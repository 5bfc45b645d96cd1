#!/usr/bin/env bash
# The local AWS emulator for the AWS-backend tests: moto server (DynamoDB,
# DynamoDB Streams, SQS, EventBridge, KMS) from the repo venv, on a free
# loopback port, with each DynamoDB transaction isolated from the other
# requests on its tables (infra/moto_server.py says why).
#
#   infra/emulator.sh start     start it unless running; print its endpoint
#   infra/emulator.sh endpoint  print the endpoint of the running one
#   infra/emulator.sh stop      stop it (nothing to do if not running)
#
# Environment: VENV (default <repo>/.venv, made by `make venv`), EMULATOR_DIR
# (default <repo>/target/emulator: pid, port and log files).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
case "$VENV" in /*) ;; *) VENV="$ROOT/$VENV" ;; esac
DIR="${EMULATOR_DIR:-$ROOT/target/emulator}"
PID_FILE="$DIR/moto.pid"
PORT_FILE="$DIR/moto.port"
LOG_FILE="$DIR/moto.log"
HOST=127.0.0.1

die() { echo "emulator: $*" >&2; exit 1; }

# The pid of the running emulator, if its pid file names a live moto server
# (never another process that reused the pid).
running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE")"
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q moto_server || return 1
    echo "$pid"
}

# Whether moto answers HTTP on $1.
answers() {
    "$VENV/bin/python" - "$1" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/", timeout=1).read()
EOF
}

free_port() {
    "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

endpoint() {
    local pid port
    pid="$(running_pid)" || return 1
    port="$(cat "$PORT_FILE" 2>/dev/null)" || return 1
    answers "$port" || return 1
    echo "http://$HOST:$port"
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PID_FILE" "$PORT_FILE"
}

start() {
    if endpoint; then
        return 0
    fi
    stop # a stale pid file, or a process that no longer answers
    [[ -x "$VENV/bin/moto_server" ]] || die "$VENV/bin/moto_server not found: run \`make venv\` (moto[server] is in tests/python/requirements.txt)"
    mkdir -p "$DIR"
    local attempt port pid
    for attempt in 1 2 3; do
        port="$(free_port)"
        # moto_server with each transaction isolated from the other
        # requests on its tables (see infra/moto_server.py).
        nohup "$VENV/bin/python" "$ROOT/infra/moto_server.py" -H "$HOST" -p "$port" >"$LOG_FILE" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$PID_FILE"
        echo "$port" >"$PORT_FILE"
        for _ in $(seq 1 300); do
            if answers "$port"; then
                echo "http://$HOST:$port"
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break # died (e.g. the port was taken meanwhile)
            sleep 0.1
        done
        stop
        echo "emulator: moto did not start on port $port (try $attempt); log:" >&2
        tail -n 20 "$LOG_FILE" >&2 || true
    done
    die "could not start moto server"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    endpoint) endpoint || die "not running: run \`infra/emulator.sh start\`" ;;
    *) echo "usage: $0 start|stop|endpoint" >&2; exit 2 ;;
esac
