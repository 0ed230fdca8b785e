"""Decoding a batch's metadata records in place: the log layer's hot path.

Records are decoded one at a time until one has a fixed layout (`record_shapes.ShapeLearner`); from
then on a generated "run" function decodes following records of the same layout — framing and body —
with one ``struct.iter_unpack`` step each, checking every constant byte, and hands back to the general
path at the first record that differs. With the native extension built (`native`), its unpacker goes
first and leaves to these paths each record it declines.
"""

from __future__ import annotations

import itertools
import keyword
import struct
from typing import Any

from migrator.bulk import without_gc
from migrator.kraft.batch import (
    ATTR_CONTROL,
    MID,
    MID_LEN,
    MIN_RECORD_SIZE,
    RecordBatch,
    bad_delta,
    read_prefix_slow,
    skip_headers,
)
from migrator.kraft.native import NATIVE_UNPACK_RECORDS
from migrator.kraft.record_shapes import FAST_FRAMES, LEARNERS, ShapeLearner, ShapeSpec
from migrator.kraft.record_types import (
    DECODE_ERRORS,
    CorruptRecordError,
    MetadataRecord,
    OpaqueRecord,
    decode_error_reason,
)
from migrator.kraft.records import decode_value_at
from migrator.kraft.varint import OD_INT, ZZ, ZZ_TABLE_SIZE, BadFraming, read_zigzag

__all__ = ["decode_batch_records"]


def decode_batch_records(batch: RecordBatch) -> list[tuple[int, MetadataRecord | OpaqueRecord]]:
    """(absolute offset, record) for every metadata record of a data batch, decoded in place.

    Control batches hold no metadata records: use RecordBatch.control_records() for them.

    Records are decoded one at a time until one has a fixed layout (see record_shapes.ShapeLearner); from
    then on a generated "run" function decodes following records of the same layout — framing and
    body — with one ``struct.iter_unpack`` step each, checking every constant byte, and hands back to
    the general path at the first record that differs. With the native extension built, its unpacker
    goes first and leaves to these paths each record it declines.
    """
    if batch.attributes & ATTR_CONTROL:
        raise ValueError(
            f"batch at byte {batch.position} of {batch.file or '<buffer>'} is a control batch; "
            "use control_records()"
        )
    # Decoding allocates several containers per record and creates no reference cycles, so the
    # cyclic collector's repeated young-generation scans during a batch are pure cost (about a third
    # of the time): pause it for the batch, and only re-enable it if it was on.
    with without_gc():
        return _decode_batch_records(batch)


