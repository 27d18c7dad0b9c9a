"""A thread's own scheduling priority: Linux gives each thread one, and workset lowers it for the work that should
give the cores to the rest (the store's writer, large requests)."""

from __future__ import annotations

import os
import sys
import threading

from .logs import get_logger


def lower_thread_priority(nice: int) -> None:
    """This thread `nice` steps below its process (Linux gives each thread a priority of its own)."""
    if not nice or not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + nice))
    except OSError as error:  # it runs as it was: slower requests under load, nothing lost
        get_logger().warning("thread_priority_unchanged", thread=threading.current_thread().name,
                             error=f"{error.__class__.__name__}: {error}")
