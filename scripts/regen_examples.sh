#!/usr/bin/env bash
# Regenerate the committed example reports (reports/examples/) and every generated figure of README.md and
# docs/*.md from fresh runs of the committed code, in one command:
#
#   bash scripts/regen_examples.sh            # ~15 min on 2 cores with the venv and the demo corpus cached
#   KEEP=1 bash scripts/regen_examples.sh     # keep the scratch clone (its path is printed)
#
# What it runs, in a fresh clone of HEAD (so no earlier run's artifacts, and the reports name a clean
# commit; commit your code first), sharing this checkout's .venv and the demo-corpus cache:
#   1. bash run_pipeline.sh                                   -> reports/examples/demo/ (the README's table)
#   2. the dashboard exercise's second run (docs/operations.md) -> reports/examples/demo_b/
#   3. report.py compare demo demo_b                          -> reports/examples/dashboard.{html,md,json,png}
#      report.py blame demo --step 40 / --doc <id>          -> reports/examples/demo/blame/ (the step ledger)
#   4. the withdrawal example on its own run                  -> reports/examples/demo_withdraw/
#   5. python -m minideepseek.readme_figures                  -> README.md + docs/*.md regions
# The scale figures (reports/examples/scale/) come from bench/bench_scale.py --publish, not from here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
bash scripts/ensure_venv.sh
if [ -n "$(git status --porcelain --untracked-files=no -- minideepseek configs ./*.py run_pipeline.sh requirements.lock)" ]; then
  echo "regen_examples.sh: commit your code first: the examples are made from HEAD ($(git rev-parse --short HEAD))" >&2
  git status --short --untracked-files=no -- minideepseek configs ./*.py run_pipeline.sh requirements.lock >&2
  exit 2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/minideepseek-examples.XXXXXX")
cleanup() { if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "scratch clone kept: $WORK/repo" >&2; fi; }
trap cleanup EXIT
git clone -q --no-hardlinks "$ROOT" "$WORK/repo"
ln -s "$ROOT/.venv" "$WORK/repo/.venv"
cp "$ROOT/.venv/.requirements.sha256" "$WORK/repo/.venv/.requirements.sha256" 2>/dev/null || true
cd "$WORK/repo"

bash run_pipeline.sh
bash run_pipeline.sh --set run.name=demo_b --set sources.arxiv.weight=0.15 --set sources.fineweb_edu.weight=0.35
.venv/bin/python report.py compare demo demo_b
# the step ledger's example queries: one step, the first document it trained, and the document the
# withdrawal example withdraws
.venv/bin/python report.py blame demo --step 40
doc=$(.venv/bin/python -c "import json; r = json.load(open('reports/demo/blame/step-0000040.json')); \
print(r['ranks'][0]['sequences'][0]['documents'][0]['id'])")
.venv/bin/python report.py blame demo --doc "$doc"
.venv/bin/python report.py blame demo --doc wanjuan_zh/474cdf39978157ec
bash run_pipeline.sh --set run.name=demo_withdraw
rc=0
bash run_pipeline.sh withdraw --set run.name=demo_withdraw --id wanjuan_zh/474cdf39978157ec \
    --url https://github.com/python/cpython/blob/v3.11.7/Lib/os.py \
    --text "remove the 88 from the colour strings to make a plot without alpha transparency" \
    --who "demo@minideepseek" --why "takedown" || rc=$?
[ "$rc" = 0 ] || { echo "regen_examples.sh: the withdrawal example failed (exit $rc)" >&2; exit "$rc"; }

cd "$ROOT"
for run in demo demo_b demo_withdraw; do
  rm -rf "reports/examples/$run"
  cp -r "$WORK/repo/reports/$run" "reports/examples/$run"
done
rm -f reports/examples/dashboard.*
cp "$WORK/repo/reports"/dashboard.{html,md,json} reports/examples/
# a picture of the dashboard page for the docs, where Debian's chromium is installed (.ci/run installs it)
if command -v chromium >/dev/null 2>&1; then
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$WORK/chromium" --window-size=1400,2000 \
    --screenshot="$ROOT/reports/examples/dashboard.png" "file://$ROOT/reports/examples/dashboard.html" >/dev/null 2>&1 \
    || echo "regen_examples.sh: chromium could not take the dashboard screenshot; no dashboard.png" >&2
fi
.venv/bin/python -m minideepseek.readme_figures
echo "regen_examples.sh: reports/examples/ and the generated figures of README.md and docs/ rewritten; review with git diff"
