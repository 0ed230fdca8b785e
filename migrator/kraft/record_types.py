"""The KRaft metadata record value types and their errors: what every codec module below produces.

A value is ``uvarint frameVersion (1) | uvarint apiKey | uvarint version | body``; `frame` writes the
first three. The body codec lives in `record_codegen` (generated from `schema.py`), the public entry
points in `records`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from migrator.errors import BadInputError
from migrator.kraft.schema import SCHEMAS
from migrator.kraft.varint import BadValue, encode_uvarint

#: The metadata value frame version Kafka writes and reads (0 was the 2.8 preview format).
FRAME_VERSION = 1

#: Key under which a decoded struct keeps tagged fields this schema does not know, as {tag: bytes};
#: the encoder writes them back in tag order, so such records round-trip unchanged.
UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"


class CorruptRecordError(BadInputError):
    """A metadata record value that cannot be decoded; the message names where it was found."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}corrupt metadata record: {reason}")


#: Exceptions a decoder raises on malformed input (anything else is a bug and propagates).
DECODE_ERRORS: tuple[type[Exception], ...] = (
    BadValue,
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
)


def decode_error_reason(exc: Exception, size: int) -> str:
    """One line describing why a generated decoder failed on a value of ``size`` bytes."""
    if isinstance(exc, BadValue):
        return str(exc)
    if isinstance(exc, struct.error | IndexError):
        return f"value truncated ({size} bytes)"
    if isinstance(exc, UnicodeDecodeError):
        return f"string is not valid UTF-8 ({exc.reason} at byte {exc.start})"
    if isinstance(exc, ValueError) and "16-char" in str(exc):
        return f"value truncated inside a uuid ({size} bytes)"
    return str(exc)


class MetadataRecord(NamedTuple):
    """A decoded metadata record: its apiKey, version and fields by Kafka's CamelCase names.

    A named tuple rather than a frozen dataclass because decoding builds one per record, and a tuple is
    the cheapest immutable object CPython creates (`new_record`). It compares equal only to another
    MetadataRecord, never to a plain tuple or an `OpaqueRecord`, as the dataclass did.
    """

    api_key: int
    version: int
    fields: dict[str, Any]

    @property
    def name(self) -> str:
        return SCHEMAS[self.api_key].name

    def __eq__(self, other: object) -> bool:
        if type(other) is MetadataRecord:
            return tuple.__eq__(self, other)
        return NotImplemented if not isinstance(other, tuple) else False

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # fields is a dict, as with the frozen dataclass


@dataclass(frozen=True, slots=True)
class OpaqueRecord:
    """A record whose apiKey or version this build does not know; its body bytes are kept as read."""

    api_key: int
    version: int
    body: bytes

    @property
    def name(self) -> str:
        known = SCHEMAS.get(self.api_key)
        return f"{known.name if known else 'UnknownRecord'}(apiKey={self.api_key}, v{self.version})"


_tuple_new = tuple.__new__


def new_record(api_key: int, version: int, fields: dict[str, Any]) -> MetadataRecord:
    """Build a MetadataRecord without the named tuple's Python-level __new__."""
    return _tuple_new(MetadataRecord, (api_key, version, fields))


def frame(api_key: int, version: int) -> bytes:
    """The three varints that open a metadata record value: frame version, apiKey, version."""
    return encode_uvarint(FRAME_VERSION) + encode_uvarint(api_key) + encode_uvarint(version)