def _decode_batch_records(batch: RecordBatch) -> list[tuple[int, MetadataRecord | OpaqueRecord]]:
    data, pos, end, base_pos = batch.records_section()
    count = batch.records_count
    if count * MIN_RECORD_SIZE > end - pos:
        raise batch._corrupt(pos, base_pos, f"claims {count} records but holds only {end - pos} bytes")
    base = batch.base_offset
    # one slot per record, filled in order (runs assign whole slices): no regrowing a long list
    out: list[Any] = [None] * count
    frames_get = FAST_FRAMES.get
    tn = tuple.__new__
    mr = MetadataRecord
    startswith = data.startswith
    mid = MID
    mid_len = MID_LEN
    small = ZZ_TABLE_SIZE
    mv = memoryview(data)
    run_get = _RUN_BY_PREFIX.get
    od_width = _OD_WIDTH
    rstart = pos
    vpos = pos
    vend = -1
    delta = 0
    prev = -1
    last_delta = batch.last_offset_delta
    # runs produce offset delta == index, so they must stop where the batch's offset range ends
    run_limit = min(count, last_delta + 1, small)
    unpack = NATIVE_UNPACK_RECORDS
    native_limit = min(count, last_delta + 1) if unpack is not None else 0
    i = 0
    try:
        while i < count:
            if i < native_limit and prev == i - 1:
                # the native unpacker: the same records as the paths below, for what it can decode
                j, pos = unpack(data, pos, end, i, native_limit, base, out)
                if j > i:
                    prev = j - 1
                    i = j
                    continue
            if i < run_limit and prev == i - 1:
                # a run learned earlier for records that start with these bytes at this index width;
                # runs take offset delta == index, so only while no earlier delta has skipped ahead
                run = run_get((data[pos : pos + 3], od_width[i]))
                if run is not None:
                    j, pos = run(mv, pos, end, i, run_limit, base, out)
                    if j > i:
                        prev = j - 1
                        i = j
                        continue
            rstart = pos
            vend = -1
            # length (zigzag varint; one or two bytes inline)
            b = data[pos]
            if b < 128:
                rend = pos + 1 + ((b >> 1) ^ -(b & 1))
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 128:
                    raw = (b & 127) | (b2 << 7)
                    rend = pos + 2 + ((raw >> 1) ^ -(raw & 1))
                    pos += 2
                else:
                    length, pos = read_zigzag(data, pos)
                    rend = pos + length
            lpos = pos
            # attributes 0, timestampDelta 0, offsetDelta i, null key: what KRaft writes, checked at once
            kraft = i < small and startswith(mid[i], pos)
            if kraft:
                pos += mid_len[i]
                delta = i
            else:
                delta, pos = read_prefix_slow(data, pos)
            if delta <= prev or delta > last_delta:
                raise BadFraming(bad_delta(delta, prev, last_delta))
            prev = delta
            # valueLength
            vlpos = pos
            b = data[pos]
            if b < 128:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 128:
                    raw = (b & 127) | (b2 << 7)
                    vlen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    vlen, pos = read_zigzag(data, pos)
            if vlen < 0:
                raise BadFraming("record has a null value")
            vpos = pos
            pos += vlen
            ve = pos
            # headerCount
            if data[pos] == 0:
                pos += 1
            else:
                pos = skip_headers(data, pos)
            if pos != rend:
                raise BadFraming(f"record length disagrees with its fields by {pos - rend} bytes")
            vend = ve
            # the value: a known (frame 1, apiKey, version) prefix goes straight to its decoder
            entry = frames_get(data[vpos : vpos + 3]) if vlen >= 3 else None
            if entry is None:
                out[i] = (
                    base + delta,
                    decode_value_at(data, vpos, vend, _where(batch, base + delta, vpos, base_pos)),
                )
                i += 1
                continue
            api, ver, shape_get, decoder = entry
            fields = None
            shape = shape_get(vlen - 3)
            if shape is not None:
                fields = shape(data, vpos + 3, vend)
            if fields is None:
                fields = decoder(data, vpos + 3, vend)
            out[i] = (base + delta, tn(mr, (api, ver, fields)))
            i += 1
            if kraft and i < count:
                learner = LEARNERS.get((api << 16) | ver)
                if learner is not None:
                    layout = learner.shape_of(fields, vlen - 3)
                    if layout is not None:
                        _learn_run(
                            learner,
                            layout,
                            data[rstart:lpos] + b"\x00\x00",
                            mid_len[i - 1] - 3,
                            data[vlpos - 1 : vpos + 3],
                        )
    except BadFraming as exc:
        raise batch._corrupt(rstart, base_pos, str(exc)) from None
    except CorruptRecordError:
        raise
    except DECODE_ERRORS as exc:
        if vend < 0:
            raise batch._corrupt(rstart, base_pos, "record runs past the end of the batch") from None
        raise CorruptRecordError(
            _where(batch, base + delta, vpos, base_pos), decode_error_reason(exc, vend - vpos)
        ) from None
    if pos != end:
        raise batch._corrupt(pos, base_pos, f"{end - pos} bytes left over after {count} records")
    return out


