"""The spec loader's two parsers (libyaml and pure Python) read every shipped YAML file to the same data, and
both keep the limits."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from domains.safeyaml import YamlLimitError, load_yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for folder in ("domains", "flows", "pipeline") for p in (REPO / folder).rglob("*.yaml")) + [
    REPO / "prefect.yaml"]


def test_there_is_a_fast_parser_here() -> None:
    assert getattr(yaml, "CSafeLoader", None) is not None, "PyYAML was built without libyaml: specs load slowly"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_yaml_file_reads_the_same_with_both_parsers(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert load_yaml(text) == load_yaml(text, fast=False) == yaml.safe_load(text)


HOSTILE = {
    "aliases": ("x: &x 1\nitems: [" + ", ".join(["*x"] * 300) + "]\n", "more than 200 YAML aliases (line 2)"),
    "depth": ("a:\n  " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels (line 2)"),
    "bomb": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)), "alias bomb"),
}


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "python"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_both_parsers_refuse_what_is_over_a_limit_with_the_same_words(kind: str, fast: bool) -> None:
    text, words = HOSTILE[kind]
    with pytest.raises(YamlLimitError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_yaml(text, fast=fast)


@pytest.mark.parametrize("fast", [True, False], ids=["libyaml", "python"])
def test_broken_yaml_and_python_tags_are_yaml_errors_in_both(fast: bool) -> None:
    for text in ("domain: [unclosed\n  tools: {\n", "domain: !!python/object/apply:os.system ['true']\n",
                 "a: 1\n---\nb: 2\n"):
        with pytest.raises(yaml.YAMLError):
            load_yaml(text, fast=fast)
