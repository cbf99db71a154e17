"""NeMo Gym's own venv for the tests that need it: ``.venv-gym`` (or ``$GYM_VENV``), made by
``scripts/setup_gym.sh`` the first time a test needs it, so that nothing skips on a fresh clone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gym_venv() -> Path:
    return Path(os.environ.get("GYM_VENV", ROOT / ".venv-gym"))


def gym_ready() -> bool:
    python = gym_venv() / "bin" / "python"
    return python.exists() and subprocess.run([str(python), "-c", "import nemo_gym, jsonschema"],
                                              capture_output=True).returncode == 0


def ensure_gym_venv() -> Path:
    """The Gym venv's python, running scripts/setup_gym.sh first when it is missing (about a minute once).
    Raises RuntimeError with the script's last line when it cannot be made (e.g. no Python 3.12)."""
    if not gym_ready():
        made = subprocess.run(["bash", str(ROOT / "scripts" / "setup_gym.sh")], capture_output=True, text=True,
                              env={**os.environ, "GYM_VENV": str(gym_venv())}, timeout=900)
        if made.returncode != 0:
            last = (made.stderr or made.stdout).strip().splitlines()[-1:]
            raise RuntimeError(f"{gym_venv()} is missing and scripts/setup_gym.sh could not create it: {last}")
    return gym_venv() / "bin" / "python"
