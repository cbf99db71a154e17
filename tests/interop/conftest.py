"""The interop tests compare with tau2 itself: make ``.venv-tau2`` (scripts/setup_tau2.sh) before their modules
are collected, because their skip conditions look for it at import time. With $TOOLSCALE_TAU2_PYTHON or
$TOOLSCALE_EXTERNAL_SITE set, that tau2 is used and nothing is made."""

from __future__ import annotations

import os

from interop.tau2_bridge import PYTHON_ENV
from domains.external import SITE_ENV
from tests.tau2_venv import ensure_tau2_venv

if not (os.environ.get(PYTHON_ENV) or os.environ.get(SITE_ENV)):
    ensure_tau2_venv()
