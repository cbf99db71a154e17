"""Read spec YAML with limits, so a hostile file fails fast: size, nesting depth, aliases and expanded size.

An alias bomb ("billion laughs") is small on disk and cheap to parse, because aliases share one node; it
explodes only when the data is walked (validation, hashing). The composed node graph is therefore measured
with sharing taken into account, before any Python objects are built from it.

Parsing uses libyaml (PyYAML's C parser) when PyYAML has it, else the pure-Python one; the document means the
same either way (``tests/domains/test_safeyaml.py`` loads every shipped YAML file both ways). With libyaml the
aliases and the nesting are counted on the event stream first (iterative, so a deep document cannot exhaust
the C composer's stack), and only a document within the limits is composed. The pure-Python scanner took
about 1.3 s per process to read the twelve shipped specs; libyaml takes a tenth of that.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_SPEC_BYTES = 2_000_000  # the largest shipped spec is ~63 kB
MAX_ALIASES = 200  # the shipped specs use 1
MAX_DEPTH = 64  # nesting of mappings and sequences; the shipped specs nest at most ~10
MAX_EXPANDED_NODES = 1_000_000  # scalars + collections once every alias is expanded; a spec has ~20,000


class YamlLimitError(ValueError):
    """The YAML text is over one of the loader's limits; the message says which."""


_FAST = getattr(yaml, "CSafeLoader", None)


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and nesting while it composes the node graph."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise YamlLimitError(f"more than {MAX_ALIASES} YAML aliases (line {mark.line + 1}); "
                                     f"write the values out instead")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YamlLimitError(f"YAML nested deeper than {MAX_DEPTH} levels (line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def expanded_size(root: yaml.Node) -> int:
    """How many nodes the document has once every alias is expanded (iterative, memoised per shared node)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 1) for c in children), MAX_EXPANDED_NODES + 1)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _check_events(text: str, fast: type) -> None:
    """The alias and nesting limits, checked on libyaml's event stream before anything is composed."""
    aliases = depth = 0
    for event in yaml.parse(text, Loader=fast):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YamlLimitError(f"more than {MAX_ALIASES} YAML aliases (line {event.start_mark.line + 1}); "
                                     f"write the values out instead")
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlLimitError(f"YAML nested deeper than {MAX_DEPTH} levels (line {event.start_mark.line + 1})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml(text: str, fast: bool = True) -> Any:
    """Parse one YAML document under the limits; raise ``YamlLimitError`` or a ``yaml.YAMLError``. ``fast``:
    libyaml where PyYAML has it (False: always the pure-Python parser, for comparing the two). Text that libyaml
    finds broken is read again by the pure-Python parser, so a bad file gets the same message either way."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise YamlLimitError(f"the YAML text is over {MAX_SPEC_BYTES:,} bytes")
    if fast and _FAST is not None:
        try:
            _check_events(text, _FAST)
            return _compose_and_construct(_FAST(text))
        except yaml.YAMLError:
            pass  # the pure-Python parser says what is wrong, in the words it always has
    return _compose_and_construct(_LimitedLoader(text))


def _compose_and_construct(loader: Any) -> Any:
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        size = expanded_size(root)
        if size > MAX_EXPANDED_NODES:
            raise YamlLimitError(f"the YAML expands to more than {MAX_EXPANDED_NODES:,} values once its aliases "
                                 f"are resolved (an alias bomb?)")
        return loader.construct_document(root)
    finally:
        loader.dispose()
