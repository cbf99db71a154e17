"""The endpoint registry: the shipped file loads, bad files fail with one clear line, health checks say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from inference.endpoints import EndpointError, check_health, load_endpoints
from tests.inference.fault_server import FaultServer
from toolscale.cli import main

GOOD = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "provider": "local", "pricing_key": "m"}


def _write(tmp_path: Path, body: object) -> Path:
    path = tmp_path / "endpoints.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_the_shipped_registry_has_the_local_default() -> None:
    registry = load_endpoints()
    local = registry.get()
    assert local.name == "local-smollm2" and local.server == "llama_cpp" and local.provider == "local"
    assert local.with_port(8310).base_url == "http://127.0.0.1:8310/v1"
    assert {e.server for e in registry.endpoints.values()} >= {"llama_cpp", "vllm"}


@pytest.mark.parametrize("body,expected", [
    ({"endpoints": {"a": {k: v for k, v in GOOD.items() if k != "model"}}}, "endpoint 'a': missing model"),
    ({"endpoints": {"a": {**GOOD, "modle": "x"}}}, "unknown field(s) modle"),
    ({"endpoints": {"a": {**GOOD, "base_url": "127.0.0.1:9"}}}, "is not an http(s) URL"),
    ({"endpoints": {"a": {**GOOD, "server": "ollama"}}}, "server 'ollama' is not one of llama_cpp, vllm"),
    ({"endpoints": {"a": {**GOOD, "server": "llama_cpp"}}}, "needs model_file"),
    ({"endpoints": {"a": {**GOOD, "server": "vllm", "base_url": "http://10.0.0.1:8000/v1"}}},
     "must listen on 127.0.0.1"),
    ({"endpoints": {"a": {**GOOD, "model": 7}}}, "model must be a string"),
    ({"endpoints": {"a": GOOD}, "default": "b"}, "default 'b' is not one of its endpoints"),
    ({"endpoints": {}}, "non-empty 'endpoints'"),
    (["a"], "non-empty 'endpoints'"),
])
def test_a_bad_registry_fails_with_one_clear_line(tmp_path: Path, body: object, expected: str) -> None:
    with pytest.raises(EndpointError) as caught:
        load_endpoints(_write(tmp_path, body))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_unknown_endpoint_and_missing_key_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = load_endpoints(_write(tmp_path, {"endpoints": {"a": {**GOOD, "api_key_env": "H4_TEST_KEY"}}}))
    with pytest.raises(EndpointError, match="no endpoint 'b' .* known: a"):
        registry.get("b")
    monkeypatch.delenv("H4_TEST_KEY", raising=False)
    with pytest.raises(EndpointError, match=r"needs an API key in \$H4_TEST_KEY"):
        registry.get("a").api_key()
    monkeypatch.setenv("H4_TEST_KEY", "secret")
    assert registry.get("a").api_key() == "secret"


def test_a_missing_gguf_is_named(tmp_path: Path) -> None:
    body = {"endpoints": {"a": {**GOOD, "server": "llama_cpp", "model_file": str(tmp_path / "none.gguf")}}}
    with pytest.raises(EndpointError, match="none.gguf does not exist"):
        load_endpoints(_write(tmp_path, body)).get().gguf_path()
    body["endpoints"]["a"]["model_file"] = "no_such_package_h4:x.gguf"
    with pytest.raises(EndpointError, match="package 'no_such_package_h4' is not installed"):
        load_endpoints(_write(tmp_path, body)).get().gguf_path()


def test_endpoints_command_reports_ok_and_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FaultServer() as server:
        path = _write(tmp_path, {"default": "up", "endpoints": {
            "up": {**GOOD, "base_url": f"http://127.0.0.1:{server.port}/v1"},
            "down": {**GOOD, "base_url": "http://127.0.0.1:9/v1"}}})
        assert check_health(load_endpoints(path).get()).models == ["fault-model"]
        assert main(["endpoints", "--json", "--registry", str(path)]) == 0
        listed = capsys.readouterr().out
        assert main(["endpoints", "--registry", str(path)]) == 0
        table = capsys.readouterr().out
    rows = {r["name"]: r for r in json.loads(listed)}
    assert rows["up"]["ok"] and rows["up"]["reason"] == "ok" and rows["up"]["latency_s"] > 0 and rows["up"]["default"]
    assert not rows["down"]["ok"] and rows["down"]["reason"] == "unreachable: connection refused"
    assert "up *" in table and "unreachable: connection refused" in table


def test_endpoints_command_with_a_bad_registry_says_what_is_wrong(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {"endpoints": {"a": {**GOOD, "provider": None}}})
    assert main(["endpoints", "--registry", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: endpoint registry") and "missing provider" in err and err.count("\n") == 1


def test_a_provider_endpoint_without_its_key_is_not_contacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    monkeypatch.delenv("TOOLSCALE_TEST_UNSET_KEY", raising=False)
    remote = replace(load_endpoints().get("openai-gpt-4o-mini"), api_key_env="TOOLSCALE_TEST_UNSET_KEY")
    with FaultServer() as server:  # were a request sent, this server would answer and count it
        health = check_health(replace(remote, base_url=f"http://127.0.0.1:{server.port}/v1"), timeout=2)
        assert server.gets == 0
        monkeypatch.setenv("TOOLSCALE_TEST_UNSET_KEY", "k")  # with the key set, the same check does ask
        assert check_health(replace(remote, base_url=f"http://127.0.0.1:{server.port}/v1"), timeout=2).ok
        assert server.gets == 1
    assert not health.ok and health.reason == "not checked: $TOOLSCALE_TEST_UNSET_KEY is not set"
