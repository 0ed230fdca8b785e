"""A blocking Kafka-protocol client for the controller: what brokers (and the simulator) send.

It negotiates versions with ApiVersions on connect and then uses, per API, the highest version both
sides serve unless the caller asks for one. One request at a time per client (a lock makes concurrent
use safe but serial); open several clients for requests in flight together.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import threading
from typing import Any

from migrator.controller.protocol import messages as M
from migrator.controller.protocol import wire
from migrator.controller.security.client_security import ClientSecurity, sasl_authenticate
from migrator.errors import UnreachableError

__all__ = ["ControllerClient", "ControllerUnreachable"]

_SIZE = struct.Struct(">i")


class ControllerUnreachable(UnreachableError):
    """The controller cannot be reached, closed the connection, or did not answer in time.

    `refused`: the connection was refused, i.e. nothing listens there (as opposed to a timeout, a TLS
    failure or a lost connection), which `zk2kraft admin` takes as "no controller is running"."""

    refused: bool = False


def _why(e: BaseException) -> str:
    """One line for a failed connection. A TLS failure says what the handshake decided, in words:
    the controller's certificate refused here (expired, untrusted), or the controller's alert when it
    refused ours, which a TLS 1.3 client reads only with the first answer."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS handshake failed: the controller's certificate is not accepted: {e.verify_message}"
    reason = getattr(e, "reason", None)
    if isinstance(e, ssl.SSLError) and isinstance(reason, str) and "ALERT_" in reason:
        alert = reason.split("ALERT_", 1)[1].lower().replace("_", " ")
        return f"TLS handshake failed: the controller refused it with the alert '{alert}'"
    return str(getattr(e, "strerror", None) or e)


class ControllerClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "zk2kraft",
        timeout_s: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security if security is not None else ClientSecurity()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._connect()

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.security.tls:
                self._sock = self.security.ssl_context().wrap_socket(self._sock, server_hostname=self.host)
        except OSError as e:  # ssl.SSLError included: an untrusted certificate, a plaintext port
            self._sock = None
            error = ControllerUnreachable(
                f"cannot reach the controller at {self.host}:{self.port}: {_why(e)}"
            )
            error.refused = isinstance(e, ConnectionRefusedError)
            raise error from None
        resp = self._call(M.API_VERSIONS, 3, M.ApiVersionsRequest("zk2kraft", "1"))
        if resp.error_code != 0:
            resp = self._call(M.API_VERSIONS, 0, M.ApiVersionsRequest())
        self.versions = {
            a.api_key: (a.min_version, a.max_version) for a in resp.api_keys if a.api_key in wire.SUPPORTED
        }
        if self.security.sasl:
            try:
                sasl_authenticate(self._round_trip, lambda: next(self._ids), self.client_id, self.security)
            except BaseException:
                self.close()
                raise

    def _round_trip(self, frame_bytes: bytes) -> bytes:
        """One raw request frame out, the response body (correlation id first) back."""
        sock = self._sock
        if sock is None:
            raise ControllerUnreachable(f"the connection to {self.host}:{self.port} is closed")
        try:
            sock.sendall(frame_bytes)
            (size,) = _SIZE.unpack(_recv(sock, 4))
            return _recv(sock, size)
        except (OSError, EOFError) as e:
            self.close()
            raise ControllerUnreachable(
                f"SASL with {self.host}:{self.port} failed: the controller closed the connection ({e or type(e).__name__})"
            ) from None

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version_for(self, api_key: int, wanted: int | None = None) -> int:
        """``wanted``, or the highest version both sides serve; ValueError if there is none."""
        ours = wire.SUPPORTED[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise ValueError(f"the controller does not serve {wire.NAMES[api_key]}")
        lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if wanted is not None:
            if not lo <= wanted <= hi:
                raise ValueError(f"{wire.NAMES[api_key]} v{wanted} is not served (both sides: {lo}-{hi})")
            return wanted
        if lo > hi:
            raise ValueError(f"no {wire.NAMES[api_key]} version both sides serve")
        return hi

    def _call(self, api_key: int, version: int, request: Any) -> Any:
        with self._lock:
            sock = self._sock
            if sock is None:
                raise ControllerUnreachable(f"the connection to {self.host}:{self.port} is closed")
            cid = next(self._ids)
            data = wire.encode_request(api_key, version, cid, self.client_id, request)
            try:
                sock.sendall(data)
                head = _recv(sock, 4)
                (size,) = _SIZE.unpack(head)
                if size < 4 or size > wire.MAX_FRAME_BYTES:
                    raise wire.WireError(f"a response frame of {size} bytes")
                body = _recv(sock, size)
                got, response = wire.decode_response(api_key, version, body)
            except (OSError, EOFError, wire.WireError) as e:
                self.close()
                what = "no answer in time" if isinstance(e, TimeoutError) else _why(e) or type(e).__name__
                raise ControllerUnreachable(
                    f"{wire.NAMES[api_key]} to {self.host}:{self.port} failed: {what}"
                ) from None
            if got != cid:
                self.close()
                raise ControllerUnreachable(f"response for correlation id {got}, expected {cid}")
            return response

    def call(self, api_key: int, version: int, request: Any) -> Any:
        """Any served API; the admin APIs (`kio_apis`) go and come back as kio's own entities."""
        return self._call(api_key, version, request)

    # -- the APIs -------------------------------------------------------------------------------

    def api_versions(self) -> M.ApiVersionsResponse:
        return self._call(
            M.API_VERSIONS, self.version_for(M.API_VERSIONS), M.ApiVersionsRequest("zk2kraft", "1")
        )

    def register_broker(
        self, req: M.BrokerRegistrationRequest, version: int | None = None
    ) -> M.BrokerRegistrationResponse:
        return self._call(M.BROKER_REGISTRATION, self.version_for(M.BROKER_REGISTRATION, version), req)

    def heartbeat(
        self, req: M.BrokerHeartbeatRequest, version: int | None = None
    ) -> M.BrokerHeartbeatResponse:
        return self._call(M.BROKER_HEARTBEAT, self.version_for(M.BROKER_HEARTBEAT, version), req)

    def alter_partition(
        self, req: M.AlterPartitionRequest, version: int | None = None
    ) -> M.AlterPartitionResponse:
        return self._call(M.ALTER_PARTITION, self.version_for(M.ALTER_PARTITION, version), req)

    def alter_replica_state(
        self, req: M.AlterReplicaStateRequest, version: int | None = None
    ) -> M.AlterReplicaStateResponse:
        return self._call(M.ALTER_REPLICA_STATE, self.version_for(M.ALTER_REPLICA_STATE, version), req)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the controller closed the connection")
        buf += chunk
    return bytes(buf)
