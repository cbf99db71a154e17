"""Where the warehouse is when no one says: ``$TOOLSCALE_WAREHOUSE``, else ``warehouse/toolscale.duckdb``.

Kept free of heavy imports: every command line's parser reads it before any work starts."""

from __future__ import annotations

import os

DEFAULT_WAREHOUSE = "warehouse/toolscale.duckdb"


def default_warehouse() -> str:
    return os.environ.get("TOOLSCALE_WAREHOUSE", DEFAULT_WAREHOUSE)
