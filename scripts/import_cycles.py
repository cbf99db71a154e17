"""List the import cycles in train/, between its modules and between its packages, and private names imported
across files; print "none" for each that has none, and exit 1 when any is found.

    python scripts/import_cycles.py            # train/ of this checkout
    python scripts/import_cycles.py --graph    # also print each module's imports inside train/

Every import counts, including one inside a function: a deferred import still ties the two files together.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: str, root: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name."""
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(path: Path, name: str, known: dict[str, Path]) -> Iterator[tuple[str, list[str]]]:
    """(module imported, names taken from it) for each import of a module in ``known``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:  # ``from train.stages import run`` imports the module train.stages.run
                    yield sub, []
                elif base in known:
                    yield base, [alias.name]


def graph(package: str, root: Path) -> tuple[dict[str, set[str]], list[str]]:
    """Each module's imports within ``package``, and each private name imported from another file."""
    known = modules(package, root)
    edges: dict[str, set[str]] = {m: set() for m in known}
    private: list[str] = []
    for name, path in known.items():
        for target, names in imports_of(path, name, known):
            if target == name:
                continue
            edges[name].add(target)
            private += [f"{name} imports {n} from {target}" for n in names if n.startswith("_") and not n.startswith("__")]
    return edges, private


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted: every import cycle
    lies inside one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def package_edges(edges: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The same graph between the subpackages of ``package`` (train.environment, train.stages, ...)."""
    def top(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else m

    out: dict[str, set[str]] = {}
    for src, targets in edges.items():
        if src == package:
            continue
        out.setdefault(top(src), set()).update(top(t) for t in targets if top(t) != top(src) and t != package)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="train")
    parser.add_argument("--graph", action="store_true", help="print each module's imports inside the package")
    args = parser.parse_args(argv)
    edges, private = graph(args.package, ROOT)
    packages = package_edges(edges, args.package)
    if args.graph:
        for name in sorted(edges):
            print(f"{name} -> {', '.join(sorted(edges[name])) or '-'}")
    module_cycles, package_cycles = cycles(edges), cycles(packages)
    print(f"{len(edges)} modules in {args.package}/, {sum(map(len, edges.values()))} imports between them")
    print("packages: " + "; ".join(f"{p} -> {', '.join(sorted(t)) or '-'}" for p, t in sorted(packages.items())))
    print("module cycles: " + ("none" if not module_cycles else " | ".join(" <-> ".join(c) for c in module_cycles)))
    print("package cycles: " + ("none" if not package_cycles else " | ".join(" <-> ".join(c) for c in package_cycles)))
    print("private names imported across files: " + ("none" if not private else "; ".join(private)))
    return 1 if module_cycles or package_cycles or private else 0


if __name__ == "__main__":
    sys.exit(main())
