"""A domain's tools over MCP (the official ``mcp`` SDK, streamable HTTP): one private database per MCP session,
a ``verify`` tool, and per-session caps on calls and time.

Each MCP session (its ``Mcp-Session-Id``) gets a fresh copy of the domain's seeded database; ``start_task`` puts it
at a published task's start (its database seed, then its setup calls) so that ``verify`` can judge what the session
did with the project's verifier (``verifiers.verify.verify``: the task's criteria decide the reward, every check
gives its reason). Tool calls have the engine's semantics and errors (``domains.engine.Database.call``); a call past
the session's caps is refused unrun. A session idle for ``max_idle_s`` is reaped, by this server and by the SDK.
Binds to 127.0.0.1 unless told otherwise. ``toolscale serve-env DOMAIN`` runs it.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from domains.engine import Database, ToolCall
from domains.registry import get_engine, get_spec
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify

ENV_TOOLS = ("start_task", "verify")
MAX_BODY_BYTES = 256_000  # one MCP request; a larger one is refused by the SDK (HTTP 413)


@dataclass(frozen=True)
class EnvLimits:
    """The episode's bounds (train/environment/env.py: 50 turns of at most 16 calls, 300 s), plus the number of
    sessions open at once."""

    max_calls: int = 800
    max_session_s: float = 300.0
    max_idle_s: float = 300.0
    max_sessions: int = 256


class EnvError(Exception):
    """A request the environment refuses (unknown task, no task to verify, a cap reached); the message says why."""


@dataclass
class EnvSession:
    db: Database
    task: VerifiableTask | None = None
    task_id: str | None = None
    calls: list[ToolCall] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class DomainEnv:
    """The sessions of one domain, keyed by MCP session id; ``tasks`` are the verifiable tasks ``start_task`` knows."""

    def __init__(self, domain: str, tasks: dict[str, VerifiableTask] | None = None, seed: int = 0,
                 limits: EnvLimits = EnvLimits()):
        self.spec, self.seed, self.limits = get_spec(domain), seed, limits
        self.tasks = {k: t for k, t in (tasks or {}).items() if t.domain == domain}
        clash = sorted(set(ENV_TOOLS) & {t.name for t in self.spec.tools})
        if clash:
            raise ValueError(f"the {domain} spec has tools named {clash}, which the environment's own tools use")
        self._sessions: dict[str, EnvSession] = {}
        self._lock = threading.Lock()
        self.reaped = 0

    def tools(self) -> list[types.Tool]:
        """The domain's agent tools (a dual-control domain's user tools too, marked), then start_task and verify."""
        listed = []
        for t in (*self.spec.side_tools("agent"), *self.spec.side_tools("user")):
            mine = "(The user's own device.) " if t.side == "user" else ""
            listed.append(types.Tool(name=t.name, description=mine + t.description, inputSchema=t.parameters))
        listed.append(types.Tool(name="start_task", description=(
            "Start this session over at a task's beginning: a fresh copy of its database (and, for a dual-control "
            "task, its setup). Needed before verify."), inputSchema={
            "type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}))
        listed.append(types.Tool(name="verify", description=(
            "Score what this session did since start_task with the ToolScale verifier: the reward (1.0 or 0.0) and "
            "each check with its reason. answer: everything the assistant said to the user."), inputSchema={
            "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}))
        return listed

    def session(self, key: str) -> EnvSession:
        self.reap()
        with self._lock:
            found = self._sessions.get(key)
            if found is None:
                if len(self._sessions) >= self.limits.max_sessions:
                    raise EnvError(f"{len(self._sessions)} sessions are open, the limit is {self.limits.max_sessions}")
                found = self._sessions[key] = EnvSession(get_engine(self.spec.name, self.seed).fresh())
        return found

    def call(self, key: str, name: str, arguments: Any) -> Any:
        """One call of session ``key``: a domain tool's observation, or start_task's / verify's answer."""
        session = self.session(key)
        with session.lock:
            session.last_used = time.monotonic()
            if name == "start_task":
                return self._start(session, (arguments or {}).get("task_id"))
            if name == "verify":
                return self._verify(session, (arguments or {}).get("answer"))
            if len(session.calls) >= self.limits.max_calls:
                raise EnvError(f"call limit reached: this session has made {len(session.calls)} calls, the limit is "
                               f"{self.limits.max_calls}; the call was not run")
            if time.monotonic() - session.started > self.limits.max_session_s:
                raise EnvError(f"time limit reached: the session is older than {self.limits.max_session_s:g} s; "
                               "the call was not run")
            tool = self.spec.tool(name) if isinstance(name, str) else None
            side = tool.side if tool is not None and not tool.setup else "agent"
            result = session.db.call(name, arguments, side)
            session.calls.append(ToolCall(name, arguments if isinstance(arguments, dict) else {}, side))
            return json.loads(result.to_json())

    def _start(self, session: EnvSession, task_id: Any) -> dict[str, Any]:
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise EnvError(f"unknown task {str(task_id)[:60]!r} in {self.spec.name} ({len(self.tasks)} tasks known)")
        db = get_engine(task.domain, task.seed).fresh()
        for call in task.setup_calls:
            db.call(call.name, call.arguments, "setup")
        session.db.close()
        session.db, session.task, session.task_id, session.calls = db, task, task_id, []
        session.started = time.monotonic()
        return {"task_id": task_id, "seed": task.seed, "setup_calls": len(task.setup_calls)}

    def _verify(self, session: EnvSession, answer: Any) -> dict[str, Any]:
        if session.task is None:
            raise EnvError("this session has no task: call start_task first, there is nothing to verify")
        verdict = verify(session.task, Trajectory(tuple(session.calls), answer if isinstance(answer, str) else ""))
        checks = {name: {"passed": getattr(verdict, name).passed, "reason": getattr(verdict, name).reason}
                  for name in ("execution", "fidelity", "completeness", "identification", "assertions", "actions")}
        return {"task_id": session.task_id, "reward": 1.0 if verdict.solved else 0.0, "solved": verdict.solved,
                "criteria": list(verdict.criteria), "failed": verdict.failed_checks(), "checks": checks,
                "calls": len(session.calls)}

    def close(self, key: str) -> bool:
        with self._lock:
            session = self._sessions.pop(key, None)
        if session is None:
            return False
        with session.lock:
            session.db.close()
        return True

    def reap(self) -> int:
        now = time.monotonic()
        with self._lock:
            stale = [k for k, s in self._sessions.items() if now - s.last_used > self.limits.max_idle_s]
        gone = sum(self.close(k) for k in stale)
        self.reaped += gone
        return gone

    def __len__(self) -> int:
        return len(self._sessions)


