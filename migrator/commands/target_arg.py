"""Every command takes a `Target` first; a ZooKeeper connect string is accepted as its shorthand.

`commands.status(Target(zookeeper=zk, log_dir=d, zk_auth=...))` is the API. From a test or a notebook
`commands.status(zk, d, zk_auth=...)` reads better and means the same: the connect string, the log
directory (where the command has one, second and positional) and the Target's fields given as keyword
arguments (`zk_auth`, `zk_timeout`, `node_id`, `listen`, `metrics_listen`, `log_dir`) build the Target.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from migrator.target import Target

F = TypeVar("F", bound=Callable[..., Any])

_TARGET_FIELDS = ("log_dir", "zk_auth", "zk_timeout", "node_id", "listen", "metrics_listen")


def takes_target(*, log_dir_positional: bool) -> Callable[[F], F]:
    """Turn a leading connect string (and log directory) into the Target the command takes."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(target: Target | str, *args: Any, **kwargs: Any) -> Any:
            if isinstance(target, Target):
                return fn(target, *args, **kwargs)
            fields = {k: kwargs.pop(k) for k in _TARGET_FIELDS if k in kwargs}
            if log_dir_positional and args:
                fields["log_dir"], args = args[0], args[1:]
            if "zk_auth" in fields:
                fields["zk_auth"] = tuple(fields["zk_auth"] or ())
            return fn(Target(zookeeper=target, **fields), *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return deco
