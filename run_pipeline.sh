#!/usr/bin/env bash
# Run the pipeline end to end on a config (default: the offline demo corpus).
#
#   bash run_pipeline.sh                              # configs/demo.yaml, every stage
#   bash run_pipeline.sh --config configs/classroom.yaml   # all 5 stages in a lesson (README "In class")
#   bash run_pipeline.sh --from mix_sampler --force   # rerun from one stage on
#   bash run_pipeline.sh --only mix_sampler --set sampler.target_docs=2000 --set run.name=docs2000
#   NPROC=2 bash run_pipeline.sh --only smoke_train   # smoke train on 2 ranks (smoke_train.py --nproc 2; no open port)
#   bash run_pipeline.sh withdraw --id ID --why "..."  # deletion request (withdraw.py), then rerun what is stale
#   bash run_pipeline.sh --executor ray [--ray-address HOST:6379]   # stages 1-4 on a Ray cluster (same artifacts)
#   bash run_pipeline.sh --log-level DEBUG            # DEBUG, INFO (default), WARNING, ERROR, CRITICAL
#   bash run_pipeline.sh --restart                    # a killed stage starts over (default: it resumes its finished units)
#   bash run_pipeline.sh --strict                     # exit 3 when stage 1 misses the recipe (a source short)
#
# First run: creates .venv and installs the pinned dependencies, builds the demo corpus into the
# cache (~/.cache/minideepseek, or $MINIDEEPSEEK_CACHE); stage 1 first builds the demo's quality classifier
# from it (data/models/demo_quality, ~40-60 s; docs/stages.md). Later runs skip up-to-date stages.
set -euo pipefail
cd "$(dirname "$0")"

# The stage list lives in one place, the registry (minideepseek/pipeline.py: stdlib only, so any python3
# reads it before the virtualenv exists).
LISTPY=python3; [ -x .venv/bin/python ] && LISTPY=.venv/bin/python
read -r -a STAGES <<< "$("$LISTPY" -m minideepseek.pipeline list)"
read -r -a EXEC_STAGES <<< "$("$LISTPY" -m minideepseek.pipeline list --executor)"
read -r -a TORCHRUN_STAGES <<< "$("$LISTPY" -m minideepseek.pipeline list --torchrun)"
NPROC=${NPROC:-1}   # smoke_train ranks: NPROC=2 runs it with --nproc 2 (gloo on CPU, NCCL on GPUs; file rendezvous)

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; echo "stages: ${STAGES[*]}"; }
CONFIG=configs/demo.yaml FROM="" ONLY="" FORCE=() RESTART=() SETS=() WITHDRAW=() EXEC=() LOGL=()
if [ "${1:-}" = withdraw ]; then WITHDRAW=(withdraw.py); shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --config) CONFIG=$2; shift 2 ;;
    --from) FROM=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --force) FORCE=(--force); shift ;;
    --restart) RESTART=(--restart); shift ;;
    --set) SETS+=(--set "$2"); shift 2 ;;
    --executor) EXEC+=(--executor "$2"); shift 2 ;;
    --ray-address) EXEC+=(--ray-address "$2"); shift 2 ;;
    --log-level) LOGL=(--log-level "$2"); shift 2 ;;
    --strict) SETS+=(--set sampler.strict=true); shift ;;
    -h|--help) usage; exit 0 ;;
    *) if [ ${#WITHDRAW[@]} -gt 0 ]; then WITHDRAW+=("$1"); shift
       else echo "run_pipeline.sh: unknown argument '$1'" >&2; usage >&2; exit 2; fi ;;
  esac
done
for s in "$FROM" "$ONLY"; do
  if [ -n "$s" ] && [[ ! " ${STAGES[*]} " =~ " $s " ]]; then
    echo "run_pipeline.sh: unknown stage '$s'; stages: ${STAGES[*]}" >&2; exit 2
  fi
done

case "${LOGL[1]:-INFO}" in
  DEBUG|INFO|WARNING|ERROR|CRITICAL|debug|info|warning|error|critical) ;;
  *) echo "run_pipeline.sh: --log-level '${LOGL[1]}' is not a logging level; use DEBUG, INFO, WARNING, ERROR or CRITICAL" >&2
     exit 2 ;;
esac

t_setup=$(date +%s)
bash scripts/ensure_venv.sh
PY=.venv/bin/python
# Every stage's config section is checked before any stage runs: a bad tokenizer.vocab_size must not
# cost minutes of stages 1-2 first.
"$PY" -m minideepseek.validate --config "$CONFIG" ${SETS[@]+"${SETS[@]}"} || exit 2

