"""A Fetch answer whose records go from the segment file to the socket without passing through Python,
and the slice of a snapshot file a FetchSnapshot answer carries.

A catch-up answer is up to 8 MiB of batches. Read into Python, they were copied four times before the
first byte left (the read, the encoder's buffer, its value, the frame); Kafka's leader sends them from
the file (`FileRecords.writeTo`, sendfile). Here the response is encoded around a small marker in
place of the records, cut there into the bytes before (with the records' real length) and after, and
sent as: the head, the segment slice by ``socket.sendfile``, the tail. TLS sockets fall back to reading
the file in Python (the standard library's ``sendfile`` does so itself).
"""

from __future__ import annotations

import io
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from migrator.kraft.varint import encode_uvarint

__all__ = ["MARKER", "SegmentSlice", "SlicedAnswer", "read_file_slice", "split_at_marker"]

#: Stands for the records while the response is encoded: 16 random bytes, looked for in a body of a
#: hundred or so bytes of fixed fields (no other field holds free bytes that could repeat it).
MARKER = bytes.fromhex("8f1c2e7a0b5d4c96a3e1f07b6d2c9e45")


def split_at_marker(body: bytes, count: int) -> tuple[bytes, bytes]:
    """(head, tail) of ``body`` encoded with `MARKER` as its records (a flexible version's compact
    bytes: unsigned varint length + 1, then the bytes), for records of ``count`` bytes instead."""
    at = body.find(MARKER)
    if at < 1 or body.find(MARKER, at + 1) != -1 or body[at - 1] != len(MARKER) + 1:
        raise ValueError("the records' marker is not found once, after its compact length")
    return body[: at - 1] + encode_uvarint(count + 1), body[at + len(MARKER) :]


def read_file_slice(path: Path, position: int, max_bytes: int) -> tuple[int, bytes] | None:
    """(The file's size, up to ``max_bytes`` of it from ``position``, at least 1, or b"" when
    ``position`` lies outside it), or None when the file is gone: a FetchSnapshot answer's bytes."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if not 0 <= position < size:
                return size, b""
            f.seek(position)
            return size, f.read(max(1, min(max_bytes, size)))
    except FileNotFoundError:  # retention deleted it since it was listed
        return None


@dataclass(slots=True)
class SegmentSlice:
    """``count`` bytes at ``position`` of an open segment descriptor (owned: `close` it)."""

    fd: int
    position: int
    count: int

    def read(self) -> bytes:
        """The bytes themselves (a short file gives fewer: the sender closes the connection then)."""
        parts, got = [], 0
        while got < self.count:
            chunk = os.pread(self.fd, self.count - got, self.position + got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # an answer dropped by an error before it was sent or read
        self.close()


@dataclass(slots=True)
class SlicedAnswer:
    """A response frame as head bytes, a segment slice and tail bytes (the frame's size in the head)."""

    head: bytes
    records: SegmentSlice
    tail: bytes

    @classmethod
    def around(cls, body: bytes, records: SegmentSlice) -> SlicedAnswer:
        """The answer of ``body``, encoded with `MARKER` as its records, with ``records`` in its place."""
        head, tail = split_at_marker(body, records.count)
        return cls(head, records, tail)

    def framed(self, correlation_id: int) -> SlicedAnswer:
        """As a response frame: its size and ResponseHeader v1 (correlation id, no tagged fields)."""
        self.head = struct.pack(">ii", len(self) + 5, correlation_id) + b"\x00" + self.head
        return self

    def __len__(self) -> int:
        return len(self.head) + self.records.count + len(self.tail)

    def send(self, conn: socket.socket) -> None:
        """Send it all on a blocking socket (its timeout applies), then close the slice. A slice the file
        no longer holds in full is an OSError: the frame's size was promised, the connection must go."""
        try:
            conn.sendall(self.head)
            with io.FileIO(self.records.fd, "rb", closefd=False) as f:
                sent = conn.sendfile(f, self.records.position, self.records.count)
            if sent != self.records.count:
                raise OSError(f"sent {sent} of the answer's {self.records.count} record bytes")
            conn.sendall(self.tail)
        finally:
            self.records.close()

    def to_bytes(self) -> bytes:
        """The whole frame in memory (for senders that cannot block on one connection), slice closed."""
        try:
            data = self.records.read()
            if len(data) != self.records.count:
                raise OSError(f"read {len(data)} of the answer's {self.records.count} record bytes")
            return b"".join((self.head, data, self.tail))
        finally:
            self.records.close()
