"""Where domains come from: every ``<name>/<name>.yaml`` under the shipped folder or a user's folders, plus
ToolScale's published per-domain figures (paper, Table 5).

A domain is only its folder: nothing here lists names by hand. A user's own domains live in extra folders
named by ``$TOOLSCALE_DOMAINS_DIR`` (several joined with ``os.pathsep``); the CLI's ``--domains-dir`` sets it
so that worker processes see the same domains.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from domains.engine import DomainEngine
from domains.spec import DomainSpec, load_spec

DOMAINS_DIR = Path(__file__).resolve().parent
DOMAINS_DIR_ENV = "TOOLSCALE_DOMAINS_DIR"
# ToolScale Table 5: (tools, database rows, tasks) per domain; our domains must meet or exceed each figure.
TABLE5 = {
    "finance": (22, 686, 396), "sport": (19, 423, 247), "ecommerce": (15, 577, 343),
    "medicine": (19, 920, 622), "entertainment": (24, 852, 561), "railway": (25, 790, 414),
    "restaurant": (23, 683, 348), "education": (21, 816, 426), "travel": (15, 752, 331),
    "weather": (14, 549, 375),
}
# a domain without a Table 5 figure gets this many tasks when no count is asked for
DEFAULT_TASKS = 300
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _discover(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {sub.name: sub / f"{sub.name}.yaml" for sub in sorted(folder.iterdir())
            if _NAME.fullmatch(sub.name) and (sub / f"{sub.name}.yaml").is_file()}


_NOT_DEFAULT = re.compile(r"^default:\s*false\s*(#.*)?$", re.MULTILINE)


def is_default(path: Path) -> bool:
    """Whether a spec file takes part in a plain regenerate: its top-level ``default: false`` says not (read by
    a line scan, not a full load: discovery runs at import time and must stay cheap)."""
    try:
        return _NOT_DEFAULT.search(path.read_text(encoding="utf-8", errors="replace")) is None
    except OSError:
        return True


def extra_dirs() -> list[Path]:
    """The user's domain folders from ``$TOOLSCALE_DOMAINS_DIR``, in the order given."""
    raw = os.environ.get(DOMAINS_DIR_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def check_extra_dirs() -> None:
    """Raise ``ValueError`` naming the first folder in ``$TOOLSCALE_DOMAINS_DIR`` that is unusable."""
    for folder in extra_dirs():
        if not folder.is_dir():
            raise ValueError(f"domains folder {folder} does not exist or is not a folder")


def domain_paths() -> dict[str, Path]:
    """Every known domain and its spec file: shipped ones in Table 5 order, then the rest by name.
    A user's folder cannot redefine a domain that already exists (one name, one spec)."""
    return dict(_domain_paths(os.environ.get(DOMAINS_DIR_ENV, "")))


@cache
def _domain_paths(env_value: str) -> dict[str, Path]:
    # keyed by the variable's value: lookups sit on hot paths (every tool call), folders are scanned once
    found = _discover(DOMAINS_DIR)
    for folder in extra_dirs():
        for name, path in _discover(folder).items():
            if name in found and found[name] != path:
                raise ValueError(f"domain {name!r} is defined twice: {found[name]} and {path}")
            found[name] = path
    return {name: found[name] for name in sorted(found, key=domain_order)}


def domain_order(name: str) -> tuple[int, str]:
    """Canonical order of domains (it fixes the order of records, hence snapshot ids)."""
    order = list(TABLE5)
    return (order.index(name), "") if name in TABLE5 else (len(order), name)


def available_domains() -> list[str]:
    return list(domain_paths())


# the shipped default domains, discovered; kept as a name because tests, benches and a plain regenerate use them.
# Imported domains (``default: false``, e.g. tau2's retail) are known by name but not listed here.
DOMAIN_NAMES = tuple(sorted((n for n, p in _discover(DOMAINS_DIR).items() if is_default(p)), key=domain_order))


def data_available(name: str) -> bool:
    """Whether a domain can be materialised here: true unless it reads external data that is not installed."""
    from domains import external

    return all(external.available(s) for s in get_spec(name).sources.values())


def unknown_domain(name: str) -> str:
    return f"unknown domain {name!r}; known: {', '.join(available_domains())}"


def spec_path(name: str) -> Path:
    paths = domain_paths()
    if name not in paths:
        raise KeyError(unknown_domain(name))
    return paths[name]


def default_task_count(name: str) -> int:
    return TABLE5[name][2] if name in TABLE5 else DEFAULT_TASKS


@cache
def _load(path: Path) -> DomainSpec:
    return load_spec(path)


def get_spec(name: str) -> DomainSpec:
    return _load(spec_path(name))


@cache
def _engine(path: Path, seed: int) -> DomainEngine:
    return DomainEngine(_load(path), seed)


def get_engine(name: str, seed: int = 0) -> DomainEngine:
    """The materialised domain for (name, seed), built once per process."""
    return _engine(spec_path(name), seed)
