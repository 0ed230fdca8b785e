"""Kafka's wire protocol for the controller: frames, headers, and each supported message version.

The bytes are kio's: kio's generated entities for every (api, version) it ships, and kio entities
declared in `kio_ext` for AlterPartition v0/v1 and AlterReplicaState. This module maps each version onto
the version-independent classes in `messages`, so nothing above it branches on versions.

A frame is an int32 size and that many bytes. Requests carry header v1 (non-flexible versions) or v2
(flexible); responses carry header v0, or v1 for flexible versions except ApiVersions, which always
answers with header v0 so that a client of any version can read the error in it (KIP-511).

The served versions and kio classes are in `wire_versions`, the bounds check in `wire_bounds`, and the
conversions in `wire_requests` / `wire_responses`; this module frames and heads them, and re-exports
the names callers have always imported from here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1

from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.kio_apis import NATIVE
from migrator.controller.protocol.wire_bounds import _check_body, _check_request_header, _Cursor
from migrator.controller.protocol.wire_requests import _request_from_kio, _request_to_kio
from migrator.controller.protocol.wire_responses import (
    _response_from_kio,
    _response_to_kio,
    alter_partition_bytes,
)
from migrator.controller.protocol.wire_versions import (
    MAX_FRAME_BYTES,
    NAMES,
    SUPPORTED,
    WireError,
    _classes,
    _read,
    _write,
    is_flexible,
)

__all__ = [
    "MAX_FRAME_BYTES",
    "SUPPORTED",
    "RequestHeader",
    "WireError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "is_flexible",
]

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


# --- headers ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """The header of a request frame (without its size) and where the body starts.

    Raises WireError for a frame too short for a header. The header's own version follows from the
    request's apiKey and version; for an apiKey or version this listener does not serve, the v1 header
    is read (its first fields are the same in every version), enough to answer with an error.
    """
    if len(frame) < 8:
        raise WireError(f"a request of {len(frame)} bytes is shorter than a request header")
    api_key, version = _KEY_VERSION.unpack_from(frame, 0)
    served = SUPPORTED.get(api_key)
    flexible = served is not None and served[0] <= version <= served[1] and is_flexible(api_key, version)
    cls = RequestHeaderV2 if flexible else RequestHeaderV1
    _check_request_header(frame, flexible)
    header, size = _read(cls, frame, 0)
    return RequestHeader(api_key, version, int(header.correlation_id), header.client_id), size


def _response_header(api_key: int, version: int, correlation_id: int) -> bytes:
    """Header v0 is the correlation id; v1 adds an empty tag section (kio's bytes for either)."""
    if api_key != M.API_VERSIONS and is_flexible(api_key, version):
        return _SIZE.pack(correlation_id) + b"\x00"
    return _SIZE.pack(correlation_id)


def _request_header(api_key: int, version: int, correlation_id: int, client_id: str | None) -> bytes:
    cls = RequestHeaderV2 if is_flexible(api_key, version) else RequestHeaderV1
    return _write(
        cls,
        cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


# --- requests --------------------------------------------------------------------------------------


def decode_request(frame_bytes: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """A request frame (without its size) → (header, normalised request). Raises WireError."""
    header, pos = decode_request_header(frame_bytes)
    served = SUPPORTED.get(header.api_key)
    if served is None:
        raise WireError(f"unknown apiKey {header.api_key}")
    if not served[0] <= header.api_version <= served[1]:
        raise WireError(f"{NAMES[header.api_key]} v{header.api_version} is not supported")
    req_cls, _ = _classes(header.api_key, header.api_version)
    _check_body(req_cls, frame_bytes, pos)
    body, size = _read(req_cls, frame_bytes, pos)
    # The admin APIs read the schema's fields and ignore what follows: librdkafka 2.16's Metadata v12
    # carries 3 bytes past what kio's schema reads (not yet explained), and clients must bootstrap.
    if pos + size != len(frame_bytes) and header.api_key not in NATIVE:
        raise WireError(
            f"{NAMES[header.api_key]} v{header.api_version}: {len(frame_bytes) - pos - size} bytes "
            "after the request body"
        )
    return header, _request_from_kio(header.api_key, header.api_version, body)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, req: Any) -> bytes:
    """A whole request frame (size included)."""
    req_cls, _ = _classes(api_key, version)
    body = _write(req_cls, _request_to_kio(api_key, version, req_cls, req))
    return frame(_request_header(api_key, version, correlation_id, client_id) + body)


def encode_response(header: RequestHeader, resp: Any) -> bytes:
    """A whole response frame (size included) answering ``header``."""
    api_key, version = header.api_key, header.api_version
    _, resp_cls = _classes(api_key, version)
    if api_key == M.ALTER_PARTITION:
        body = alter_partition_bytes(resp_cls, resp)
    else:
        body = _write(resp_cls, _response_to_kio(api_key, version, resp_cls, resp))
    return frame(_response_header(api_key, version, header.correlation_id) + body)


def decode_response(api_key: int, version: int, frame_bytes: bytes | memoryview) -> tuple[int, Any]:
    """A response frame (without its size) → (correlation id, normalised response). Raises WireError."""
    if api_key != M.API_VERSIONS and is_flexible(api_key, version):
        cur = _Cursor(frame_bytes, 0, len(frame_bytes))
        cur.take(4)
        cur.tagged_fields()
        hdr, pos = _read(ResponseHeaderV1, frame_bytes, 0)
    else:
        hdr, pos = _read(ResponseHeaderV0, frame_bytes, 0)
    _, resp_cls = _classes(api_key, version)
    if api_key == M.API_VERSIONS and version > 0 and len(frame_bytes) - pos >= 2:
        # KIP-511: an UNSUPPORTED_VERSION answer comes as v0, whatever version was asked
        (code,) = struct.unpack_from(">h", frame_bytes, pos)
        if code == E.UNSUPPORTED_VERSION:
            resp_cls = _classes(api_key, 0)[1]
            version = 0
    _check_body(resp_cls, frame_bytes, pos)
    body, size = _read(resp_cls, frame_bytes, pos)
    return int(hdr.correlation_id), _response_from_kio(api_key, version, body)


def supported_ranges(limit: dict[int, tuple[int, int]] | None = None) -> list[M.ApiVersionRange]:
    table = SUPPORTED if limit is None else limit
    return [M.ApiVersionRange(k, lo, hi) for k, (lo, hi) in sorted(table.items())]
