#!/usr/bin/env bash
# Benchmark (not a test): can `golive load` keep an open-loop Poisson schedule at a high rate?
# Issue 27's target: Poisson arrivals at 5,000 req/s on 2 cores against the canned SSE server
# of ../shared/bench (nginx, 256 one-token chunks per answer, ~0 server CPU): achieved rate
# within 1% of the requested one, schedule lateness p99 at most 2 ms. Prints golive's summary
# line per rate; GuideLLM's poisson profile is not run here (see scripts/bench-load.sh for its
# install and the CPU comparison).
#
#   scripts/bench-rate.sh            (RATES="1000 2500 5000" SECS=10; results in /tmp/golive-rate.*)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${BENCH_DIR:-$ROOT/../shared/bench}"
RATES="${RATES:-1000 2500 5000}"
SECS="${SECS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/golive-rate.XXXX)}"
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[[ -x "$NGINX" ]] || { echo "bench-rate: needs nginx (apt-get install nginx-light)" >&2; exit 2; }
(cd "$ROOT" && cargo build --release -q -p golive-cli)
GOLIVE="$ROOT/target/release/golive"
chmod 755 "$OUT"  # nginx workers (nobody) read the canned answers under it
P="$OUT/nginx"; mkdir -p "$P/logs" "$P/html" "$P/tmp"
python3 "$BENCH/make_sse.py" --tokens 256 --prompt-tokens 128 --out "$P/html" >/dev/null
cp "$BENCH/models.json" "$BENCH/metrics.txt" "$P/html/" 2>/dev/null || true
"$NGINX" -p "$P" -c "$(cd "$BENCH" && pwd)/nginx.conf" -e "$P/logs/error.log" &
NGINX_PID=$!
trap 'kill "$NGINX_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do curl -fsS -m 1 http://127.0.0.1:18080/v1/models >/dev/null 2>&1 && break; sleep 0.1; done
for rate in $RATES; do
  n=$((rate * SECS))
  "$GOLIVE" load --url http://127.0.0.1:18080 --rate "$rate" --arrival poisson --seed 1 \
    --requests "$n" --concurrency 4096 --prompt-tokens 128 --max-tokens 256 --no-calibrate \
    --json "$OUT/rate-$rate.json" > "$OUT/rate-$rate.out" 2> "$OUT/rate-$rate.err" || true
  python3 - "$OUT/rate-$rate.json" "$rate" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); want = float(sys.argv[2])
# Achieved: requests over the planned span (the last start is at about n/rate s).
l = s["schedule_lateness_ms"]
print(f"rate {want:.0f}/s: {s['requests']} requests, errors {s['errors']}, "
      f"completed {s['request_rate']:.0f}/s over {s['duration_s']:.2f} s, "
      f"lateness p50 {l['p50']:.2f} ms p99 {l['p99']:.2f} ms, client CPU {s['client_cpu_share']*100:.0f}%, "
      f"client_limited {s['client_limited']}")
PY
done
echo "results: $OUT"