def mcp_server(env: DomainEnv) -> Server:
    """The MCP server: list_tools gives ``env.tools()``; call_tool runs in the caller's MCP session."""
    server: Server = Server(f"toolscale-{env.spec.name}")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return env.tools()

    @server.call_tool(validate_input=False)  # the engine's own argument errors, which the agent is trained on
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        ctx = server.request_context
        request = getattr(ctx, "request", None)
        key = (request.headers.get("mcp-session-id") if request is not None else None) or str(id(ctx.session))
        try:
            value = env.call(key, name, arguments)
        except EnvError as exc:
            raise ValueError(str(exc)) from None  # the SDK returns it as a tool error (isError: true)
        if isinstance(value, dict) and set(value) == {"error"}:
            raise ValueError(value["error"])
        return [types.TextContent(type="text", text=json.dumps(value, ensure_ascii=False, default=str))]

    return server


def asgi_app(env: DomainEnv) -> Any:
    """A Starlette app serving MCP at ``/mcp`` (streamable HTTP, one MCP session per client)."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    manager = StreamableHTTPSessionManager(mcp_server(env), json_response=True,
                                           session_idle_timeout=env.limits.max_idle_s,
                                           max_sessions=env.limits.max_sessions, max_request_body_size=MAX_BODY_BYTES)

    async def handle(scope: Any, receive: Any, send: Any) -> None:
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Mount("/mcp", app=handle)], lifespan=lifespan)


def serve(env: DomainEnv, host: str = "127.0.0.1", port: int = 8765) -> None:
    import uvicorn

    uvicorn.run(asgi_app(env), host=host, port=port, log_level="warning")
