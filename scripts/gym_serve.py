"""Serve one exported NeMo Gym resources server (``toolscale export --format nemo-gym``) without Gym's launcher:
the server's own app (Gym's ``SimpleResourcesServer`` with its session middleware) under uvicorn, no head server
and no Ray. For direct ``/verify`` calls and benchmarks; ``ng_run`` is how Gym runs it (docs/gym.md).

Run it with Gym's venv:  .venv-gym/bin/python scripts/gym_serve.py OUT/resources_servers/toolscale_weather --port 8421
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server_dir", type=Path, help="an exported resources_servers/toolscale_<domain> folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8421)
    parser.add_argument("--max-calls", type=int)
    parser.add_argument("--max-idle-s", type=float)
    args = parser.parse_args()
    folder = args.server_dir.resolve()
    if not (folder / "app.py").is_file():
        sys.exit(f"error: {folder} has no app.py; give an exported resources_servers/toolscale_<domain> folder")
    sys.path.insert(0, str(folder))
    import uvicorn
    from app import ToolScaleConfig, ToolScaleResourcesServer

    limits = {k: v for k, v in (("max_calls", args.max_calls), ("max_idle_s", args.max_idle_s)) if v is not None}
    config = ToolScaleConfig(host=args.host, port=args.port, entrypoint="app.py", name=folder.name, domain="agent",
                             **limits)
    server = ToolScaleResourcesServer.model_construct(config=config, server_client=None)
    uvicorn.run(server.setup_webserver(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
