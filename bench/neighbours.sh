#!/usr/bin/env bash
# The noisy-neighbour bound, measured the way it is stated: in each round the
# healthy subscription alone, then beside a hung neighbour, then beside a
# failing one, each ratio taken against the same round's run alone (the
# machine's speed drifts between rounds by more than the bound's margin).
# Prints every round and the median ratios.
#
#   bench/neighbours.sh ROUNDS BENCH [bench args...]
#   (make bench-neighbours ROUNDS=5 ARGS="--events 20000")
set -euo pipefail
rounds=${1:?rounds}
bench=${2:?path to the bench binary}
shift 2

# deliveries/s and p99 (ms) of one bench run; a failed run stops the
# script with the bench's first lines.
run() {
  local out
  if ! out=$("$bench" "$@" 2>&1); then
    printf 'bench %s failed:\n%s\n' "$*" "$(printf '%s\n' "$out" | head -n 5)" >&2
    exit 1
  fi
  printf '%s\n' "$out" | awk '/^end-to-end/ {r=$2} /^latency p99/ {p=$3} END {
    if (r == "" || p == "") exit 1; print r, p }'
}

median() { sort -n | awk '{v[NR]=$1} END { if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2 }'; }

hang=() fail=()
printf '%-6s %-22s %-32s %-32s\n' round alone "hung neighbour" "failing neighbour"
for i in $(seq 1 "$rounds"); do
  alone=$(run "$@") || exit 1
  hung=$(run "$@" --neighbour hang) || exit 1
  failing=$(run "$@" --neighbour fail) || exit 1
  read -r r0 p0 <<<"$alone"
  read -r rh ph <<<"$hung"
  read -r rf pf <<<"$failing"
  h=$(awk -v a="$r0" -v b="$rh" 'BEGIN { printf "%.1f", 100 * b / a }')
  f=$(awk -v a="$r0" -v b="$rf" 'BEGIN { printf "%.1f", 100 * b / a }')
  hang+=("$h") fail+=("$f")
  printf '%-6s %-22s %-32s %-32s\n' "$i" "$r0/s p99 ${p0} ms" \
    "$rh/s ($h %) p99 $(awk -v a="$p0" -v b="$ph" 'BEGIN { printf "%.2f", b / a }')x" \
    "$rf/s ($f %) p99 $(awk -v a="$p0" -v b="$pf" 'BEGIN { printf "%.2f", b / a }')x"
done
under() { awk '$1 < 80 { n++ } END { print n + 0 }'; }
echo "hung neighbour:    median $(printf '%s\n' "${hang[@]}" | median) % of alone; $(printf '%s\n' "${hang[@]}" | under) of $rounds rounds under 80 %"
echo "failing neighbour: median $(printf '%s\n' "${fail[@]}" | median) % of alone; $(printf '%s\n' "${fail[@]}" | under) of $rounds rounds under 80 %"
