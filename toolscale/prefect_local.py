"""A run's own temporary Prefect server and a quiet logging setup, for ``toolscale regenerate``.

Prefect's implicit temporary server outlives a ``kill -9`` of the process that started it. This one is a
child that the kernel kills with its parent (``PR_SET_PDEATHSIG``) and that also watches its parent itself
(``toolscale.prefect_server``), in a process group of its own so that a Ctrl-C in the terminal reaches only the
CLI, which then stops it. Prefect's implicit server is switched off for the run (a slip is an error, never a
second, orphanable server), and Prefect's settings are refreshed once the URL is known: Prefect reads its
settings when it is first imported, which may happen while the server boots. Prefect's log lines go to a file
under the work dir; only the flow's own progress lines reach the terminal.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.lifecycle import die_with_parent

NO_IMPLICIT_SERVER = "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"
STARTUP_SECONDS = 180.0  # a fresh PREFECT_HOME on a busy 2-core machine needs far more than Prefect's 20 s

LOGGING_YAML = """\
version: 1
disable_existing_loggers: False
formatters:
  progress: {{format: "%(message)s"}}
  standard:
    (): prefect.logging.formatters.PrefectFormatter
    format: "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(process)d | %(name)s - %(message)s"
    flow_run_fmt: "%(asctime)s.%(msecs)03d | %(levelname)-7s | Flow run %(flow_run_name)r - %(message)s"
    task_run_fmt: "%(asctime)s.%(msecs)03d | %(levelname)-7s | Task run %(task_run_name)r - %(message)s"
    datefmt: "%H:%M:%S"
filters:
  progress_only: {{(): toolscale.log_filters.ProgressOnly}}
handlers:
  progress: {{level: INFO, class: logging.StreamHandler, formatter: progress, stream: ext://sys.stdout,
             filters: [progress_only]}}
  file: {{level: 0, class: logging.FileHandler, formatter: standard, filename: "{log}", delay: true}}
  api: {{level: 0, class: prefect.logging.handlers.APILogHandler}}
  worker_api: {{level: 0, class: prefect.logging.handlers.WorkerAPILogHandler}}
loggers:
  prefect: {{level: INFO}}
  prefect.extra: {{level: INFO, handlers: [api], propagate: false}}
  prefect.flow_runs: {{level: NOTSET, handlers: [api, progress]}}
  prefect.task_runs: {{level: NOTSET, handlers: [api]}}
  prefect.workers: {{level: NOTSET, handlers: [worker_api]}}
  prefect._internal: {{level: WARNING, propagate: false, handlers: [file]}}
  uvicorn: {{level: WARNING, handlers: [file], propagate: false}}
  fastapi: {{level: WARNING, handlers: [file], propagate: false}}
root: {{level: INFO, handlers: [file]}}
"""


class ServerError(RuntimeError):
    """The temporary Prefect server did not come up."""


def quiet_prefect_logs(work_dir: Path) -> Path:
    """Route Prefect's logs to ``<work_dir>/prefect.log`` (this process and the workers it starts)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log = (work_dir / "prefect.log").resolve()
    config = work_dir / "prefect-logging.yml"
    config.write_text(LOGGING_YAML.format(log=str(log).replace('"', '\\"')))
    os.environ["PREFECT_LOGGING_CONFIG_PATH"] = str(config.resolve())
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"  # no telemetry call (an ERROR line when offline)
    return log


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def prefect_api(log: Path, while_starting: Callable[[], bool | None] | None = None) -> Iterator[str | None]:
    """Yield the Prefect API URL to use: ``$PREFECT_API_URL`` if set, else a temporary server of this run's own,
    stopped on exit (and killed by the kernel if this process dies first).

    ``while_starting`` runs in this process while the server boots (seconds of CPU in its own process): work
    the run needs anyway, such as imports and checks, overlaps the boot instead of preceding or following it.
    When it returns ``False`` the run needs no server after all (its snapshot is published already): the boot is
    not waited for and the context yields ``None``."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        needed = while_starting() if while_starting is not None else None
        yield None if needed is False else configured
        return
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "toolscale.prefect_server", str(os.getpid()),
             "--app-dir", str(Path(spec.origin).parent.parent), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "error", "--lifespan", "on"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            preexec_fn=die_with_parent)
    # this process and its workers never start Prefect's own temporary server (it would outlive a kill -9)
    saved = os.environ.get(NO_IMPLICIT_SERVER)
    os.environ[NO_IMPLICIT_SERVER] = "false"
    try:
        try:
            needed = while_starting() if while_starting is not None else None
        except BaseException:
            _stop(server, at_once=True)  # it has served nothing: no graceful shutdown to wait for
            raise
        if needed is False:
            _stop(server, at_once=True)
            yield None
            return
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _healthy(url):
            if server.poll() is not None:
                raise ServerError(f"the temporary Prefect server exited with status {server.returncode}; see {log}")
            if time.monotonic() > deadline:
                raise ServerError(f"the temporary Prefect server did not answer within {STARTUP_SECONDS:.0f}s; "
                                  f"see {log}")
            time.sleep(0.2)
        os.environ["PREFECT_API_URL"] = url
        _refresh_prefect_settings()
        yield url
    finally:
        _drain_prefect_senders()
        os.environ.pop("PREFECT_API_URL", None)
        if saved is None:
            os.environ.pop(NO_IMPLICIT_SERVER, None)
        else:
            os.environ[NO_IMPLICIT_SERVER] = saved
        _refresh_prefect_settings()
        _stop(server)


def _refresh_prefect_settings() -> None:
    """Make an already imported Prefect see the environment as it is now: its root settings are read once, at
    import, so a flow imported while the server booted would otherwise find no API URL."""
    if "prefect.context" in sys.modules:
        from prefect.context import refresh_global_settings_context

        refresh_global_settings_context()


def _drain_prefect_senders(timeout: float = 15.0) -> None:
    """Send the queued log lines and events while the server still runs; at interpreter exit they would hit
    a stopped server and each retry for minutes."""
    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=timeout)
        except Exception:  # best effort: a failed drain must not hide the run's own outcome
            pass


def _stop(server: subprocess.Popen[bytes], at_once: bool = False) -> None:
    """End the server: gracefully (SIGTERM, then SIGKILL after 10 s), or ``at_once`` (SIGKILL) when it served nothing.
    A server still booting may act on SIGTERM only once its startup is done."""
    if server.poll() is not None:
        return
    try:
        os.killpg(server.pid, signal.SIGKILL if at_once else signal.SIGTERM)
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    except ProcessLookupError:
        pass
