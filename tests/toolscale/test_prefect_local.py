"""The run-owned temporary Prefect server: the flow really uses it (even when Prefect was imported while it
booted) and nothing of it survives a ``kill -9`` of the process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.hostile.procs import MARK, processes_marked

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time
from pathlib import Path
from toolscale.prefect_local import prefect_api, quiet_prefect_logs

def import_prefect_early() -> None:
    import prefect  # settings are read here, before the server's URL is known

log = quiet_prefect_logs(Path(sys.argv[1]))
with prefect_api(log, while_starting=import_prefect_early) as url:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    @flow(name="probe")
    def probe() -> int:
        return 1

    probe()
    with get_client(sync_client=True) as client:
        runs = [r.name for r in client.read_flow_runs()]
    print(json.dumps({"url": url, "settings_url": get_current_settings().api.url, "runs": len(runs)}), flush=True)
    time.sleep(600)  # killed here
"""


def test_a_flow_imported_during_boot_uses_the_run_server_and_a_kill_9_leaves_no_server(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, MARK: mark, "PREFECT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "work")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert proc.stdout is not None
    line = ""
    for line in proc.stdout:  # the flow's own log lines come first
        if line.startswith("{"):
            break
    try:
        assert line.startswith("{"), proc.stderr.read() if proc.stderr else line
        seen = json.loads(line)
        assert seen["settings_url"] == seen["url"]  # not Prefect's own temporary server
        assert seen["runs"] == 1  # the flow run was recorded on the run's server
        servers = [p for p in processes_marked(mark) if "prefect_server" in p or "uvicorn" in p]
        assert len(servers) == 1, servers  # one server: ours
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    deadline = time.monotonic() + 10
    while processes_marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_marked(mark) == []
