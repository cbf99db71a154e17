#!/usr/bin/env bash
# Create .venv-gym: NVIDIA NeMo Gym (nemo-gym) in its own Python 3.12 venv, apart from the project's. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GYM_VENV:-.venv-gym}
PY=${PYTHON:-python3.12}
GYM_VERSION=0.4.0
# already complete: a rerun costs one import (TOOLSCALE_SETUP_VERIFY_ONLY=1: check only, never install)
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import nemo_gym, jsonschema" >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${TOOLSCALE_SETUP_VERIFY_ONLY:-}" ]; then echo "setup_gym: $VENV is missing or incomplete" >&2; exit 1; fi
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c "" >/dev/null 2>&1; then
  # pyenv shims name a version they cannot run: try the installed 3.12 directly
  PY=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)
  [ -n "$PY" ] || { echo "setup_gym: python3.12 not found (NeMo Gym needs Python >= 3.12)" >&2; exit 1; }
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "nemo-gym==$GYM_VERSION" jsonschema
"$VENV/bin/python" -c "import nemo_gym, jsonschema"
