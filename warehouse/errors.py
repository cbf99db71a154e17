"""The one error type of the warehouse package: its message is a single line a user can act on."""

from __future__ import annotations


class WarehouseError(RuntimeError):
    """The warehouse, a snapshot in it, or an export target cannot be used as asked; nothing was changed."""
