#!/usr/bin/env bash
# Production-like triage benchmark: three >= 1 GiB logs built from the real logs in ../shared
# (healthy serving logs repeated, a crash loop, a multi-rank interleaved log), each with a real
# failure at the end. Reports MB/s and peak RSS of `golive triage` and of `rg` searching the
# same file in the same run, and the golive/rg time ratio.
#
#   scripts/bench-triage.sh [MIB]        (default 1100; inputs cached in $BENCH_DIR)
#
# Env: BENCH_DIR (default /tmp/golive-bench), GOLIVE (default target/release/golive),
#      SHARED (default ../shared), RUNS (best of N, default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1100}
BENCH_DIR=${BENCH_DIR:-/tmp/golive-bench}
SHARED=${SHARED:-../shared}
GOLIVE=${GOLIVE:-target/release/golive}
RUNS=${RUNS:-3}
if [[ ! -f $SHARED/long/INDEX.tsv || ! -f $SHARED/corpus/010.log ]]; then
  echo "bench-triage: $SHARED/long or $SHARED/corpus is absent; skipping" >&2
  exit 0
fi
command -v rg >/dev/null || { echo "bench-triage: rg not installed (apt-get install ripgrep)" >&2; exit 1; }
[[ -x $GOLIVE ]] || cargo build --release -p golive-cli
python3 scripts/bench-triage-gen.py "$SHARED" "$BENCH_DIR" "$MIB"

# The words golive looks for: every rule literal plus the traceback anchors (all of them, so
# rg does the same search work), and the six common words of the issue's first measurement.
python3 - "$BENCH_DIR/anchors.txt" <<'PY'
import sys, tomllib
rules = tomllib.load(open("crates/golive/src/triage/rules.toml", "rb"))["rule"]
lits = sorted({p for r in rules for p in r.get("patterns", [])})
lits += ["Traceback (most recent call last)", "File \"", "Exception ignored in"]
open(sys.argv[1], "w").write("\n".join(lits) + "\n")
PY
printf '%s\n' Error error Traceback NCCL CUDA memory >"$BENCH_DIR/six.txt"
nanch=$(wc -l <"$BENCH_DIR/anchors.txt")

# best-of-N wall seconds and max RSS (KiB) of a command; stdout to $3
measure() {
  local out=$1; shift
  local best="" rss=0
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f '%e %M' -o "$BENCH_DIR/time.txt" "$@" >"$out" 2>/dev/null || true
    read -r t m < <(tail -n 1 "$BENCH_DIR/time.txt")
    if [[ -z $best ]] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    (( m > rss )) && rss=$m
  done
  echo "$best $rss"
}

printf '| %-14s | %8s | %-28s | %9s | %8s | %9s | %8s | %9s | %8s | %s |\n' \
  input MiB "golive answer" "golive s" "MB/s" "RSS MB" "rg(all) s" "rg6 s" "ratio" "ratio6"
for name in healthy crashloop multirank; do
  f=$BENCH_DIR/$name.log
  size=$(stat -c %s "$f")
  cat "$f" >/dev/null # page cache, for both tools
  read -r gt grss < <(measure "$BENCH_DIR/$name.json" "$GOLIVE" triage --format json "$f")
  read -r rt _ < <(measure /dev/null rg -F -c --no-mmap -f "$BENCH_DIR/anchors.txt" "$f")
  read -r r6 _ < <(measure /dev/null rg -F -c --no-mmap -f "$BENCH_DIR/six.txt" "$f")
  answer=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1])).get("primary") or {}; print("%s@%s x%s" % (p.get("class"), p.get("line"), p.get("count", 1)))' "$BENCH_DIR/$name.json")
  awk -v n="$name" -v s="$size" -v a="$answer" -v gt="$gt" -v rss="$grss" -v rt="$rt" -v r6="$r6" 'BEGIN{
    printf "| %-14s | %8.0f | %-28s | %9.2f | %8.0f | %9.0f | %8.2f | %9.2f | %8.2f | %.2f |\n",
      n, s/1048576, a, gt, s/1e6/gt, rss/1024, rt, r6, gt/rt, gt/r6 }'
done
echo "golive: $GOLIVE triage --format json FILE (best of $RUNS, page cache warm)"
echo "rg(all): rg -F -c --no-mmap -f $BENCH_DIR/anchors.txt FILE ($nanch literals: every rule pattern + traceback anchors)"
echo "rg6: rg -F -c --no-mmap -f $BENCH_DIR/six.txt FILE (Error error Traceback NCCL CUDA memory)"
echo "ratio = golive time / rg time (below 1: golive faster); JSON answers in $BENCH_DIR/*.json"
