"""Operator errors across the JVM: a task's one-line error back to the driver as the same error.

A Python data source runs in a Spark worker; what it raises reaches the driver wrapped in a Java
exception whose text holds the worker's whole traceback. A task therefore raises its ZkKraftError as
`RuntimeError("ZK2KRAFT[<exit code>] <message>")`, and `from_spark` finds that marker in whatever
the driver catches and rebuilds the one-line error with its exit code. Anything else becomes
`SparkJobError`, whose message is one line too (the traceback is in Spark's log, shown with -v).
"""

from __future__ import annotations

import re

from migrator.errors import (
    EXIT_BAD_INPUT,
    EXIT_FENCED,
    EXIT_FINDINGS,
    EXIT_UNREACHABLE,
    BadInputError,
    FencedError,
    FindingsError,
    UnreachableError,
    ZkKraftError,
)

__all__ = ["MARKER", "SparkJobError", "from_spark", "worker_error"]

MARKER = "ZK2KRAFT"
_MARKED = re.compile(MARKER + r"\[(\d+)\] ([^\n]*)")
_BY_CODE: dict[int, type[ZkKraftError]] = {
    EXIT_FINDINGS: FindingsError,
    EXIT_BAD_INPUT: BadInputError,
    EXIT_UNREACHABLE: UnreachableError,
    EXIT_FENCED: FencedError,
}


class SparkJobError(UnreachableError):
    """Spark itself failed (could not start, lost an executor, a bug in a task): exit 3, one line."""


def worker_error(exc: BaseException) -> RuntimeError:
    """What a task raises for `exc`: marked so the driver can rebuild an operator error."""
    if isinstance(exc, ZkKraftError):
        message = " ".join(str(exc).split())
        return RuntimeError(f"{MARKER}[{exc.exit_code}] {message}")
    if isinstance(exc, MemoryError):
        return RuntimeError(f"{MARKER}[{EXIT_UNREACHABLE}] a Spark task ran out of memory reading its input")
    return RuntimeError(f"{type(exc).__name__}: {exc}")


def from_spark(exc: BaseException) -> ZkKraftError:
    """The operator error inside a Spark exception, or a one-line SparkJobError."""
    text = str(exc)
    m = _MARKED.search(text)
    if m:
        cls = _BY_CODE.get(int(m.group(1)), BadInputError)
        return cls(m.group(2).strip())
    return SparkJobError(f"the Spark job failed: {_first_line(exc, text)} (run with -v for Spark's log)")


def _first_line(exc: BaseException, text: str) -> str:
    """The most telling line of a Spark error: the Python exception of a task, else the first line."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if re.match(r"^[A-Za-z_.]+(Error|Exception): ", line) and "py4j" not in line.lower():
            return line[:300]
    for line in text.splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {line.strip()[:300]}"
    return type(exc).__name__
