"""The controller's Kafka-protocol listener: TCP, size-prefixed frames, one thread per connection.

Each connection has its own thread, so a slow or hostile client (half a frame, then silence) holds up
only itself; once a frame has begun, the rest of it must arrive within ``request_timeout_s``, so stalled
half-frames cannot hold connection slots for the (long) idle timeout. The handler serialises the
requests that reach it. Responses go back in request order on
each connection, as Kafka's clients expect. What the listener cannot answer it closes, as Kafka's
SocketServer does: an unknown apiKey, an unsupported version (except ApiVersions, which gets
UNSUPPORTED_VERSION and the supported ranges, KIP-511), a frame over the size limit, a malformed header
or body. A handler that raises gets UNKNOWN_SERVER_ERROR and one log line; the listener goes on.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import Any, Protocol

from migrator.controller.apis import refusal
from migrator.controller.network.long_polls import LongPolls
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.raft.raft_leader import LongPoll
from migrator.controller.raft.raft_slices import SlicedAnswer
from migrator.controller.security.listener_security import ConnectionSecurity, ListenerSecurity
from migrator.controller.security.sasl_session import Accept

__all__ = ["ControllerServer", "RequestHandler"]

log = logging.getLogger("zk2kraft.controller.server")

_SIZE = struct.Struct(">i")

#: Connections one IP address may hold (Kafka's max.connections.per.ip, unlimited in Kafka's defaults):
#: below the listener's total, so a client that leaks sockets leaves room for the brokers.
DEFAULT_MAX_CONNECTIONS_PER_IP = 256
#: Connections the listener holds in all (Kafka's max.connections, unlimited by default there).
DEFAULT_MAX_CONNECTIONS = 1024


class RequestHandler(Protocol):
    def handle(self, api_key: int, api_version: int, request: Any, client_id: str | None) -> Any: ...


class ControllerServer:
    """Serve ``handler`` on ``host:port`` (port 0: a free one; see ``address`` once started)."""

    def __init__(
        self,
        handler: RequestHandler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_request_bytes: int = wire.MAX_FRAME_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP,
        idle_timeout_s: float = 600.0,
        request_timeout_s: float = 30.0,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.handler = handler
        self.security = security if security is not None else ListenerSecurity()
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self._per_ip: dict[str, int] = {}
        self.refused_per_ip = 0
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self._sock = socket.create_server((host, port), family=_family(host), backlog=128)
        self.address: tuple[str, int] = self._sock.getsockname()[:2]
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._acceptor: threading.Thread | None = None
        self.served = 0
        self.closed_for_errors = 0
        self.supported = _supported_by(handler)
        self.advertised = {**self.supported, **self.security.extra_versions()}
        self.raft: Any = None  # the Raft leader (raft_leader.RaftLeader), answered outside the handler
        self.long_polls: LongPolls | None = None  # its parked fetches, on one thread

    def attach_raft(self, raft: Any, versions: dict[int, tuple[int, int]]) -> None:
        """Serve Kafka's Raft APIs with ``raft`` on this listener (and list them in ApiVersions)."""
        self.raft = raft
        self.supported.update(versions)
        self.advertised.update(versions)
        if self.long_polls is None:
            self.long_polls = LongPolls(self)
            self.long_polls.start()

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> ControllerServer:
        self._acceptor = threading.Thread(target=self._accept_loop, name="zk2kraft-listener", daemon=True)
        self._acceptor.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        if self.raft is not None:
            self.raft.close()  # wake long-polling fetches
        if self.long_polls is not None:
            self.long_polls.stop()  # answers what it holds as the leader closes, then closes them
        _shutdown(self._sock)  # shutdown, not just close: it is what wakes a thread blocked in accept()
        with self._lock:
            conns = list(self._conns.items())
        for conn, _ in conns:
            _shutdown(conn)
        for _, thread in conns:
            thread.join(timeout=5)
        if self._acceptor is not None:
            self._acceptor.join(timeout=5)

    stop = close

    def __enter__(self) -> ControllerServer:
        return self.start() if self._acceptor is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections --------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            ip = _peer_ip(conn)
            with self._lock:
                if len(self._conns) >= self.max_connections:
                    log.warning("refusing a connection: %d already open", len(self._conns))
                    _shutdown(conn)
                    continue
                if self._per_ip.get(ip, 0) >= self.max_connections_per_ip:
                    # Kafka's max.connections.per.ip: one client's idle sockets cannot lock out brokers
                    self.refused_per_ip += 1
                    log.warning(
                        "refusing a connection from %s: %d already open from it (max.connections.per.ip)",
                        ip,
                        self._per_ip[ip],
                    )
                    _shutdown(conn)
                    continue
                self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
                thread = threading.Thread(
                    target=self._serve, args=(conn, ip), name="zk2kraft-conn", daemon=True
                )
                self._conns[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket, ip: str = "") -> None:
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            secured = self.security.connection(conn, ip)
        except TimeoutError:
            self.release(conn, ip, self.timed_out)
            return
        except (OSError, EOFError):
            self.release(conn, ip, "")
            return
        if secured is None:
            self.closed_for_errors += 1
            self.release(conn, ip, "")
            return
        if secured[0] is not conn:  # TLS: the wrapped socket now owns the descriptor
            with self._lock:
                self._conns[secured[0]] = self._conns.pop(conn, threading.current_thread())
        self._loop(secured[0], ip, secured[1], b"", b"")

    def resume(
        self, conn: socket.socket, ip: str, sec: ConnectionSecurity, inbuf: bytes, unsent: bytes
    ) -> None:
        """A connection back from `LongPolls`: a thread again, first sending ``unsent``, then serving
        the requests in ``inbuf`` and after."""
        thread = threading.Thread(
            target=self._loop, args=(conn, ip, sec, inbuf, unsent), name="zk2kraft-conn", daemon=True
        )
        with self._lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._conns[conn] = thread
        if stopping:
            self.release(conn, ip, "")
            return
        thread.start()

    def _loop(
        self, conn: socket.socket, ip: str, sec: ConnectionSecurity, inbuf: bytes, unsent: bytes
    ) -> None:
        pending = bytearray(inbuf)  # read by `LongPolls` before it gave the connection back
        kept = False
        try:
            if unsent:
                conn.settimeout(self.idle_timeout_s)
                conn.sendall(unsent)
            while not self._stopping.is_set():
                conn.settimeout(self.idle_timeout_s)  # between requests: Kafka's connections.max.idle.ms
                first = bytes(pending[:4]) if pending else conn.recv(4)
                del pending[: len(first)]
                if not first:
                    return
                deadline = time.monotonic() + self.request_timeout_s
                head = first + _take(conn, pending, 4 - len(first), deadline)
                (size,) = _SIZE.unpack(head)
                if size < 8 or size > self.max_request_bytes:
                    self._close_for(f"a request frame of {size} bytes (limit {self.max_request_bytes})")
                    return
                body = _take(conn, pending, size, deadline)
                answer, close = self._answer(body, sec)
                if isinstance(answer, LongPoll):  # a Fetch that waits: the long-poll thread holds it
                    assert self.long_polls is not None
                    kept = True
                    conn.settimeout(None)
                    self.long_polls.adopt(conn, ip, sec, answer, bytes(pending))  # (sent after it)
                    return
                if isinstance(answer, SlicedAnswer):  # a catch-up answer: records sent from the file
                    conn.settimeout(self.idle_timeout_s)
                    answer.send(conn)
                elif answer is not None:
                    conn.settimeout(self.idle_timeout_s)  # a reader that never reads holds up only itself
                    conn.sendall(answer)
                if answer is None or close:
                    return
        except TimeoutError:
            self._close_for(self.timed_out)
            return
        except (OSError, EOFError):
            return
        finally:
            if not kept:
                self.release(conn, ip, "")

    def release(self, conn: socket.socket, ip: str, why: str) -> None:
        """Close ``conn`` and forget it (saying ``why`` when it is closed for an error)."""
        if why:
            self._close_for(why)
        _shutdown(conn)
        with self._lock:
            self._conns.pop(conn, None)
            left = self._per_ip.get(ip, 0) - 1
            if left > 0:
                self._per_ip[ip] = left
            else:
                self._per_ip.pop(ip, None)

    @property
    def timed_out(self) -> str:
        """Why a connection is closed for a half-sent request or idleness (the threads and `LongPolls`)."""
        return f"a request frame not completed within {self.request_timeout_s}s, or idle"

    def _close_for(self, why: str) -> None:
        self.closed_for_errors += 1
        log.info("closing a controller connection: %s", why)

    def _answer(
        self, frame_bytes: bytes, sec: ConnectionSecurity
    ) -> tuple[bytes | SlicedAnswer | LongPoll | None, bool]:
        """(The response frame for one request, a parked Fetch, or None; close the connection after it)."""
        try:
            header, pos = wire.decode_request_header(frame_bytes)
        except wire.WireError as e:
            self._close_for(str(e))
            return None, True
        accept = sec.accept(header.api_key)
        if accept is Accept.CLOSE:
            self._close_for(f"apiKey {header.api_key} refused by the listener's security")
            return None, True
        if accept is Accept.SASL and header.api_key != M.API_VERSIONS:
            answer, close = sec.sasl_answer(
                header.api_key, header.api_version, header.correlation_id, frame_bytes, pos
            )
            if answer is None or close:
                self.closed_for_errors += 1
            return answer, close
        if self.raft is not None and self.raft.serves(frame_bytes):
            # Raft's APIs are answered outside the handler, but behind the same authentication and
            # the same authorization seam (CLUSTER_ACTION): a refused fetcher is disconnected.
            if sec.authorize(header.api_key):
                self._close_for(f"apiKey {header.api_key} not authorized for {sec.principal}")
                return None, True
            answer = self.raft.answer(frame_bytes, park=self.long_polls is not None, sliced=True)
            return answer, answer is None
        lo, hi = self.supported[M.API_VERSIONS]
        known_version = lo <= header.api_version <= hi  # (_request rewrites the header of a refused one)
        answer = self._request(frame_bytes, header, sec)
        if header.api_key == M.API_VERSIONS and answer is not None and known_version:
            sec.api_versions_answered()  # not after UNSUPPORTED_VERSION: the client retries it (Kafka too)
        return answer, answer is None

    def _request(
        self, frame_bytes: bytes, header: wire.RequestHeader, sec: ConnectionSecurity
    ) -> bytes | None:
        served = self.supported.get(header.api_key)
        if served is None:
            self._close_for(f"unknown apiKey {header.api_key}")
            return None
        if not served[0] <= header.api_version <= served[1]:
            if header.api_key == M.API_VERSIONS:
                header.api_version = 0  # KIP-511: answer as v0 with the ranges we do serve
                return wire.encode_response(
                    header,
                    M.ApiVersionsResponse(E.UNSUPPORTED_VERSION, wire.supported_ranges(self.advertised)),
                )
            self._close_for(f"{wire.NAMES[header.api_key]} v{header.api_version} is not supported")
            return None
        try:
            _, request = wire.decode_request(frame_bytes)
        except wire.WireError as e:
            self._close_for(str(e))
            return None
        self.served += 1
        if header.api_key == M.API_VERSIONS:
            answer = M.ApiVersionsResponse(E.NONE, wire.supported_ranges(self.advertised))
            features = getattr(self.handler, "api_versions_features", None)  # KIP-584's tagged fields
            return wire.encode_response(header, features(answer) if callable(features) else answer)
        refused = sec.authorize(header.api_key)
        if refused:  # the single authorization seam: nothing reaches the handler, nothing changes
            return wire.encode_response(header, refusal.error_response(header, refused, request))
        token = sec.bind()
        try:
            response = self.handler.handle(header.api_key, header.api_version, request, header.client_id)
        except Exception as e:  # a bug in a decision must not take the listener down
            log.error(
                "controller handler failed on %s v%d: %s: %s",
                wire.NAMES[header.api_key],
                header.api_version,
                type(e).__name__,
                e,
            )
            response = refusal.error_response(header, E.UNKNOWN_SERVER_ERROR, request)
        finally:
            sec.unbind(token)
        try:
            return wire.encode_response(header, response)
        except Exception as e:
            log.error(
                "cannot encode the answer to %s: %s: %s", wire.NAMES[header.api_key], type(e).__name__, e
            )
            return wire.encode_response(
                header, refusal.error_response(header, E.UNKNOWN_SERVER_ERROR, request)
            )


