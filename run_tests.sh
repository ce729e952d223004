#!/usr/bin/env bash
# The test command: sets up .venv if needed, lints, runs the offline test suite.
#   bash run_tests.sh                    # everything (CI runs exactly this)
#   bash run_tests.sh -m "not slow and not stage"   # the fast subset: unit tests only (under a minute)
#   bash run_tests.sh -m "not slow"      # no end-to-end run on the demo corpus (stage tests included)
#   bash run_tests.sh tests/test_first_hour.py -x   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")"
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; echo "pytest's own options: bash run_tests.sh --pytest-help"; exit 0 ;;
  --pytest-help) shift; set -- --help "$@" ;;
esac
bash scripts/ensure_venv.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
