#!/usr/bin/env bash
# Create .venv and install the pinned dependencies when missing or when the pins changed.
# A stamp file holds the hash of requirements.txt + requirements.lock, so a second run is instant.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
want=$(cat requirements.txt requirements.lock | sha256sum | cut -d' ' -f1)
stamp=.venv/.requirements.sha256
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "[setup] creating .venv and installing pinned dependencies (first run only)..." >&2
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >&2 || true
# requirements.txt names what we use; requirements.lock pins every transitive package.
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt -c requirements.lock >&2
echo "$want" > "$stamp"
