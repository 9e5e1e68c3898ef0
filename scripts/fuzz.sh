#!/usr/bin/env bash
# Runs every fuzz target (crates/golive/src/fuzz.rs) for a fixed number of mutated inputs
# seeded from the real files in ../shared; stops at the first panic, hang or runaway
# allocation with the minimised input in target/fuzz-findings/.
#
#   scripts/fuzz.sh [ITERATIONS] [SEED] [TARGET...]     (default 10000000, seed 1, all targets)
#
# Env: SHARED (default ../shared), JOBS (targets run at once, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${1:-10000000}
SEED=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
SHARED=${SHARED:-../shared}
JOBS=${JOBS:-1}
[[ -d $SHARED ]] || echo "fuzz: $SHARED is absent; seeds come from the test fixtures only" >&2
cargo build --release -p golive --example fuzz
bin=target/release/examples/fuzz
targets=("$@")
(( ${#targets[@]} )) || mapfile -t targets < <("$bin" list)
mkdir -p target/fuzz-findings
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} \
  "$bin" {} "$ITERS" "$SEED" "$SHARED" target/fuzz-findings
