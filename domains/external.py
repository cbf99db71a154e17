"""External seed data: find a JSON file that another installed package ships, and map its records to rows.

A spec names its sources (``sources:``: a package and a resource inside it, or a path) and a table says which
records of a source become its rows (``from:``). Nothing is copied into this repository: the file is read where
the other package installed it. A package is found in the current interpreter (without importing it), else in
the site-packages folders listed in ``$TOOLSCALE_EXTERNAL_SITE`` (joined with ``os.pathsep``), else in the
``.venv-*`` virtual environments at the repository root (``scripts/setup_tau2.sh`` makes ``.venv-tau2``).

``to_records`` is the inverse: it turns a database's rows back into the source's nested shape, so that a state
can be compared with the other implementation's.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domains.spec import DomainSpec, Table

SITE_ENV = "TOOLSCALE_EXTERNAL_SITE"
REPO_ROOT = Path(__file__).resolve().parent.parent
MAX_EXTERNAL_BYTES = 200_000_000


class ExternalDataMissing(FileNotFoundError):
    """The external JSON cannot be found; the message is one line saying how to provide it."""


@dataclass(frozen=True)
class Source:
    name: str
    package: str | None = None
    resource: str | None = None
    path: str | None = None
    hint: str = ""


@dataclass(frozen=True)
class TableSource:
    """Which records of a source become a table's rows: ``records`` is a dotted path to a dict keyed by id
    (or a list); ``each`` optionally descends into one nested collection per record (child rows)."""

    source: str
    records: str
    each: str | None = None


def site_folders() -> list[Path]:
    """Where packages that are not installed in this interpreter may be found."""
    listed = [Path(p).expanduser() for p in os.environ.get(SITE_ENV, "").split(os.pathsep) if p.strip()]
    venvs = sorted(REPO_ROOT.glob(".venv-*/lib/python3*/site-packages"))
    return listed + venvs


def _package_dir(package: str) -> Path | None:
    top = package.split(".")[0]
    try:
        found = importlib.util.find_spec(top)  # finds without importing the package
    except (ImportError, ValueError):
        found = None
    if found is not None and found.submodule_search_locations:
        return Path(list(found.submodule_search_locations)[0]).joinpath(*package.split(".")[1:])
    for site in site_folders():
        candidate = site.joinpath(*package.split("."))
        if candidate.is_dir():
            return candidate
    return None


def resolve(source: Source) -> Path:
    """The file a source names; raise ``ExternalDataMissing`` with one line on how to provide it."""
    if source.path:
        path = Path(os.path.expandvars(source.path)).expanduser()
        if path.is_file():
            return path
        raise ExternalDataMissing(f"external data {source.name!r}: no file at {path}. {source.hint}".strip())
    assert source.package and source.resource
    folder = _package_dir(source.package)
    if folder is None:
        raise ExternalDataMissing(
            f"external data {source.name!r}: package {source.package!r} is not installed here; install it, or set "
            f"${SITE_ENV} to the site-packages folder that holds it. {source.hint}".strip())
    path = folder / source.resource
    if not path.is_file():
        raise ExternalDataMissing(f"external data {source.name!r}: {source.package} at {folder} has no "
                                  f"{source.resource}. {source.hint}".strip())
    return path


def available(source: Source) -> bool:
    try:
        resolve(source)
    except ExternalDataMissing:
        return False
    return True


@cache
def _load_json(path: Path, mtime: float) -> Any:
    if path.stat().st_size > MAX_EXTERNAL_BYTES:
        raise ValueError(f"{path} is over {MAX_EXTERNAL_BYTES:,} bytes")
    return json.loads(path.read_text(encoding="utf-8"))


def load(source: Source) -> Any:
    path = resolve(source)
    return _load_json(path, path.stat().st_mtime)


def _walk(value: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted else []:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _items(collection: Any, where: str) -> list[tuple[Any, Any]]:
    """(key, record) pairs of a dict keyed by id, or (index, element) pairs of a list."""
    if isinstance(collection, dict):
        return list(collection.items())
    if isinstance(collection, list):
        return list(enumerate(collection))
    if collection is None:
        return []
    raise ValueError(f"{where} is a {type(collection).__name__}, not a mapping or a list")


@dataclass(frozen=True)
class Record:
    """One external record as a table row sees it: its own value, key, position, and its parent."""

    value: Any
    key: Any
    index: int
    ordinal: int
    parent: Record | None = None

    def field(self, path: str) -> Any:
        """``@key``, ``@index``, ``@ordinal``, ``@value``, ``@parent.<path>`` or a dotted path into the value."""
        if path.startswith("@parent."):
            return None if self.parent is None else self.parent.field(path.removeprefix("@parent."))
        special = {"@key": self.key, "@index": self.index, "@ordinal": self.ordinal, "@value": self.value}
        if path in special:
            return special[path]
        return _walk(self.value, path)


def records(data: Any, spec_source: TableSource) -> list[Record]:
    """The records a table's ``from:`` names, in file order (children after their parent's order)."""
    top = _walk(data, spec_source.records)
    out: list[Record] = []
    for i, (key, value) in enumerate(_items(top, spec_source.records)):
        parent = Record(value, key, i, i + 1)
        if spec_source.each is None:
            out.append(parent)
            continue
        for j, (ckey, cvalue) in enumerate(_items(_walk(value, spec_source.each), f"{spec_source.records}.{key}."
                                                                                 f"{spec_source.each}")):
            out.append(Record(cvalue, ckey, j, len(out) + 1, parent))
    return out


def field_value(record: Record, recipe: dict[str, Any]) -> Any:
    """A ``field`` seed recipe applied to one record: the value at ``path``, JSON text when ``json``."""
    value = record.field(recipe["path"])
    if value is None:
        value = recipe.get("default")
    if recipe.get("json") and value is not None:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return value


def parent_column(table: Table) -> str | None:
    """The column of a child table that holds its parent record's key (``@parent.@key``), or None."""
    return next((c.name for c in table.columns if c.seed["kind"] == "field" and c.seed["path"] == "@parent.@key"),
                None)


