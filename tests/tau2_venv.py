"""tau2-bench's own venv for the tests that need it: ``.venv-tau2`` (or ``$TAU2_VENV``), made by
``scripts/setup_tau2.sh`` the first time a test needs it, so that nothing skips on a fresh clone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tau2_venv() -> Path:
    return Path(os.environ.get("TAU2_VENV", ROOT / ".venv-tau2"))


def tau2_ready() -> bool:
    python = tau2_venv() / "bin" / "python"
    return python.exists() and subprocess.run([str(python), "-c", "import tau2, jsonschema"],
                                              capture_output=True).returncode == 0


def ensure_tau2_venv() -> Path:
    """The tau2 venv's python, running scripts/setup_tau2.sh first when it is missing (about 3 minutes once).
    Raises RuntimeError with the script's last line when it cannot be made (e.g. no python3.11)."""
    if not tau2_ready():
        made = subprocess.run(["bash", str(ROOT / "scripts" / "setup_tau2.sh")], capture_output=True, text=True,
                              env={**os.environ, "TAU2_VENV": str(tau2_venv())}, timeout=900)
        if made.returncode != 0:
            last = (made.stderr or made.stdout).strip().splitlines()[-1:]
            raise RuntimeError(f"{tau2_venv()} is missing and scripts/setup_tau2.sh could not create it: {last}")
    return tau2_venv() / "bin" / "python"