def _peer_ip(conn: socket.socket) -> str:
    try:
        return str(conn.getpeername()[0])
    except OSError:
        return ""


def _supported_by(handler: Any) -> dict[int, tuple[int, int]]:
    """The listener's version table, narrowed by the handler's own `supported_apis()` if it has one."""
    table = dict(wire.SUPPORTED)
    narrow = getattr(handler, "supported_apis", None)
    if callable(narrow):
        theirs: dict[int, tuple[int, int]] = narrow()
        table = {
            k: (max(lo, theirs[k][0]), min(hi, theirs[k][1]))
            for k, (lo, hi) in table.items()
            if k == M.API_VERSIONS or k in theirs
        }
        table = {k: v for k, v in table.items() if v[0] <= v[1]}
    return table


def _take(conn: socket.socket, pending: bytearray, n: int, deadline: float) -> bytes:
    """n bytes, the first from ``pending`` (consumed), the rest as `_recv_by` reads them."""
    if not pending:
        return _recv_by(conn, n, deadline)
    got = bytes(pending[:n])
    del pending[:n]
    return got + _recv_by(conn, n - len(got), deadline)


def _recv_by(conn: socket.socket, n: int, deadline: float) -> bytes:
    """n bytes before ``deadline``; EOFError when the peer closes first, TimeoutError when late."""
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        conn.settimeout(left)
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