_MAX_RUNS = 512
_RUNS: dict[tuple[Any, ...], Any] = {}
#: (first three bytes of a record, offset-delta width) -> the run last learned for such records
_RUN_BY_PREFIX: dict[tuple[bytes, int], Any] = {}
_OD_WIDTH: list[int] = [len(z) for z in ZZ]


def _learn_run(
    learner: ShapeLearner, layout: tuple[int, ...], head: bytes, od_width: int, tail: bytes
) -> None:
    run = _run_decoder(learner, layout, head, od_width, tail)
    if run is not None:
        _RUN_BY_PREFIX[(head[:3], od_width)] = run


#: Offset-delta varint bytes of records 0..63 (one byte each), and of records 64..8191 split into
#: their first and second bytes: a run compares each against a column of its records at once.
_OD1 = bytes(2 * i for i in range(64))
_OD2_LO = bytes(((2 * i) & 0x7F) | 0x80 for i in range(len(OD_INT)))
_OD2_HI = bytes((2 * i) >> 7 for i in range(len(OD_INT)))
#: How far runs of each offset-delta width reach: one-byte deltas end at record 64.
_OD_END = {1: 64, 2: len(OD_INT)}


def _agree(column: Any, expected: bytes) -> int:
    """How many leading bytes of ``column`` equal ``expected`` (rare path: a mismatching delta)."""
    got = bytes(column)
    n = min(len(got), len(expected))
    for k in range(n):
        if got[k] != expected[k]:
            return k
    return n


def _run_decoder(
    learner: ShapeLearner, layout: tuple[int, ...], head: bytes, od_width: int, tail: bytes
) -> Any:
    """A function decoding consecutive records that share one framing and body layout.

    ``head`` is the record-length varint plus attributes and timestampDelta (constant in a run), the
    offset delta has ``od_width`` bytes and must equal the record's index, and ``tail`` is the null key,
    the value-length varint and the value's frame bytes. Only integers taken from the data (array
    lengths, sizes, the record's apiKey and version) are written into the generated source.

    Three C-level passes, no per-record checks in Python: every byte that is constant in the layout
    (framing, array lengths, empty tagged section, no headers) is unpacked by one struct and compared
    with the expected tuple until the first record that differs (``takewhile``); the offset deltas of
    those records are compared as byte columns with the expected indexes; then the records are
    unpacked by a second struct that skips the checked bytes, in one list comprehension.
    """
    key = (learner.api_key, learner.version, layout, head, od_width, tail)
    fn = _RUNS.get(key)
    if fn is not None or od_width not in _OD_END:
        return fn
    if len(_RUNS) >= _MAX_RUNS:
        _RUNS.clear()
        _RUN_BY_PREFIX.clear()
    spec = learner.spec(layout)
    # byte-level layout of a record: (constant bytes, or None for data) per piece, and the data codes
    pieces: list[tuple[bytes | None, int]] = [(head, len(head)), (None, od_width), (tail, len(tail))]
    fmt = ["x" * (len(head) + od_width + len(tail))]
    targets = []
    for name, code in zip(spec.targets, spec.codes, strict=True):
        size = struct.calcsize(">" + code)
        const = spec.consts.get(name)
        if const is None:
            fmt.append(code)
            targets.append(name)
            pieces.append((None, size))
        else:
            fmt.append("x" * size)
            pieces.append((struct.pack(">" + code, const), size))
    fmt.append("x")
    pieces.append((b"\x00", 1))  # no headers
    values = struct.Struct(">" + "".join(fmt))
    size = values.size
    const_fmt = "".join("B" * n if c is not None else "x" * n for c, n in pieces)
    consts = struct.Struct(">" + const_fmt)
    expected = tuple(b for c, _ in pieces if c is not None for b in c)
    assert consts.size == size and len(expected) == const_fmt.count("B")
    od_at = len(head)
    if od_width == 1:
        columns = [(od_at, "_OD1")]
    else:
        columns = [(od_at, "_OD2_LO"), (od_at + 1, "_OD2_HI")]
    od_check = "".join(
        f"    if n and mv[pos + {at} : pos + n * {size} : {size}] != {table}[i : i + n]:\n"
        f"        n = _agree(mv[pos + {at} : pos + n * {size} : {size}], {table}[i : i + n])\n"
        for at, table in columns
    )
    unpacked = f"({', '.join(targets)},)" if targets else "_"
    body = _run_body(spec, "            ")
    rec = f"_tn(_MR, ({learner.api_key}, {learner.version}, fields))"
    src = (
        "def run(mv, pos, end, i, count, base, out):\n"
        f"    m = (end - pos) // {size}\n"
        "    if m > count - i:\n"
        "        m = count - i\n"
        "    if m > _END - i:\n"
        "        m = _END - i\n"
        "    if m <= 0:\n"
        "        return i, pos\n"
        f"    n = len(_list(_takewhile(_same, _consts(mv[pos : pos + m * {size}]))))\n"
        + od_check
        + "    if n:\n"
        + "".join(f"        b{t} = u{t} = None\n" for t in spec.uuids)
        + f"        for j, o, {unpacked} in _zip(range(i, i + n), range(base + i, base + i + n), "
        f"_values(mv[pos : pos + n * {size}])):\n" + body + f"            out[j] = (o, {rec})\n"
        f"    return i + n, pos + n * {size}\n"
    )
    ns: dict[str, Any] = dict(
        spec.names,
        _consts=consts.iter_unpack,
        _values=values.iter_unpack,
        _same=expected.__eq__,
        _takewhile=itertools.takewhile,
        _list=list,
        _OD1=_OD1,
        _OD2_LO=_OD2_LO,
        _OD2_HI=_OD2_HI,
        _END=_OD_END[od_width],
        _agree=_agree,
        _zip=zip,
        _tn=tuple.__new__,
        _MR=MetadataRecord,
        _F=type(f"{learner.label} fields", (), {}),
    )
    exec(compile(src, f"<record run {learner.label} {layout}>", "exec"), ns)
    fn = ns["run"]
    _RUNS[key] = fn
    return fn