# The resume hint repeats the user's own command (config, every --set, executor, log level), so it
# resumes this run and not another one.
resume_hint() {  # $1 = the stage to resume from
  local cmd=(bash run_pipeline.sh --config "$CONFIG" ${SETS[@]+"${SETS[@]}"} ${EXEC[@]+"${EXEC[@]}"} \
             ${LOGL[@]+"${LOGL[@]}"} ${FORCE[@]+"${FORCE[@]}"})
  if [ -n "$ONLY" ]; then cmd+=(--only "$1"); else cmd+=(--from "$1"); fi
  local prefix=""
  [ "$NPROC" != 1 ] && prefix="NPROC=$NPROC "
  printf '  %s' "$prefix"; printf '%q ' "${cmd[@]}" | sed 's/ $//'; echo
}
if [ ${#WITHDRAW[@]} -gt 0 ]; then
  # a deletion request first; the stages below then skip what is up to date and rebuild what went stale
  # (the smoke-train model, whose training data changed)
  rc=0
  "$PY" "${WITHDRAW[@]}" --config "$CONFIG" ${SETS[@]+"${SETS[@]}"} ${LOGL[@]+"${LOGL[@]}"} || rc=$?
  case $rc in
    0) ;;
    4) echo "run_pipeline.sh: the withdrawal left traces (see its impact note); continuing" >&2 ;;
    3) echo "run_pipeline.sh: the deletion request matched nothing; no stage to rerun" >&2; exit 3 ;;
    *) echo "run_pipeline.sh: withdraw.py failed (exit $rc); rerun it to finish: $PY withdraw.py --resume" >&2
       exit "$rc" ;;
  esac
fi
started=0
[ -z "$FROM" ] && started=1
t0=$(date +%s)
current=""
# Ctrl-C: one line and the command that resumes (the stage's own process prints one line too; finished
# stages are kept and skipped by the rerun)
on_interrupt() {
  trap - INT
  echo >&2
  if [ -n "$current" ]; then
    echo "run_pipeline.sh: interrupted during $current; nothing of it was committed, its finished units are kept. Resume with:" >&2
    resume_hint "$current" >&2
  else
    echo "run_pipeline.sh: interrupted" >&2
  fi
  exit 130
}
trap on_interrupt INT
export MINIDEEPSEEK_PIPELINE=1   # a stage interrupted by Ctrl-C leaves the one resume line to this script
for stage in "${STAGES[@]}"; do
  [ "$stage" = "$FROM" ] && started=1
  if [ -n "$ONLY" ]; then [ "$stage" = "$ONLY" ] || continue
  elif [ $started -eq 0 ]; then continue; fi
  echo "== $stage =="
  ts=$(date +%s)
  launch=("$PY" "$stage.py")
  [[ " ${EXEC_STAGES[*]} " =~ " $stage " ]] && launch+=(${EXEC[@]+"${EXEC[@]}"})   # --executor: the CPU stages
  if [[ " ${TORCHRUN_STAGES[*]} " =~ " $stage " ]] && [ "$NPROC" -gt 1 ]; then
    launch+=(--nproc "$NPROC")   # ranks meet through a private file store, not torchrun's TCP rendezvous
  fi
  current=$stage
  rc=0
  "${launch[@]}" --config "$CONFIG" ${SETS[@]+"${SETS[@]}"} ${FORCE[@]+"${FORCE[@]}"} ${RESTART[@]+"${RESTART[@]}"} \
    ${LOGL[@]+"${LOGL[@]}"} || rc=$?
  case $rc in
    0) ;;
    130) on_interrupt ;;
    3) echo "run_pipeline.sh: stage $stage missed a binding target (--strict, or a failed canary certificate); see the line above and its report" >&2
       exit 3 ;;
    *) echo "run_pipeline.sh: stage $stage failed; fix the error above, then rerun from it:" >&2
       resume_hint "$stage" >&2
       exit 1 ;;
  esac
  current=""
  echo "== $stage done in $(( $(date +%s) - ts )) s =="
done
t_end=$(date +%s)
echo
echo "pipeline finished in $(( t_end - t_setup )) s: setup and config check $(( t0 - t_setup )) s, stages $(( t_end - t0 )) s"
"$PY" -m minideepseek.summary "$CONFIG" ${SETS[@]+"${SETS[@]}"}
