"""The compiled record codecs: one encoder, decoder and builder per (apiKey, version) and control message.

`record_codegen` writes them from the declarations in `schema.py`; this module runs it once at import
and holds the tables the codec modules above use, with the few flexible-format helpers (compact strings,
tagged-field sections) the generated code calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from migrator.kraft.record_codegen import Compiler
from migrator.kraft.record_types import frame
from migrator.kraft.schema import CONTROL_SCHEMAS, SCHEMAS
from migrator.kraft.varint import encode_uvarint

Decoder = Callable[[bytes, int, int], dict[str, Any]]
Encoder = Callable[[dict[str, Any]], bytes]


def compact_string(s: str) -> bytes:
    b = s.encode()
    return encode_uvarint(len(b) + 1) + b


def compact_bytes(s: bytes) -> bytes:
    b = bytes(s)
    return encode_uvarint(len(b) + 1) + b


def encode_tagged_section(known: Any, unknown: dict[int, bytes] | None) -> bytes:
    """Tagged-field trailer from known (tag, bytes) pairs and kept unknown ones, in ascending tag order."""
    items = dict(known)
    if unknown:
        for tag, data in unknown.items():
            if tag in items:
                raise ValueError(f"unknown tagged field {tag} collides with a known field")
            items[tag] = bytes(data)
    out = [encode_uvarint(len(items))]
    for tag in sorted(items):
        data = items[tag]
        out.append(encode_uvarint(tag))
        out.append(encode_uvarint(len(data)))
        out.append(data)
    return b"".join(out)


_compiler = Compiler({"_tagged": encode_tagged_section, "_cstr": compact_string, "_cbytes": compact_bytes})
_dec_names: dict[int, str] = {}
_enc_names: dict[int, str] = {}
_build_names: dict[int, str] = {}
_control_dec_names: dict[tuple[str, int], str] = {}
_control_enc_names: dict[tuple[str, int], str] = {}


for _schema_ in SCHEMAS.values():
    assert _schema_.api_key is not None
    for _v in range(_schema_.min_version, _schema_.max_version + 1):
        _key = (_schema_.api_key << 16) | _v
        _dec_names[_key] = _compiler.record_decoder(_schema_, _v)
        _enc_names[_key] = _compiler.record_encoder(_schema_, _v, frame(_schema_.api_key, _v))
        _build_names[_key] = _compiler.record_builder(_schema_, _v)
for _schema_ in CONTROL_SCHEMAS.values():
    for _v in range(_schema_.min_version, _schema_.max_version + 1):
        _control_dec_names[(_schema_.name, _v)] = _compiler.record_decoder(_schema_, _v)
        _control_enc_names[(_schema_.name, _v)] = _compiler.record_encoder(_schema_, _v, b"")
_ns = _compiler.compile()

#: (apiKey << 16 | version) -> the general decoder compiled from the declarations
GENERAL_DECODERS: dict[int, Decoder] = {k: _ns[n] for k, n in _dec_names.items()}
#: (apiKey << 16 | version) -> encoder(fields) -> framed value bytes
ENCODERS: dict[int, Encoder] = {k: _ns[n] for k, n in _enc_names.items()}
#: (apiKey << 16 | version) -> framed(fields, index) -> the whole record (framing + value) as it sits
#: at position ``index`` of a KRaft batch, or None when the record has no fixed layout.
FRAMED_ENCODERS: dict[int, Callable[[dict[str, Any], int], bytes | None]] = {
    k: _ns[n] for k, n in _compiler.framed.items()
}
BUILDERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {k: _ns[n] for k, n in _build_names.items()}
#: (control message name, version) -> body decoder / encoder (no frame)
CONTROL_DECODERS: dict[tuple[str, int], Decoder] = {k: _ns[n] for k, n in _control_dec_names.items()}
CONTROL_ENCODERS: dict[tuple[str, int], Encoder] = {k: _ns[n] for k, n in _control_enc_names.items()}
GENERATED_SOURCE: str = _compiler.source
