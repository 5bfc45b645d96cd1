#!/usr/bin/env bash
# The console's browser tests (tests/browser/test_*.py, pytest with
# Playwright for Python driving the system's Chromium) against a real
# `hookline serve --dev` each run starts on a free port in a temporary
# directory (conftest.py). Bounded: the whole step is stopped after
# BROWSER_BUDGET seconds (default 170).
#
# Usage: tests/browser/run.sh [pytest arguments, e.g. -k portal]
# Environment: VENV (the repo-local venv, .venv), HOOKLINE_BIN (default:
# the debug build in CARGO_TARGET_DIR or target/), CHROMIUM (default
# /usr/bin/chromium), HOOKLINE_SCREENSHOTS=1 to rewrite docs/screenshots/.
set -uo pipefail
cd "$(dirname "$0")/../.."
VENV="$(cd "${VENV:-.venv}" && pwd)" || { echo "browser: no venv (make venv)" >&2; exit 1; }
export HOOKLINE_BIN="${HOOKLINE_BIN:-${CARGO_TARGET_DIR:-target}/debug/hookline}"
case "$HOOKLINE_BIN" in /*) ;; *) HOOKLINE_BIN="$(pwd)/$HOOKLINE_BIN" ;; esac
[[ -x "$HOOKLINE_BIN" ]] || { echo "browser: no hookline binary at $HOOKLINE_BIN (make build)" >&2; exit 1; }
CHROMIUM="$(infra/chromium.sh ensure)" || exit 1
export CHROMIUM
echo "browser: $("$CHROMIUM" --version 2>/dev/null | tail -1) against $HOOKLINE_BIN"
timeout "${BROWSER_BUDGET:-170}" "$VENV/bin/python" -m pytest tests/browser -q -p no:cacheprovider "$@"
status=$?
[[ $status -eq 124 ]] && echo "browser: stopped after ${BROWSER_BUDGET:-170} s" >&2
exit $status
