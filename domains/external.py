"""External seed data: find a JSON (or TOML) file that another installed package ships, and map its records to rows.

A spec names its sources (``sources:``: a package and a resource inside it, or a path) and a table says which
records of a source become its rows (``from:``). Nothing is copied into this repository: the file is read where
the other package installed it. A package is found in the current interpreter (without importing it), else in
the site-packages folders listed in ``$TOOLSCALE_EXTERNAL_SITE`` (joined with ``os.pathsep``), else in the
``.venv-*`` virtual environments at the repository root (``scripts/setup_tau2.sh`` makes ``.venv-tau2``).

A spec may be written by an LLM, so its paths are data, never instructions: no environment variable or ``~`` is
expanded, a resource stays inside its package's folder, and a ``path`` is relative to one of the folders the
operator named (``--external-site`` / ``$TOOLSCALE_EXTERNAL_SITE``) and stays inside it (symlinks resolved).

``to_records`` is the inverse: it turns a database's rows back into the source's nested shape, so that a state
can be compared with the other implementation's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tomllib
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


def operator_sites() -> list[Path]:
    """The folders the operator named in ``$TOOLSCALE_EXTERNAL_SITE`` (``--external-site`` puts its DIR there)."""
    return [Path(p).expanduser() for p in os.environ.get(SITE_ENV, "").split(os.pathsep) if p.strip()]


def site_folders() -> list[Path]:
    """Where packages that are not installed in this interpreter may be found."""
    venvs = sorted(REPO_ROOT.glob(".venv-*/lib/python3*/site-packages"))
    return operator_sites() + venvs


def spec_path_problem(text: str) -> str | None:
    """Why a path written in a spec (a source's ``path`` or ``resource``) is refused, or None. The message never
    repeats the path: what an LLM wrote there may name an environment variable."""
    if "$" in text:
        return "names an environment variable ($); spec paths are taken literally and never expanded"
    if text.startswith("~"):
        return "starts with ~; spec paths are taken literally and never expanded"
    if not text.isprintable():
        return "holds a control character"
    if text.startswith(("/", "\\")) or (len(text) > 1 and text[1] == ":"):
        return (f"is absolute; write it relative to a folder named with --external-site or ${SITE_ENV}"
                " (a resource: relative to its package)")
    if ".." in text.replace("\\", "/").split("/"):
        return "climbs out of its folder (..)"
    return None


def within(folder: Path, relative: str) -> Path | None:
    """``folder/relative`` when it is a file that, symlinks resolved, lies inside ``folder``; else None."""
    try:
        base = folder.resolve()
        path = (base / relative).resolve()
    except (OSError, RuntimeError):
        return None
    return path if path.is_relative_to(base) and path.is_file() else None


def package_dir(package: str) -> Path | None:
    """The folder of an installed package (found without importing it), or None."""
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
    for written in (source.path, source.resource):
        problem = spec_path_problem(written) if written else None
        if problem:
            raise ExternalDataMissing(f"external data {source.name!r}: its path {problem}")
    if source.path:
        sites = operator_sites()
        for site in sites:
            path = within(site, source.path)
            if path is not None:
                return path
        raise ExternalDataMissing(
            f"external data {source.name!r}: no file {source.path} in the {len(sites)} folder(s) named with "
            f"--external-site or ${SITE_ENV}. {source.hint}".strip())
    assert source.package and source.resource
    folder = package_dir(source.package)
    if folder is None:
        raise ExternalDataMissing(
            f"external data {source.name!r}: package {source.package!r} is not installed here; install it, or set "
            f"${SITE_ENV} to the site-packages folder that holds it. {source.hint}".strip())
    path = within(folder, source.resource)
    if path is None:
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
    """A source file's content: JSON, TOML (``.toml``, tau2's telecom) or, for ``.md``/``.txt``, the text."""
    if path.stat().st_size > MAX_EXTERNAL_BYTES:
        raise ValueError(f"{path} is over {MAX_EXTERNAL_BYTES:,} bytes")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix in (".md", ".txt"):
        return text
    return json.loads(text)


def load(source: Source) -> Any:
    path = resolve(source)
    return _load_json(path, path.stat().st_mtime)


WHOLE = "."  # ``records: "."``: the whole document is one record (tau2's user_db.toml: one device)


def _walk(value: Any, dotted: str) -> Any:
    for part in dotted.split(".") if dotted and dotted != WHOLE else []:
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
    pairs = [(None, top)] if spec_source.records == WHOLE else _items(top, spec_source.records)
    out: list[Record] = []
    for i, (key, value) in enumerate(pairs):
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
        if path == WHOLE:  # one record: its fields are the document's own
            for record in by_key.values():
                _merge(out, record)
            continue
        _put(out, path, by_key)
    return out


def _merge(into: dict[str, Any], record: dict[str, Any]) -> None:
    for key, value in record.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def policy_text(spec: DomainSpec) -> str:
    """The policy an export ships: the spec's own, then each of ``policy_sources`` read from where its package
    installed it (tau2's telecom policy and troubleshooting manual), at the time of the call."""
    parts = [spec.policy]
    for name in spec.policy_sources:
        text = load(spec.sources[name])
        if not isinstance(text, str):
            raise ValueError(f"policy source {name!r} is not a text file (.md or .txt)")
        parts.append(text.strip())
    return "\n\n".join(p for p in parts if p)


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
