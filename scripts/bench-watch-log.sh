#!/usr/bin/env bash
# `watch --log` against a log that grows fast: a writer appends the healthy server logs of
# ../shared/long (repeated) at RATE MB/s for SECS seconds, then one real NCCL failure line;
# `golive watch --log` follows it. Reports the bytes written, golive's CPU use (cores, from
# user+system time over its wall time), its peak RSS, and how long after the failure line
# was written the watch fired (it must keep up: within a few intervals).
#
#   scripts/bench-watch-log.sh [RATE_MBS] [SECS]      (default 50 MB/s for 20 s)
#
# Env: GOLIVE (default target/release/golive), SHARED (default ../shared), BENCH_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-50}
SECS=${2:-20}
SHARED=${SHARED:-../shared}
GOLIVE=${GOLIVE:-target/release/golive}
BENCH_DIR=${BENCH_DIR:-/tmp/golive-bench-watch}
if [[ ! -f $SHARED/long/INDEX.tsv ]]; then
  echo "bench-watch-log: $SHARED/long is absent; skipping" >&2
  exit 0
fi
[[ -x $GOLIVE ]] || cargo build --release -p golive-cli
mkdir -p "$BENCH_DIR/www"
rm -f "$BENCH_DIR/server.log"
# A static /metrics (an idle vLLM's gauges), so the watch has a target to scrape.
cat >"$BENCH_DIR/www/metrics" <<'M'
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0.0
M
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$BENCH_DIR/www" >/dev/null 2>&1 &
web=$!
trap 'kill $web 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/metrics" >/dev/null && break; sleep 0.1; done
touch "$BENCH_DIR/server.log"

/usr/bin/time -f '%U %S %e %M' -o "$BENCH_DIR/time.txt" \
  "$GOLIVE" watch --url "http://127.0.0.1:$port" --log "$BENCH_DIR/server.log" \
  --interval 1s --window 2s --format json >"$BENCH_DIR/watch.jsonl" 2>"$BENCH_DIR/watch.err" &
watch=$!

python3 - "$SHARED" "$BENCH_DIR/server.log" "$RATE" "$SECS" "$BENCH_DIR/fail_at.txt" <<'PY'
import csv, os, sys, time
shared, out, rate, secs, fail_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rows = list(csv.DictReader(open(f"{shared}/long/INDEX.tsv"), delimiter="\t"))
healthy = b"".join(open(f"{shared}/long/{r['id']}.log", "rb").read() for r in rows if r["outcome"] == "ok")
healthy = healthy.replace(b"\r\n", b"\n")
if not healthy.endswith(b"\n"):
    healthy += b"\n"
block = healthy * max(1, (4 << 20) // len(healthy))
per_tick = rate * 1e6 / 10
written, start = 0, time.monotonic()
with open(out, "ab", buffering=0) as f:
    tick = 0
    while time.monotonic() - start < secs:
        want = int(per_tick * (tick + 1)) - written
        while want > 0:
            n = min(want, len(block))
            # whole lines only
            cut = block.rfind(b"\n", 0, n) + 1 or n
            f.write(block[:cut])
            written += cut
            want -= cut
        tick += 1
        delay = start + tick / 10 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    elapsed = time.monotonic() - start
    f.write(b"ERROR 12-01 10:00:00 [core.py:600] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n")
    open(fail_at, "w").write(f"{time.monotonic()} {written} {elapsed}\n")
print(f"wrote {written/1e6:.0f} MB in {elapsed:.1f} s ({written/1e6/elapsed:.1f} MB/s)", file=sys.stderr)
PY
rc=0
timeout 120 tail --pid=$watch -f /dev/null || true
# Still following after 2 minutes: it did not keep up (or did not fire).
# (TERM to golive itself, the child of `time`, so `time` still writes its figures.)
pkill -TERM -P "$watch" 2>/dev/null || true
wait $watch || rc=$?
end=$(python3 -c 'import time; print(time.monotonic())')
read -r fail_t written elapsed <"$BENCH_DIR/fail_at.txt"
read -r user sys wall rss < <(tail -n 1 "$BENCH_DIR/time.txt")
python3 - "$user" "$sys" "$wall" "$rss" "$written" "$elapsed" "$fail_t" "$end" "$rc" <<'PY'
import sys
u, s, w, rss, written, elapsed, fail_t, end, rc = map(float, sys.argv[1:])
print(f"| rate MB/s | golive cores | golive CPU s | wall s | peak RSS MB | fired after the failure line | exit |")
print(f"|---|---|---|---|---|---|---|")
print(f"| {written/1e6/elapsed:.1f} | {(u+s)/w:.2f} | {u+s:.1f} | {w:.1f} | {rss/1024:.0f} | {end-fail_t:.1f} s | {int(rc)} |")
PY
grep -o '"driver_nccl"' "$BENCH_DIR/watch.jsonl" | head -1 || { echo "bench-watch-log: the watch did not fire driver_nccl" >&2; cat "$BENCH_DIR/watch.err" >&2; exit 1; }
rm -f "$BENCH_DIR/server.log"
