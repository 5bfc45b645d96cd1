#!/usr/bin/env bash
# Cold-start and size check of the six Lambda bootstraps: builds them in
# release, then starts each against a local Lambda Runtime API and times
# spawn -> first GET /runtime/invocation/next (targets: <= 20 ms, <= 8 MB).
# See bench/src/bin/cold_start.rs.
#
#   infra/coldstart.sh                      # target/release, 20 runs each
#   infra/coldstart.sh --runs 50 --only ingest,api
#   infra/coldstart.sh --dir target/lambda  # cargo-lambda layout (<name>/bootstrap), not rebuilt
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
  *" --dir "*) ;;
  *) cargo build --release -p ingest -p router -p saga -p delivery -p requeue -p api ;;
esac
exec cargo run --release -q -p hookline-bench --bin cold_start -- "$@"
