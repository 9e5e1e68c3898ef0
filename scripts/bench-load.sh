#!/usr/bin/env bash
# Benchmark (not a test): client CPU of `golive load` against GuideLLM, method of
# ../shared/bench/RESULTS.md. nginx serves a canned vLLM-shaped SSE stream (256 one-token
# chunks per answer, ~0 server CPU); each tool runs a small ("startup") and a large run
# at 64 and 256 concurrent streams under /usr/bin/time -v; marginal client CPU-seconds
# per 1,000 streamed chunks = (CPU big - CPU small) / (chunks big - chunks small).
# Then both tools measure TTFT/ITL against GuideLLM's token-paced mock server
# (--ttft-ms 40 --itl-ms 8) to show that they agree.
#
# Results on the 2-vCPU project machine (2026-11-30, shared; GuideLLM 0.8.1, 2 workers), run 2:
#   marginal CPU s / 1k chunks, 64 streams: golive 0.00026 vs GuideLLM 0.0406 (156x less);
#   256 streams: 0.00035 vs 0.0355 (101x less). With N=40000 golive alone: 0.00028 at both.
#   Mock server 40 ms / 8 ms: TTFT p50 46.2 vs 44.8 ms, ITL p50 8.48 vs 8.30 ms.
#
#   scripts/bench-load.sh            (N=4000 CONC="64 256"; results under /tmp/golive-bench.*)
# Needs: nginx (apt nginx-light), GNU time, python3; installs GuideLLM into /tmp/venv-guidellm.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${BENCH_DIR:-$ROOT/../shared/bench}"
N="${N:-4000}"
CONC="${CONC:-64 256}"
VENV="${GUIDELLM_VENV:-/tmp/venv-guidellm}"
OUT="${OUT:-$(mktemp -d /tmp/golive-bench.XXXX)}"
GL_WORKERS="${GUIDELLM_WORKERS:-2}"   # RESULTS.md: 2 workers is GuideLLM's cheaper setting on 2 cores
mkdir -p "$OUT"
log() { echo "bench: $*" >&2; }

[[ -f "$BENCH/nginx.conf" ]] || { log "no $BENCH/nginx.conf (set BENCH_DIR)"; exit 2; }
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[[ -x "$NGINX" ]] || { log "needs nginx: apt-get install nginx-light"; exit 2; }
[[ -x /usr/bin/time ]] || { log "needs GNU time: apt-get install time"; exit 2; }
if [[ ! -x "$VENV/bin/guidellm" ]]; then
  log "installing GuideLLM into $VENV (several minutes)"
  python3 -m venv "$VENV" && "$VENV/bin/pip" install -q guidellm
fi
(cd "$ROOT" && cargo build --release -q -p golive-cli)
GOLIVE="$ROOT/target/release/golive"

# Offline tokenizer for GuideLLM's synthetic prompts (a small byte-level BPE on local text).
TOK="$OUT/tokenizer"
"$VENV/bin/python" - "$TOK" <<'EOF'
import glob, json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
from transformers import PreTrainedTokenizerFast
out = sys.argv[1]
files = [f for f in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(f)]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train(files, trainers.BpeTrainer(vocab_size=6000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                     special_tokens=["<|endoftext|>"]))
PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(out)
json.dump({"model_type": "gpt2", "vocab_size": tok.get_vocab_size()}, open(os.path.join(out, "config.json"), "w"))
EOF

