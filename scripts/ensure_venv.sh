#!/usr/bin/env bash
# Create the venv and install the hash-pinned dependencies when missing or when the pins changed.
# A stamp file holds the hash of requirements.txt + requirements.lock it was built from; a venv whose
# stamp differs, or whose installed packages differ from the lock (scripts/check_venv.py), is rebuilt.
#   VENV=/some/dir bash scripts/ensure_venv.sh   # another venv (default: .venv in the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
want=$(cat requirements.txt requirements.lock | sha256sum | cut -d' ' -f1)
stamp=$VENV/.requirements.sha256
if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  # built from this lock; what is installed is checked too (a package added, removed or changed by hand
  # since then): any difference rebuilds the venv instead of trusting it
  if "$VENV/bin/python" scripts/check_venv.py requirements.lock; then exit 0; fi
  echo "[setup] $VENV no longer holds exactly requirements.lock; rebuilding it" >&2
fi
# requirements.txt names what we use; requirements.lock (scripts/lock_requirements.py) pins every
# transitive package with its sha256. Refuse a lock that no longer matches requirements.txt.
"$PYTHON" scripts/lock_requirements.py --check
echo "[setup] creating $VENV and installing hash-pinned dependencies (first run only)..." >&2
# A venv built from another lock (or changed since) is rebuilt from scratch, never installed over: a
# package the new lock no longer pins must not survive in it. Only a directory that is a venv is removed.
if [ -e "$VENV" ] || [ -L "$VENV" ]; then
  if [ ! -f "$VENV/pyvenv.cfg" ]; then
    echo "[setup] $VENV exists but is not a virtualenv (no pyvenv.cfg); move it away, then rerun" >&2; exit 2
  fi
  rm -rf "$VENV"
fi
"$PYTHON" -m venv "$VENV"
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
