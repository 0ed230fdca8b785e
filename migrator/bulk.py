"""Bulk builds without the cyclic garbage collector.

Replaying a 200,000-partition log allocates millions of small objects that live on; every 700
allocations CPython's collector runs, and its older generations rescan the whole growing heap. Measured:
`MetadataLog.load_image` of 200,000 partitions took 3.0 s with the collector and 0.6 s without it, and
`migrate` replays, reads and diffs images of that size several times. The data built here has no
reference cycles to collect, so the collector is paused for the build and resumed after it (nested
pauses resume once, at the outermost exit; a collector the caller had disabled stays disabled).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["with_gc", "without_gc"]

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def without_gc() -> Iterator[None]:
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


@contextmanager
def with_gc() -> Iterator[None]:
    """The collector running again inside a pause, for a stretch that can last (a wait on other
    processes: registering brokers, minutes or hours): what it allocates meanwhile (requests, exceptions
    with their tracebacks' cycles) is collected. The first collection moves the paused build's objects to
    the old generation once; the pause goes on after the stretch."""
    with _lock:
        resumed = _depth > 0 and _resume and not gc.isenabled()
        if resumed:
            gc.enable()
    try:
        yield
    finally:
        with _lock:
            if resumed and _depth > 0:
                gc.disable()
