"""How a ZooKeeper operation rides out a lost connection: one retry policy for every reader and writer.

A lost connection or an expired session is transient (kazoo reconnects, a new session if need be);
everything else is an answer. Operations are retried with backoff up to a deadline, a stop request
(SIGTERM/SIGINT) ends the wait at once, and a connection kazoo gave up on is restarted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from migrator import stop
from migrator.errors import UnreachableError

__all__ = ["DEFAULT_RETRY_TIMEOUT", "TRANSIENT", "is_transient", "retry_transient", "revive"]

log = logging.getLogger(__name__)

DEFAULT_RETRY_TIMEOUT = 120.0
TRANSIENT = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError)

T = TypeVar("T")


def is_transient(e: BaseException) -> bool:
    return isinstance(e, TRANSIENT)


def revive(client: KazooClient | None) -> None:
    """Restart the connection of a client whose reconnect policy gave up (a long ZooKeeper restart).

    kazoo reconnects by itself (a new session if the old one expired) until its connection retry
    policy is exhausted; then the client is closed although nobody stopped it. A client its owner
    stopped is left alone.
    """
    if client is None or client._stopped.is_set() or client.connected:
        return
    if client._connection.connection_stopped.is_set():
        log.info("ZooKeeper connection given up by kazoo; reconnecting")
        client.start_async()


def retry_transient(
    fn: Callable[[], T],
    what: str,
    timeout: float = DEFAULT_RETRY_TIMEOUT,
    client: KazooClient | None = None,
) -> T:
    """Run `fn`, retrying lost connections with exponential backoff (0.1 s doubling to 5 s).

    With `client`, a connection kazoo gave up on is restarted (`revive`). After `timeout` seconds an
    UnreachableError names `what`; a stop request (SIGTERM/SIGINT) raises `stop.Stopped` at once.
    """
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        try:
            return fn()
        except TRANSIENT as e:
            if time.monotonic() + delay > deadline:
                raise UnreachableError(
                    f"lost ZooKeeper for {timeout:g}s while {what} ({type(e).__name__})"
                ) from None
            log.info("ZooKeeper %s while %s; retrying in %.1fs", type(e).__name__, what, delay)
            stop.wait(delay, f"ZooKeeper unreachable while {what}")  # SIGTERM ends the retries
            revive(client)
            delay = min(delay * 2, 5.0)
