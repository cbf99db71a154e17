"""The process of a run's temporary Prefect server: uvicorn serving Prefect's API, plus a watchdog that ends it
as soon as the ``toolscale`` process that started it is gone (``python -m toolscale.prefect_server PARENT_PID
UVICORN_ARGS...``)."""

from __future__ import annotations

import sys

from pipeline.lifecycle import exit_when_parent_gone


def main() -> None:
    parent, *uvicorn_args = sys.argv[1:]
    exit_when_parent_gone(int(parent))
    from uvicorn.main import main as uvicorn_main

    sys.argv = ["uvicorn", *uvicorn_args]
    uvicorn_main()


if __name__ == "__main__":
    main()
