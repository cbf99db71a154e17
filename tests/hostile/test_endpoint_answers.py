"""Hostile ``/models`` answers: one endpoint answering deep JSON, a wrong shape, a huge body or no JSON at all is
one line of its own in ``toolscale endpoints``, and the healthy endpoints beside it are still listed as ok."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference.endpoints import model_ids
from tests.hostile.test_cli import run_cli

GOOD = json.dumps({"object": "list", "data": [{"id": "good-model", "object": "model"}]}).encode()
ANSWERS: dict[str, bytes] = {
    "deep-list": b'{"data": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    "deep-object": b'{"data": [' + b'{"id": ' * 20_000 + b'"x"' + b"}" * 20_000 + b"]}",
    "data-is-a-number": b'{"data": 7}',
    "data-is-a-string": b'{"data": "models"}',
    "data-is-an-object": b'{"data": {"id": "m"}}',
    "ids-are-numbers": b'{"data": [{"id": 1}]}',
    "rows-are-strings": b'{"data": ["m"]}',
    "top-is-a-list": b'[{"id": "m"}]',
    "not-json": b"<html>hello</html>",
    "huge": b'{"data": [' + b'{"id": "m"},' * 200_000 + b'{"id": "m"}]}',
    "nan": b'{"data": [{"id": NaN}]}',
}


class _Answers(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        mode = self.path.strip("/").split("/")[0]
        body = ANSWERS.get(mode, GOOD)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def answers() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _registry(tmp_path: Path, base: str, modes: list[str]) -> Path:
    endpoints = {"healthy": {"base_url": f"{base}/good/v1", "model": "good-model", "provider": "local",
                             "pricing_key": "m"}}
    endpoints.update({mode: {"base_url": f"{base}/{mode}/v1", "model": "m", "provider": "local", "pricing_key": "m"}
                      for mode in modes})
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump({"default": "healthy", "endpoints": endpoints}))
    return path


@pytest.mark.parametrize("mode", sorted(ANSWERS))
def test_one_odd_models_answer_is_its_own_line_and_the_healthy_one_is_listed(mode: str, answers: str,
                                                                          tmp_path: Path) -> None:
    out = run_cli("endpoints", "--registry", str(_registry(tmp_path, answers, [mode])), "--json", timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["healthy"]["ok"] and rows["healthy"]["reason"] == "ok"
    assert not rows[mode]["ok"] and "not OpenAI-protocol JSON" in rows[mode]["reason"]
    assert "\n" not in rows[mode]["reason"] and len(rows[mode]["reason"]) < 200


def test_the_table_lists_every_endpoint_one_line_each(answers: str, tmp_path: Path) -> None:
    out = run_cli("endpoints", "--registry", str(_registry(tmp_path, answers, sorted(ANSWERS))), timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 + 1 + len(ANSWERS) + 1  # heading, healthy, one per broken, the footnote
    assert sum(line.rstrip().endswith("  ok") for line in lines) == 1


def test_model_ids_reads_the_protocol_answer() -> None:
    assert model_ids(GOOD) == ["good-model"]
