"""Kafka's Uuid: its 22-character base64url string form, and the decoder's cache of parsed ids."""

from __future__ import annotations

import base64
import binascii
import uuid

from migrator.errors import BadInputError


class InvalidUuidError(BadInputError, ValueError):
    """A string that is not Kafka's 22-character base64url Uuid."""


def uuid_to_kafka(u: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: base64url of its 16 bytes without padding (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def kafka_to_uuid(s: str) -> uuid.UUID:
    """Parse Kafka's Uuid string (as in ZooKeeper's ``topic_id``); raises InvalidUuidError."""
    if not isinstance(s, str) or len(s) != 22:
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: expected 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(s + "==")
    except (binascii.Error, ValueError):
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: not base64url") from None
    if len(raw) != 16 or uuid_to_kafka(uuid.UUID(bytes=raw)) != s:
        raise InvalidUuidError(f"invalid Kafka Uuid {s!r}: not base64url") from None
    return uuid.UUID(bytes=raw)


UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 1 << 16


def make_uuid(raw: bytes) -> uuid.UUID:
    """Decode 16 bytes to a UUID, remembering it: topic ids and directory ids repeat a lot."""
    u = uuid.UUID(bytes=raw)
    if len(UUID_CACHE) >= _UUID_CACHE_MAX:
        UUID_CACHE.clear()
    UUID_CACHE[raw] = u
    return u
