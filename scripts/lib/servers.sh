# Shared by scripts/local-server.sh and scripts/vllm-server.sh (sourced, not run): which server
# on a port is this checkout's own. The caller sets PORT, RUN_DIR (its pid files, one per
# port), PROGRAM (a word of its server's command line) and SERVER_NAME, and defines log().

# Whether the server on $1 answers its health endpoint.
healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

# Whether the pid file of $PORT names a live $PROGRAM (a pid the system gave to another
# program since is not ours).
ours() {
  local pidf="$RUN_DIR/$PORT.pid" pid
  [[ -f "$pidf" ]] || return 1
  pid="$(cat "$pidf")"
  [[ "$pid" =~ ^[0-9]+$ ]] && { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -q "$PROGRAM"
}

# Another server answers on $PORT: an error, never reused and never stopped.
foreign_server() {
  log "127.0.0.1:$PORT already answers, but not with $SERVER_NAME this checkout started"
  log "(no live pid in $RUN_DIR/$PORT.pid): stop that server or pass another --port"
  exit 1
}
