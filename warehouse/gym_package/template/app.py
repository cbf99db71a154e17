"""NeMo Gym resources server of one exported ToolScale domain: each domain tool is an endpoint, a session is a
private copy of the task's database, and ``/verify`` scores the session with the ToolScale verifier's rules.

Started by Gym's launcher (``ng_run``) from this folder's config (``configs/``); it needs nemo-gym and jsonschema,
and nothing of the ToolScale project. ``/seed_session`` takes a data row's ``task_id`` and opens the session on that
task's database (its seed, then its setup calls); each tool call runs in the caller's session (Gym's session
cookie); ``/verify`` judges the calls the session made and the assistant's words in the response, returns the
reward with every check's verdict and reason, and closes the session. A session never verified is reaped once idle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ConfigDict

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import SESSION_ID_KEY

from toolscale_env.runtime import Domain, EnvironmentError_, Limits, Sessions

DATA_DIR = Path(__file__).resolve().parent / "data"
MAX_BODY_BYTES = 256_000  # a tool call's JSON body; a larger one is refused unread


class ToolScaleConfig(BaseResourcesServerConfig):
    max_calls: int = Limits.max_calls
    max_session_s: float = Limits.max_session_s
    max_idle_s: float = Limits.max_idle_s
    max_sessions: int = Limits.max_sessions
    data_dir: str = ""  # the domain's data/ folder; empty: the one beside this file


class ToolScaleSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")
    task_id: str
    domain: Optional[str] = None
    seed: Optional[int] = None


class ToolScaleSeedSessionResponse(BaseSeedSessionResponse):
    task_id: str = ""


class ToolScaleVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class ToolScaleVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")
    solved: bool = False
    checks: dict[str, Any] = {}
    failed: list[str] = []


def assistant_text(response: Any) -> str:
    """Everything the assistant said in a Responses API output: the text of its output messages, in order."""
    texts: list[str] = []
    for item in (response or {}).get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    return "\n".join(texts)


class ToolScaleResourcesServer(SimpleResourcesServer):
    config: ToolScaleConfig
    sessions: Any = None

    def setup_webserver(self) -> FastAPI:
        limits = Limits(self.config.max_calls, self.config.max_session_s, self.config.max_idle_s,
                        self.config.max_sessions)
        self.sessions = Sessions(Domain(Path(self.config.data_dir) if self.config.data_dir else DATA_DIR), limits)
        app = super().setup_webserver()
        for tool in self.sessions.domain.spec["tools"]:
            if not tool["setup"]:  # a setup call is a task's initial state, never the agent's to make
                app.post(f"/{tool['name']}")(self._tool_endpoint(tool["name"]))
        app.post("/close_session")(self.close_session)
        app.post("/{name}")(self.unknown_tool)  # registered last: only names no route above took
        return app

    def _session_id(self, request: Request) -> str:
        return request.session.get(SESSION_ID_KEY, "")

    def _tool_endpoint(self, name: str) -> Any:
        async def call(request: Request) -> JSONResponse:
            return await self._call(request, name)
        call.__name__ = name
        return call

    async def _call(self, request: Request, name: str) -> JSONResponse:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": f"{name}: the request body is {len(body):,} bytes; the limit is "
                                          f"{MAX_BODY_BYTES:,}"}, status_code=413)
        try:
            arguments = json.loads(body or b"{}")
        except ValueError as exc:
            return JSONResponse({"error": f"{name}: the arguments are not JSON ({exc})"}, status_code=400)
        try:
            result = self.sessions.call(self._session_id(request), name, arguments)
        except EnvironmentError_ as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return JSONResponse(result.observation())

    async def unknown_tool(self, request: Request, name: str) -> JSONResponse:
        return await self._call(request, name)

    async def seed_session(self, request: Request, body: ToolScaleSeedSessionRequest) -> ToolScaleSeedSessionResponse:
        try:
            self.sessions.open(body.task_id, self._session_id(request))
        except EnvironmentError_ as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return ToolScaleSeedSessionResponse(task_id=body.task_id)

    async def verify(self, request: Request, body: ToolScaleVerifyRequest) -> ToolScaleVerifyResponse:
        session_id = self._session_id(request)
        try:
            verdict = self.sessions.verify(session_id, assistant_text(body.response.model_dump()))
        except EnvironmentError_ as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        self.sessions.close(session_id)
        return ToolScaleVerifyResponse(**body.model_dump(), reward=verdict["reward"], solved=verdict["solved"],
                                       checks=verdict["checks"], failed=verdict["failed"])

    async def close_session(self, request: Request) -> JSONResponse:
        return JSONResponse({"closed": self.sessions.close(self._session_id(request))})


if __name__ == "__main__":
    ToolScaleResourcesServer.run_webserver()
