"""LLM-proposed domain specs: the gate refuses what does not load with a reason; against the real llama.cpp server
the whole path runs and refuses; a real shipped spec, served as if it were the LLM's answer by a tiny loopback
stub, passes the same gate and is stored in the work folder, never in domains/."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from domains.propose import GateConfig, Rejection, extract_yaml, judge_spec, propose_domains, try_spec
from domains.registry import DOMAINS_DIR, spec_path
from domains.spec import load_spec
from inference.client import LLMClient
from inference.endpoints import load_endpoints
from tests.inference.conftest import Local

REASONS = {"llm_error", "budget_exceeded", "empty", "not_yaml", "invalid_spec", "name_taken", "not_materialised",
           "synthesis_failed", "too_few_tasks"}


class AnswerStub:
    """An OpenAI-protocol server on loopback that answers every chat request with one fixed text."""

    def __init__(self, answer: str) -> None:
        body = json.dumps({"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": answer}}],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 900, "total_tokens": 1000}}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    def __enter__(self) -> AnswerStub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def weather_copy() -> str:
    """The shipped weather spec, renamed: the name of a shipped domain is refused (name_taken)."""
    text = spec_path("weather").read_text()
    assert text.startswith("domain: weather\n")
    return "domain: weather_copy\n" + text.split("\n", 1)[1]


def test_the_gate_refuses_what_does_not_load_and_says_why(weather_copy: str) -> None:
    cases = {
        "empty": "```yaml\n```",
        "not_yaml": "```python\nimport os\nos.system('true')\n```",
        "invalid_spec": "domain: library\ndescription: A library.\nnow: '2025-06-15T12:00:00'\ntables: []\n",
        "name_taken": spec_path("weather").read_text(),
    }
    for reason, text in cases.items():
        got = judge_spec("p", text)
        assert isinstance(got, Rejection) and got.reason == reason and got.detail, (reason, got)
    assert not isinstance(judge_spec("p", f"Here it is:\n```yaml\n{weather_copy}```\n"), Rejection)
    assert extract_yaml("```yml\na: 1\n```") == "a: 1"


@pytest.mark.llm
def test_propose_end_to_end_on_the_local_model_refuses_with_reasons(local: Local, tmp_path: Path) -> None:
    out = tmp_path / "proposed"
    with LLMClient(local.endpoint, cache_dir=tmp_path / "cache") as llm:
        result = propose_domains(llm, out, count=1, max_tokens=120)
    summary = result.summary()
    print("propose acceptance:", json.dumps(summary))
    assert result.attempted == 1 and len(llm.records) == 1
    assert all(r.reason in REASONS and r.detail and r.output for r in result.rejections)
    for p in result.accepted:  # SmolLM2-135M is not expected to get here; if it does, the spec must be real
        assert Path(p.path).is_relative_to(out) and load_spec(p.path).name == p.name


def test_a_known_good_spec_passes_the_same_gate_and_lands_in_the_work_folder(weather_copy: str,
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "proposed"
    endpoint = load_endpoints().get("local-smollm2")
    with AnswerStub(f"Here is the spec:\n```yaml\n{weather_copy}```") as stub:
        with LLMClient(endpoint.with_port(stub.port), cache_dir=tmp_path / "cache") as llm:
            # a whole shipped spec is longer than the 400 tokens a proposal may have; the client refuses an
            # answer longer than max_tokens, so this one is asked for with room to spare
            result = propose_domains(llm, out, count=1, gate=GateConfig(min_tasks=3, candidates=24),
                                     max_tokens=20_000)
    assert result.summary()["acceptance_rate"] == 1.0, result.rejections
    accepted = result.accepted[0]
    path = Path(accepted.path)
    assert path.is_relative_to(out) and not path.is_relative_to(DOMAINS_DIR)
    assert accepted.name == "weather_copy" and accepted.verified_tasks >= 3
    assert load_spec(path).spec_hash == accepted.spec_hash
    meta = json.loads((path.parent / "proposal.json").read_text())
    assert meta["verified_tasks"] == accepted.verified_tasks and meta["run_id"] == llm.run_id
    assert not (DOMAINS_DIR / "weather_copy").exists()


def test_a_spec_whose_data_breaks_its_own_invariants_is_refused(weather_copy: str) -> None:
    # an invariant that no redraw can satisfy: every region violates it, and nothing it may resample helps
    impossible = ("invariants:\n  - name: no_regions_at_all\n    table: regions\n"
                  "    rule: \"There are no regions.\"\n    resample: [name]\n"
                  "    sql: \"SELECT region_id FROM regions\"\n")
    text = weather_copy.replace("invariants:\n", impossible, 1)  # the new invariant first, the others after it
    judged = try_spec("p", f"```yaml\n{text}```")
    assert isinstance(judged, Rejection) and judged.reason == "invariants_broken", judged
    assert "no_regions_at_all" in judged.detail and "\n" not in judged.detail
