"""The service on the wire: the protocol server started around a ControllerService, and the
translation between the wire layer's messages and the core's requests and replies.

The wire layer (`messages`, `server`) is imported here only, and only when a listener runs, so the
decisions and the service stay usable (and testable) without it.
"""

from __future__ import annotations

from typing import Any, Protocol

from migrator.errors import BadInputError

__all__ = ["IN_PROCESS", "RunningServer", "dispatch", "parse_listen", "start_server"]

#: `listen` value for a controller served in this process only (tests, an in-process broker
#: simulator): the service runs, no socket is bound.
IN_PROCESS = "in-process"


class RunningServer(Protocol):
    address: tuple[str, int]

    def stop(self) -> None: ...


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9093`); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise BadInputError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9093")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def start_server(handler: Any, listen: str) -> RunningServer:
    """Bind the controller protocol server on `listen` and serve `handler` on its own threads."""
    if listen == IN_PROCESS:
        return _InProcess()
    host, port = parse_listen(listen)
    try:
        from migrator.controller.server import ControllerServer
    except ModuleNotFoundError as e:  # pragma: no cover - only while the wire layer is missing
        raise BadInputError(
            f"the controller protocol listener is not available in this build ({e})"
        ) from None
    try:
        server = ControllerServer(handler, host, port)
        start = getattr(server, "start", None)
        if callable(start):
            start()
    except OSError as e:
        raise BadInputError(f"cannot listen on {listen}: {e.strerror or e}") from None
    return _Running(server)


class _InProcess:
    address: tuple[str, int] = (IN_PROCESS, 0)

    def stop(self) -> None:
        pass


class _Running:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.address: tuple[str, int] = tuple(server.address)[:2]  # type: ignore[assignment]

    def stop(self) -> None:
        for name in ("stop", "close", "shutdown"):
            fn = getattr(self.server, name, None)
            if callable(fn):
                fn()
                return


def dispatch(service: Any, api_key: int, api_version: int, request: Any, client_id: str | None) -> Any:
    """Wire request → core request → service → core reply → wire response."""
    raise NotImplementedError("wired once migrator.controller.messages exists")
