#!/usr/bin/env bash
# The test command: sets up .venv if needed, lints, runs the whole offline test suite.
#   bash run_tests.sh            # everything (CI runs exactly this)
#   bash run_tests.sh -m "not slow" -x   # extra args go to pytest
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/ensure_venv.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