# nginx with the canned stream (RESULTS.md setup).
P="$OUT/nginx"; mkdir -p "$P/logs" "$P/html" "$P/tmp"
python3 "$BENCH/make_sse.py" --tokens 256 --prompt-tokens 128 --out "$P/html" >/dev/null
cp "$BENCH/models.json" "$BENCH/metrics.txt" "$P/html/" 2>/dev/null || true
"$NGINX" -p "$P" -c "$(cd "$BENCH" && pwd)/nginx.conf" -e "$P/logs/error.log" &
NGINX_PID=$!
MOCK_PID=""
cleanup() { kill "$NGINX_PID" 2>/dev/null || true; [[ -n "$MOCK_PID" ]] && kill "$MOCK_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 50); do curl -fsS -m 1 http://127.0.0.1:18080/health >/dev/null 2>&1 && break; sleep 0.1; done

cpu_of() { # time -v output -> user+sys seconds
  awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.2f", u+s}' "$1"
}

run_golive() { # name conc n
  /usr/bin/time -v -o "$OUT/$1.time" "$GOLIVE" load --url http://127.0.0.1:18080 \
    --concurrency "$2" --requests "$3" --prompt-tokens 128 --max-tokens 256 --no-calibrate \
    --json "$OUT/$1.json" > "$OUT/$1.out" 2>&1
}
run_guidellm() { # name conc n [target]
  local target="${4:-http://127.0.0.1:18080}"
  HF_HUB_OFFLINE=1 GUIDELLM__MAX_WORKER_PROCESSES="$GL_WORKERS" /usr/bin/time -v -o "$OUT/$1.time" \
    "$VENV/bin/guidellm" run --backend "kind=openai_http,target=$target,model=bench-model" \
    --profile "kind=concurrent,streams=$2" --constraint "kind=max_requests,count=$3" \
    --data kind=synthetic_text,prompt_tokens=128,output_tokens=256 \
    --tokenizer "kind=hf_auto,model=$TOK" --output "kind=json,path=$OUT/$1.json" \
    --disable-console-interactive > "$OUT/$1.out" 2>&1
}

echo "| tool | streams | requests (big/small) | CPU s big | CPU s small | marginal CPU s / 1k chunks | whole-run CPU s / 1k chunks |" > "$OUT/table.md"
echo "|---|---|---|---|---|---|---|" >> "$OUT/table.md"
for c in $CONC; do
  for tool in golive guidellm; do
    log "$tool: $c streams, $c then $N requests"
    "run_$tool" "$tool-c$c-small" "$c" "$c"
    "run_$tool" "$tool-c$c-big" "$c" "$N"
    big=$(cpu_of "$OUT/$tool-c$c-big.time"); small=$(cpu_of "$OUT/$tool-c$c-small.time")
    python3 - "$tool" "$c" "$N" "$big" "$small" >> "$OUT/table.md" <<'EOF'
import sys
tool, c, n, big, small = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
marg = (big - small) / ((n - c) * 256 / 1000)
whole = big / (n * 256 / 1000)
print(f"| {tool} | {c} | {n}/{c} | {big:.2f} | {small:.2f} | {marg:.5f} | {whole:.5f} |")
EOF
  done
done

# TTFT/ITL agreement against a token-paced server.
log "TTFT/ITL agreement: GuideLLM mock server (ttft 40 ms, itl 8 ms, 64 tokens), 8 streams"
"$VENV/bin/guidellm" mock-server --host 127.0.0.1 --port 18090 --model bench-model \
  --ttft-ms 40 --itl-ms 8 --output-tokens 64 > "$OUT/mock.log" 2>&1 &
MOCK_PID=$!
for _ in $(seq 1 100); do curl -fsS -m 1 http://127.0.0.1:18090/v1/models >/dev/null 2>&1 && break; sleep 0.2; done
"$GOLIVE" load --url http://127.0.0.1:18090 --concurrency 8 --requests 200 --prompt-tokens 128 \
  --max-tokens 64 --json "$OUT/agree-golive.json" > "$OUT/agree-golive.out" 2>&1
run_guidellm agree-guidellm 8 200 http://127.0.0.1:18090
python3 - "$OUT" >> "$OUT/table.md" <<'EOF'
import json, sys
out = sys.argv[1]
g = json.load(open(f"{out}/agree-golive.json"))
m = json.load(open(f"{out}/agree-guidellm.json"))["benchmarks"][0]["metrics"]
s = lambda k: m[k]["successful"]
print("\n| TTFT/ITL vs mock server (40 ms / 8 ms) | TTFT p50 ms | TTFT mean ms | ITL p50 ms | ITL mean ms |\n|---|---|---|---|---|")
print(f"| golive load | {g['ttft_ms']['p50']:.1f} | {g['ttft_ms']['mean']:.1f} | {g['itl_ms']['p50']:.2f} | {g['itl_ms']['mean']:.2f} |")
print(f"| GuideLLM | {s('time_to_first_token_ms')['median']:.1f} | {s('time_to_first_token_ms')['mean']:.1f} | {s('inter_token_latency_ms')['median']:.2f} | {s('inter_token_latency_ms')['mean']:.2f} |")
EOF
cat "$OUT/table.md"
log "raw outputs in $OUT"
