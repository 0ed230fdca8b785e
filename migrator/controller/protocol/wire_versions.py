"""Which apiKeys and versions the controller serves, and the kio entity classes that read and write each.

Split out of `wire` so that the bounds check, the request and response conversions and the frame
codec share one table and one cache of kio readers and writers.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer

from migrator.controller.protocol import kio_ext
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.kio_apis import NATIVE, schema_module

#: The largest request the listener reads unless `socket.request.max.bytes` says otherwise
#: (`listener_config.connection_limits`): Kafka's default, 100 MiB. Also the largest response the
#: client reads.
MAX_FRAME_BYTES = 104_857_600

#: apiKey -> (min, max) version served.
SUPPORTED: dict[int, tuple[int, int]] = {
    M.API_VERSIONS: (0, 3),
    M.ALTER_PARTITION: (0, 3),
    M.BROKER_REGISTRATION: (0, 3),
    M.BROKER_HEARTBEAT: (0, 1),
    M.ALTER_REPLICA_STATE: (0, 0),
    M.ENVELOPE: (0, 0),
}

NAMES = {
    M.API_VERSIONS: "ApiVersions",
    M.ALTER_PARTITION: "AlterPartition",
    M.BROKER_REGISTRATION: "BrokerRegistration",
    M.BROKER_HEARTBEAT: "BrokerHeartbeat",
    M.ALTER_REPLICA_STATE: "AlterReplicaState",
    M.ENVELOPE: "Envelope",
}

_KIO_MODULES = {
    M.API_VERSIONS: "api_versions",
    M.ALTER_PARTITION: "alter_partition",
    M.BROKER_REGISTRATION: "broker_registration",
    M.BROKER_HEARTBEAT: "broker_heartbeat",
    M.ENVELOPE: "envelope",
}

# Admin APIs answered with kio's own entities (see kio_apis).
SUPPORTED.update({k: (a.min_version, a.max_version) for k, a in NATIVE.items()})
NAMES.update({k: a.name for k, a in NATIVE.items()})
_KIO_MODULES.update({k: a.module for k, a in NATIVE.items()})

#: APIs whose kio entities travel through the wire layer unchanged: the admin APIs and Envelope.
PASSTHROUGH = frozenset(NATIVE) | {M.ENVELOPE}


class WireError(Exception):
    """Bytes that are not a valid frame, header or message of a supported version."""


def is_flexible(api_key: int, version: int) -> bool:
    if api_key in NATIVE:
        return version >= NATIVE[api_key].flexible_from
    return not (api_key == M.API_VERSIONS and version < 3)


def _classes(api_key: int, version: int) -> tuple[type, type]:
    """The kio entity classes (request, response) for one version."""
    found = _CLASSES.get((api_key, version))
    if found is not None:
        return found
    if api_key == M.ALTER_PARTITION and version in (0, 1):
        pair = (
            (kio_ext.AlterPartitionRequestV0, kio_ext.AlterPartitionResponseV0)
            if version == 0
            else (kio_ext.AlterPartitionRequestV1, kio_ext.AlterPartitionResponseV1)
        )
    elif api_key == M.ALTER_REPLICA_STATE and version == 0:
        pair = (kio_ext.AlterReplicaStateRequestV0, kio_ext.AlterReplicaStateResponseV0)
    elif api_key in NATIVE:
        name = NAMES[api_key]
        req_m, resp_m = (
            schema_module(api_key, version, "request"),
            schema_module(api_key, version, "response"),
        )
        pair = (getattr(req_m, name + "Request"), getattr(resp_m, name + "Response"))
    else:
        base = f"kio.schema.{_KIO_MODULES[api_key]}.v{version}"
        req = importlib.import_module(base + ".request")
        resp = importlib.import_module(base + ".response")
        name = NAMES[api_key]
        pair = (getattr(req, name + "Request"), getattr(resp, name + "Response"))
    _CLASSES[(api_key, version)] = pair
    return pair


_CLASSES: dict[tuple[int, int], tuple[type, type]] = {}
_READERS: dict[type, Callable[..., Any]] = {}
_WRITERS: dict[type, Callable[..., Any]] = {}


def _read(cls: type, data: bytes | memoryview, offset: int) -> tuple[Any, int]:
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = entity_reader(cls)
    try:
        value, size = reader(data, offset)
    except Exception as e:  # kio raises its DecodeError family, and ValueError/IndexError on odd input
        raise WireError(f"malformed {getattr(cls, '__name__', cls)}: {type(e).__name__}: {e}") from None
    return value, size


def _write(cls: type, obj: Any) -> bytes:
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    buf = io.BytesIO()
    writer(buf, obj)
    return buf.getvalue()
