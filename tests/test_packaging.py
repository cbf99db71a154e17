"""Every package of the project is installed by `pip install -e .`: a package missing from pyproject's include list
works from the repository root yet fails as `ModuleNotFoundError` from the installed `toolscale` command."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_top_level_package_is_in_the_install_list() -> None:
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(p.parent.name for p in REPO.glob("*/__init__.py") if p.parent.name != "tests")
    assert packages, "no packages found"
    missing = [p for p in packages if not any(fnmatch.fnmatch(p, pattern) for pattern in include)]
    assert missing == [], f"add to [tool.setuptools.packages.find] include in pyproject.toml: {missing}"