def _run_body(spec: ShapeSpec, ind: str) -> str:
    """Statements of a run's loop that leave a record's fields dict in ``fields``.

    The dict is built as the attribute dict of a throwaway instance of a class made for the run:
    CPython's key-sharing dicts (PEP 412) then hold only the values, with one keys table per class,
    which is cheaper to build and free than a dict display with its own keys — and is still an
    ordinary ``dict`` in every way. Field names that are not identifiers fall back to a display.
    A uuid is looked up only when it differs from the previous record's (a topic's partitions follow
    each other).
    """
    lines = []
    values = dict(spec.values)
    for t in spec.uuids:
        lines.append(f"{ind}if {t} != b{t}:")
        lines.append(f"{ind}    u{t} = _ucg({t}) or _mku({t})")
        lines.append(f"{ind}    b{t} = {t}")
        values = {k: (f"u{t}" if v == f"(_ucg({t}) or _mku({t}))" else v) for k, v in values.items()}
    if all(name.isidentifier() and not keyword.iskeyword(name) for name in values):
        lines.append(f"{ind}f = _F()")
        lines += [f"{ind}f.{name} = {expr}" for name, expr in values.items()]
        lines.append(f"{ind}fields = f.__dict__")
    else:
        lines.append(f"{ind}fields = {{" + ", ".join(f"{k!r}: {v}" for k, v in values.items()) + "}")
    return "".join(line + "\n" for line in lines)


def _where(batch: RecordBatch, offset: int, vpos: int, base_pos: int) -> str:
    place = f"byte {base_pos + vpos}" if base_pos >= 0 else f"batch at byte {batch.position}"
    return f"{batch.file or '<buffer>'}: record at offset {offset} ({place})"
