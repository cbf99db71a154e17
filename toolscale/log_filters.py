"""What of a flow run's log reaches the terminal: its progress lines only.

A failure inside a flow is reported by the CLI as one line with its exit status; Prefect's own account of it
(the traceback, "Finished in state Failed(...)") goes to ``<work dir>/prefect.log`` only. Nor does the terminal
get "View at <url>": the run's temporary server, which that URL names, stops with the command.
"""

from __future__ import annotations

import logging


class ProgressOnly(logging.Filter):
    """Pass INFO and WARNING lines without a traceback; drop errors, tracebacks and links to the run's server."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or record.exc_info or record.exc_text or record.stack_info:
            return False
        message = record.getMessage()
        return not (message.startswith("View at ") or message.startswith("Finished in state ")
                    or "Traceback (most recent call last)" in message)
