"""Serve exported NeMo Gym resources servers (``toolscale export --format nemo-gym``) without Gym's launcher: each
server's own app (Gym's ``SimpleResourcesServer`` with its session middleware) under uvicorn, no head server and no
Ray. For direct ``/verify`` calls and benchmarks; ``ng_run`` is how Gym runs it (docs/gym.md).

Run it with Gym's venv:  .venv-gym/bin/python scripts/gym_serve.py OUT/resources_servers/toolscale_weather --port 8421
Several folders share one process and port, each under ``/<folder name>`` (``/toolscale_weather/verify``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server_dirs", type=Path, nargs="+",
                        help="exported resources_servers/toolscale_<domain> folders")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8421)
    parser.add_argument("--max-calls", type=int)
    parser.add_argument("--max-idle-s", type=float)
    args = parser.parse_args()
    folders = [d.resolve() for d in args.server_dirs]
    for folder in folders:
        if not (folder / "app.py").is_file():
            sys.exit(f"error: {folder} has no app.py; give exported resources_servers/toolscale_<domain> folders")
    sys.path.insert(0, str(folders[0]))  # every export ships the same app.py and runtime; the data differ
    import uvicorn
    from app import ToolScaleConfig, ToolScaleResourcesServer
    from fastapi import FastAPI

    limits = {k: v for k, v in (("max_calls", args.max_calls), ("max_idle_s", args.max_idle_s)) if v is not None}
    apps = {}
    for folder in folders:
        config = ToolScaleConfig(host=args.host, port=args.port, entrypoint="app.py", name=folder.name,
                                 domain="agent", data_dir=str(folder / "data"), **limits)
        server = ToolScaleResourcesServer.model_construct(config=config, server_client=None)
        apps[folder.name] = server.setup_webserver()
    if len(apps) == 1:
        root = next(iter(apps.values()))
    else:
        root = FastAPI()
        for name, app in apps.items():
            root.mount(f"/{name}", app)
    uvicorn.run(root, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