def to_records(spec: DomainSpec, rows_of: dict[str, list[dict[str, Any]]],
               keep: dict[str, set[Any]] | None = None) -> dict[str, Any]:
    """Rebuild the external nested shape from table rows (the inverse of the ``from:``/``field`` mapping).

    A table whose primary key is a position (``@ordinal`` or ``@index``) becomes a list in key order; any other
    becomes a dict keyed by its primary key, or by its ``@key`` column when it has one (a child dict whose keys
    repeat across parents); fields whose value is null are left out. Root tables go to ``records``; a child
    table goes back into its parent's record at ``each`` (every parent gets the collection, empty when it has no rows). Columns that only
    link (``@parent...``, ``@ordinal``, ``@index``, ``@key``) are left out; a ``@value`` column makes a list of
    scalars. ``keep`` (records path -> keys) rebuilds only those root records and their children."""
    out: dict[str, Any] = {}
    roots: dict[str, dict[Any, dict[str, Any]]] = {}
    sourced = [t for t in spec.tables if t.source is not None]
    for table in sorted(sourced, key=lambda t: t.source is not None and t.source.each is not None):  # roots first
        src = table.source
        assert src is not None
        fields = [(c, c.seed) for c in table.columns if c.seed["kind"] == "field"]
        pk_path = next((r["path"] for c, r in fields if c.name == table.primary_key), "")
        as_list = pk_path in ("@ordinal", "@index")
        value_col = next((c.name for c, r in fields if r["path"] == "@value"), None)
        parent_col = next((c.name for c, r in fields if r["path"] == "@parent.@key"), None)
        # a child dict whose keys repeat across parents (flights.<no>.dates.<date>): the row key is a position
        # and a ``@key`` column holds the dict key
        key_col = next((c.name for c, r in fields if r["path"] == "@key" and c.name != table.primary_key), None)
        if key_col is not None:
            as_list = False
        if src.each is not None:
            for parent in roots.get(src.records, {}).values():
                _put(parent, src.each, [] if as_list else {})
        rows = rows_of.get(table.name, [])
        if keep is not None:
            wanted = keep.get(src.records, set())
            rows = [r for r in rows if (r[table.primary_key] if src.each is None else r[parent_col]) in wanted]
        for row in sorted(rows, key=lambda r: _sort_key(r[table.primary_key])):
            if value_col is not None:
                record: Any = _decode(table, value_col, row[value_col])
            else:
                record = {}
                for col, recipe in fields:
                    value = _decode(table, col.name, row[col.name], recipe)
                    # an absent optional field stays absent, so no empty parent object appears for it
                    if not recipe["path"].startswith("@") and value is not None:
                        _put(record, recipe["path"], value)
            if src.each is None:
                roots.setdefault(src.records, {})[row[table.primary_key]] = record
                continue
            parent = roots.get(src.records, {}).get(row[parent_col]) if parent_col else None
            if parent is None:
                continue
            holder = _walk(parent, src.each)
            if isinstance(holder, dict):
                holder[row[key_col or table.primary_key]] = record
            else:
                holder.append(record)
    for path, by_key in roots.items():
        _put(out, path, by_key)
    return out


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def _decode(table: Table, column: str, value: Any, recipe: dict[str, Any] | None = None) -> Any:
    col = table.column(column)
    recipe = recipe or (col.seed if col else {})
    if value is None:
        return None
    if recipe.get("json"):
        return json.loads(value)
    if col is not None and col.type == "boolean":
        return bool(value)
    return value


def _put(record: dict[str, Any], dotted: str, value: Any) -> None:
    if not dotted:
        return
    parts = dotted.split(".")
    for part in parts[:-1]:
        record = record.setdefault(part, {})
    record[parts[-1]] = value
