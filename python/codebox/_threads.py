"""The worker threads of codebox's asyncio API."""

from __future__ import annotations

import concurrent.futures
import os
from typing import Any

# One thread per blocking call in flight. asyncio's default executor has only cpu+4 workers,
# which would serialise 20 concurrent boxes (and could queue a close() behind long execs).
_EXECUTOR = concurrent.futures.ThreadPoolExecutor(
    max_workers=int(os.environ.get("CODEBOX_MAX_THREADS", "256")), thread_name_prefix="codebox"
)


def _destroy_when_created(job: concurrent.futures.Future[Any]) -> None:
    """A done-callback for a box start whose caller went away: the box is destroyed."""
    if job.cancelled() or job.exception() is not None:
        return
    job.result().destroy()
