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
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r "$VENV/.pip-pin.txt" >&2
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r requirements.lock >&2
echo "$want" > "$stamp"
