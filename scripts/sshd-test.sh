#!/usr/bin/env bash
# A throw-away OpenSSH server on 127.0.0.1 for the `golive collect --ssh` test.
#   scripts/sshd-test.sh start DIR PORT   generate keys in DIR, start sshd; prints the
#                                         ssh options (one per line) a client needs
#   scripts/sshd-test.sh stop DIR         stop it
# Key-only login for the current user (root included: prohibit-password) with a
# generated host key and client key; nothing outside DIR is changed except the
# privilege-separation directory /run/sshd that Debian's sshd requires.
# Exit 3 when sshd cannot be started (not installed, no permission): callers skip.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }

case "$cmd" in
start)
  port="${3:?port}"
  sshd="$(command -v sshd || true)"
  [[ -z "$sshd" && -x /usr/sbin/sshd ]] && sshd=/usr/sbin/sshd
  [[ -n "$sshd" ]] || { echo "sshd-test: sshd is not installed (apt-get install openssh-server)" >&2; exit 3; }
  command -v ssh-keygen >/dev/null || { echo "sshd-test: ssh-keygen missing" >&2; exit 3; }
  mkdir -p "$dir"
  chmod 700 "$dir"
  dir="$(cd "$dir" && pwd)"
  rm -f "$dir"/host_key* "$dir"/client_key*
  ssh-keygen -q -t ed25519 -N '' -C sshd-test-host -f "$dir/host_key"
  ssh-keygen -q -t ed25519 -N '' -C sshd-test-client -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  chmod 600 "$dir/authorized_keys"
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_key.pub")" > "$dir/known_hosts"
  user="$(id -un)"
  cat > "$dir/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $user
StrictModes no
UsePAM no
X11Forwarding no
Subsystem sftp internal-sftp
CONF
  if [[ $(id -u) -eq 0 ]]; then mkdir -p /run/sshd && chmod 755 /run/sshd; fi
  if ! "$sshd" -f "$dir/sshd_config" -E "$dir/sshd.log"; then
    echo "sshd-test: sshd did not start: $(tail -3 "$dir/sshd.log" 2>/dev/null)" >&2
    exit 3
  fi
  opts=(-o "Port=$port" -o "IdentityFile=$dir/client_key" -o "UserKnownHostsFile=$dir/known_hosts"
        -o "StrictHostKeyChecking=yes" -o "IdentitiesOnly=yes" -o "BatchMode=yes")
  for _ in $(seq 1 50); do
    if ssh "${opts[@]}" "$user@127.0.0.1" true 2>/dev/null; then
      printf '%s\n' "Port=$port" "IdentityFile=$dir/client_key" "UserKnownHostsFile=$dir/known_hosts" \
        "StrictHostKeyChecking=yes" "IdentitiesOnly=yes" "User=$user"
      exit 0
    fi
    sleep 0.1
  done
  echo "sshd-test: sshd started but key login failed: $(tail -5 "$dir/sshd.log" 2>/dev/null)" >&2
  [[ -f "$dir/sshd.pid" ]] && kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
  exit 3
  ;;
stop)
  if [[ -f "$dir/sshd.pid" ]]; then
    kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true
    rm -f "$dir/sshd.pid"
  fi
  ;;
*)
  echo "usage: $0 start DIR PORT | stop DIR" >&2
  exit 2
  ;;
esac
