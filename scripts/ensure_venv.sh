#!/usr/bin/env bash
# Create the venv and install the hash-pinned dependencies when missing or when the pins changed.
# A stamp file holds the hash of requirements.txt + requirements.lock, so a second run is instant.
#   VENV=/some/dir bash scripts/ensure_venv.sh   # another venv (default: .venv in the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
want=$(cat requirements.txt requirements.lock | sha256sum | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
# requirements.txt names what we use; requirements.lock (scripts/lock_requirements.py) pins every
# transitive package with its sha256. Refuse a lock that no longer matches requirements.txt.
"$PYTHON" scripts/lock_requirements.py --check
echo "[setup] creating $VENV and installing hash-pinned dependencies (first run only)..." >&2
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# No `pip install --upgrade pip`: that would fetch whatever pip the index serves, unverified. The
# venv's bundled pip first installs the lock's pip (hash-checked), which then installs the lock:
# --require-hashes refuses any file whose sha256 is not in the lock and any package the lock does
# not pin (transitive ones too).
grep -A1 -E '^pip==' requirements.lock > "$VENV/.pip-pin.txt"
# pip's output (and the warnings this machine's pip configuration may print for every package) goes to a
# log; it is shown only when the install fails, so the setup line is not buried under it
log=$VENV/.install.log
t0=$(date +%s)
if ! { "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$VENV/.pip-pin.txt" &&
       "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r requirements.lock; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "[setup] installing the pinned dependencies failed (last 40 lines above; all of it in $log)" >&2
  exit 1
fi
echo "$want" > "$stamp"
echo "[setup] done in $(( $(date +%s) - t0 )) s ($(grep -cE "^[A-Za-z0-9_.-]+==" requirements.lock) pinned packages; pip's log: $log)" >&2
