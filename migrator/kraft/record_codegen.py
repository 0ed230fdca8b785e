"""The record codec generator: reads the declarations in `schema.py` and compiles, for every
(apiKey, version) and control message, a specialised encoder, decoder and builder as Python source.

Runs of fixed-size fields become one ``struct`` call and varints take an inline one-byte fast path;
nothing here is written per record type. Record types whose untagged fields are fixed-size or arrays of
fixed-size elements also get shape encoders (one struct per array-length combination); their decoding
twin is `record_shapes`. The tables at the bottom are what `records` and `batch` use.
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any

from migrator.kraft.record_types import UNKNOWN_TAGGED_FIELDS, new_record
from migrator.kraft.schema import Field, RecordSchema
from migrator.kraft.uuids import UUID_CACHE, make_uuid
from migrator.kraft.varint import (
    OD_INT,
    UV,
    UV_TABLE_SIZE,
    BadValue,
    encode_uvarint_slow,
    read_uvarint,
    zigzag_bytes,
)

#: struct code and size of each fixed-size Kafka type

FIXED: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
SMALL_ARRAY = 64


def shape_eligible(schema: RecordSchema, version: int) -> bool:
    """Whether a record version's layout is fixed once its array lengths are known (see ShapeLearner)."""
    plain = [f for f in schema.fields_in(version) if not f.is_tagged_in(version)]
    arrays = [f for f in plain if f.is_array]
    return bool(arrays) and all(
        (f.element_type in FIXED) and not f.is_struct and not f.is_nullable_in(version) for f in plain
    )


#: Shape-specialised codecs: at most this many layouts per record version, arrays up to this long.
MAX_SHAPES = 64
MAX_SHAPE_ARRAY = 32


class Compiler:
    """Turns schema declarations into specialised Python functions (source text, exec'd once)."""

    def __init__(self, runtime: dict[str, Callable[..., Any]]) -> None:
        """``runtime``: the helpers generated code calls by name (see `record_codecs`)."""
        self.ns: dict[str, Any] = {
            **runtime,
            "_Bad": BadValue,
            "_uvarint": read_uvarint,
            "_UV": UV,
            "_uvenc": encode_uvarint_slow,
            "_ucg": UUID_CACHE.get,
            "_mku": make_uuid,
            "_Struct": struct.Struct,
            "_unpack_from": struct.unpack_from,
            "_UNK": UNKNOWN_TAGGED_FIELDS,
            "_new": new_record,
            "_ZERO": uuid.UUID(int=0),
        }
        for t, (code, _size) in FIXED.items():
            if t != "uuid":
                self.ns[f"_A_{code}"] = tuple(struct.Struct(f">{i}{code}") for i in range(SMALL_ARRAY))
                self.ns[f"_S_{code}"] = struct.Struct(f">{code}")
        self.lines: list[str] = []
        self.framed: dict[int, str] = {}
        self._structs: dict[str, str] = {}
        self._n = 0

    # -- helpers ------------------------------------------------------------------------------

    def _const_struct(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = f"_S{len(self._structs)}"
            self._structs[fmt] = name
            self.ns[name] = struct.Struct(">" + fmt)
        return name

    def _var(self) -> str:
        self._n += 1
        return f"x{self._n}"

    # -- decoding -----------------------------------------------------------------------------

    @staticmethod
    def _read_uv(ind: str, var: str) -> list[str]:
        return [
            f"{ind}{var} = buf[pos]",
            f"{ind}if {var} < 128:",
            f"{ind}    pos += 1",
            f"{ind}else:",
            f"{ind}    {var}, pos = _uvarint(buf, pos)",
        ]

    def _decode_field(self, f: Field, version: int, var: str, ind: str, ctx: str) -> list[str]:
        """Statements that decode one field (tagged or not) into local ``var``."""
        out: list[str] = []
        nullable = f.is_nullable_in(version)
        label = f"{ctx}.{f.name}"
        if not f.is_array and f.type in FIXED:
            s = self._const_struct(FIXED[f.type][0])
            out.append(f"{ind}{var}, = {s}.unpack_from(buf, pos)")
            out.append(f"{ind}pos += {FIXED[f.type][1]}")
            if f.type == "uuid":
                out.append(f"{ind}{var} = _ucg({var}) or _mku({var})")
            return out
        if f.is_struct and not f.is_array:
            fn = self._decode_struct_fn(f.fields, version, f"{ctx}.{f.name}")
            out.append(f"{ind}{var}, pos = {fn}(buf, pos, end)")
            return out
        n = self._var()
        out += self._read_uv(ind, n)
        out.append(f"{ind}if {n} == 0:")
        if nullable:
            out.append(f"{ind}    {var} = None")
        else:
            out.append(f"{ind}    raise _Bad('non-nullable field {label} is null')")
        out.append(f"{ind}else:")
        ind2 = ind + "    "
        out.append(f"{ind2}{n} -= 1")
        if not f.is_array:
            e = self._var()
            out.append(f"{ind2}{e} = pos + {n}")
            if f.type == "string":
                out.append(f"{ind2}{var} = buf[pos:{e}].decode()")
            elif f.type == "bytes":
                out.append(f"{ind2}{var} = buf[pos:{e}]")
            else:
                raise ValueError(f"unsupported type {f.type} for {label}")
            out.append(f"{ind2}pos = {e}")
            return out
        et = f.element_type
        if et in FIXED and et != "uuid":
            code, size = FIXED[et]
            out.append(f"{ind2}if {n} * {size} > end - pos:")
            out.append(f"{ind2}    raise _Bad('array {label} claims %d elements' % {n})")
            out.append(
                f"{ind2}{var} = list((_A_{code}[{n}] if {n} < {SMALL_ARRAY} "
                f"else _Struct('>%d{code}' % {n})).unpack_from(buf, pos))"
            )
            out.append(f"{ind2}pos += {n}" + (f" * {size}" if size != 1 else ""))
            return out
        min_size = 16 if et == "uuid" else 1
        out.append(f"{ind2}if {n} * {min_size} > end - pos:")
        out.append(f"{ind2}    raise _Bad('array {label} claims %d elements' % {n})")
        out.append(f"{ind2}{var} = []")
        out.append(f"{ind2}for _ in range({n}):")
        ind3 = ind2 + "    "
        t = self._var()
        if et == "uuid":
            out.append(f"{ind3}{t} = buf[pos:pos + 16]")
            out.append(f"{ind3}pos += 16")
            out.append(f"{ind3}{var}.append(_ucg({t}) or _mku({t}))")
        elif et in ("string", "bytes"):
            m = self._var()
            out += self._read_uv(ind3, m)
            out.append(f"{ind3}if {m} == 0:")
            out.append(f"{ind3}    raise _Bad('null element in array {label}')")
            out.append(f"{ind3}{t} = pos + {m} - 1")
            out.append(f"{ind3}{var}.append(buf[pos:{t}]" + (".decode())" if et == "string" else ")"))
            out.append(f"{ind3}pos = {t}")
        elif f.is_struct:
            fn = self._decode_struct_fn(f.fields, version, label)
            out.append(f"{ind3}{t}, pos = {fn}(buf, pos, end)")
            out.append(f"{ind3}{var}.append({t})")
        else:
            raise ValueError(f"unsupported array type {f.type} for {label}")
        return out

    def _decode_body(self, fields: tuple[Field, ...], version: int, ctx: str) -> tuple[list[str], str]:
        """Statements decoding a struct body at ``version`` and the dict expression of its result."""
        body: list[str] = []
        ind = "    "
        present = [f for f in fields if f.exists_in(version)]
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = sorted((f for f in present if f.is_tagged_in(version)), key=lambda f: f.tag or 0)
        names: dict[str, str] = {}
        i = 0
        while i < len(plain):
            f = plain[i]
            if not f.is_array and f.type in FIXED:
                run = [f]
                while i + len(run) < len(plain):
                    g = plain[i + len(run)]
                    if g.is_array or g.type not in FIXED:
                        break
                    run.append(g)
                vars_ = [self._var() for _ in run]
                for g, v in zip(run, vars_, strict=True):
                    names[g.name] = v
                fmt = "".join(FIXED[g.type][0] for g in run)
                size = sum(FIXED[g.type][1] for g in run)
                s = self._const_struct(fmt)
                body.append(f"{ind}{', '.join(vars_)}, = {s}.unpack_from(buf, pos)")
                body.append(f"{ind}pos += {size}")
                for g, v in zip(run, vars_, strict=True):
                    if g.type == "uuid":
                        body.append(f"{ind}{v} = _ucg({v}) or _mku({v})")
                i += len(run)
                continue
            v = self._var()
            names[f.name] = v
            body += self._decode_field(f, version, v, ind, ctx)
            i += 1
        nt = self._var()
        body += self._read_uv(ind, nt)
        for f in tagged:
            v = self._var()
            names[f.name] = v
            body.append(f"{ind}{v} = {literal(f.default())}")
        order = [f.name for f in present]
        result = "{" + ", ".join(f"{nm!r}: {names[nm]}" for nm in order) + "}"
        body.append(f"{ind}if {nt}:")
        ind2 = ind + "    "
        unk = self._var()
        body.append(f"{ind2}if {nt} > end - pos:")
        body.append(f"{ind2}    raise _Bad('tagged field count %d is larger than the data' % {nt})")
        body.append(f"{ind2}{unk} = None")
        body.append(f"{ind2}for _ in range({nt}):")
        ind3 = ind2 + "    "
        tg, sz, stop = self._var(), self._var(), self._var()
        body += self._read_uv(ind3, tg)
        body += self._read_uv(ind3, sz)
        body.append(f"{ind3}{stop} = pos + {sz}")
        kw = "if"
        for f in tagged:
            body.append(f"{ind3}{kw} {tg} == {f.tag}:")
            body += self._decode_field(f, version, names[f.name], ind3 + "    ", ctx)
            kw = "elif"
        if tagged:
            body.append(f"{ind3}else:")
            ind4 = ind3 + "    "
        else:
            ind4 = ind3
        body.append(f"{ind4}if {unk} is None:")
        body.append(f"{ind4}    {unk} = {{}}")
        body.append(f"{ind4}{unk}[{tg}] = buf[pos:{stop}]")
        body.append(f"{ind4}pos = {stop}")
        body.append(f"{ind3}if pos != {stop}:")
        body.append(
            f"{ind3}    raise _Bad('tagged field %d of {ctx} declares %d bytes but holds %d' "
            f"% ({tg}, {sz}, pos - {stop} + {sz}))"
        )
        body.append(f"{ind2}if {unk} is not None:")
        body.append(f"{ind2}    r = {result}")
        body.append(f"{ind2}    r[_UNK] = {unk}")
        body.append(f"{ind2}    RETURN_R")
        return body, result

    def _decode_struct_fn(self, fields: tuple[Field, ...], version: int, ctx: str) -> str:
        self._n += 1
        name = f"_d{self._n}"
        body, result = self._decode_body(fields, version, ctx)
        src = [f"def {name}(buf, pos, end):"]
        src += [ln.replace("RETURN_R", "return r, pos") for ln in body]
        src.append(f"    return {result}, pos")
        self.lines.append("\n".join(src))
        return name

    def record_decoder(self, schema: RecordSchema, version: int) -> str:
        """A function (buf, pos, end) -> fields dict that also insists the body ends exactly at end."""
        self._n += 1
        name = f"_dec_{schema.name}_v{version}_{self._n}"
        body, result = self._decode_body(schema.fields, version, schema.name)

        def check(ind: str) -> list[str]:
            return [
                f"{ind}if pos != end:",
                f"{ind}    raise _Bad('%d bytes left over after the record body' % (end - pos)"
                " if pos < end else 'record body runs %d bytes past the end of the value' % (pos - end))",
            ]

        src = [f"def {name}(buf, pos, end):"]
        for ln in body:
            if ln.strip() == "RETURN_R":
                ind = ln[: len(ln) - len(ln.lstrip())]
                src += check(ind)
                src.append(f"{ind}return r")
            else:
                src.append(ln)
        src += check("    ")
        src.append(f"    return {result}")
        self.lines.append("\n".join(src))
        return name

    # -- encoding -----------------------------------------------------------------------------

    @staticmethod
    def _uv_expr(n: str) -> str:
        return f"(_UV[{n}] if {n} < {UV_TABLE_SIZE} else _uvenc({n}))"

    def _encode_field(self, f: Field, version: int, val: str, ind: str, ctx: str) -> tuple[list[str], str]:
        """Statements and an expression giving the bytes of one field's value held in ``val``."""
        stmts: list[str] = []
        nullable = f.is_nullable_in(version)
        label = f"{ctx}.{f.name}"
        if not f.is_array and f.type in FIXED:
            s = self._const_struct(FIXED[f.type][0])
            return stmts, f"{s}.pack({val}.int.to_bytes(16))" if f.type == "uuid" else f"{s}.pack({val})"
        if f.is_struct and not f.is_array:
            fn = self._encode_struct_fn(f.fields, version, label)
            return stmts, f"{fn}({val})"
        out = self._var()
        ind2 = ind
        if nullable:
            stmts.append(f"{ind}if {val} is None:")
            stmts.append(f"{ind}    {out} = b'\\x00'")
            stmts.append(f"{ind}else:")
            ind2 = ind + "    "
        if not f.is_array:
            b, n = self._var(), self._var()
            if f.type == "string":
                stmts.append(f"{ind2}{b} = {val}.encode()")
            elif f.type == "bytes":
                stmts.append(f"{ind2}{b} = bytes({val})")
            else:
                raise ValueError(f"unsupported type {f.type} for {label}")
            stmts.append(f"{ind2}{n} = len({b}) + 1")
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + {b}")
            return stmts, out
        et = f.element_type
        n = self._var()
        stmts.append(f"{ind2}{n} = len({val}) + 1")
        if et in FIXED and et != "uuid":
            code = FIXED[et][0]
            stmts.append(
                f"{ind2}{out} = {self._uv_expr(n)} + (_A_{code}[{n} - 1] if {n} <= {SMALL_ARRAY} "
                f"else _Struct('>%d{code}' % ({n} - 1))).pack(*{val})"
            )
        elif et == "uuid":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([u.int.to_bytes(16) for u in {val}])")
        elif et == "string":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([_cstr(s) for s in {val}])")
        elif et == "bytes":
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([_cbytes(s) for s in {val}])")
        elif f.is_struct:
            fn = self._encode_struct_fn(f.fields, version, label)
            stmts.append(f"{ind2}{out} = {self._uv_expr(n)} + b''.join([{fn}(e) for e in {val}])")
        else:
            raise ValueError(f"unsupported array type {f.type} for {label}")
        return stmts, out

    def _encode_body(self, fields: tuple[Field, ...], version: int, ctx: str, prefix: bytes) -> list[str]:
        """Statements ending in ``return <bytes>`` for a struct whose dict is the local ``f``."""
        ind = "    "
        stmts: list[str] = []
        pieces: list[str] = [repr(prefix)] if prefix else []
        present = [f for f in fields if f.exists_in(version)]
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = sorted((f for f in present if f.is_tagged_in(version)), key=lambda f: f.tag or 0)
        i = 0
        while i < len(plain):
            f = plain[i]
            if not f.is_array and f.type in FIXED:
                run = [f]
                while i + len(run) < len(plain):
                    g = plain[i + len(run)]
                    if g.is_array or g.type not in FIXED:
                        break
                    run.append(g)
                fmt = "".join(FIXED[g.type][0] for g in run)
                s = self._const_struct(fmt)
                args = ", ".join(
                    f"f[{g.name!r}].int.to_bytes(16)" if g.type == "uuid" else f"f[{g.name!r}]" for g in run
                )
                pieces.append(f"{s}.pack({args})")
                i += len(run)
                continue
            v = self._var()
            stmts.append(f"{ind}{v} = f[{f.name!r}]")
            s2, expr = self._encode_field(f, version, v, ind, ctx)
            stmts += s2
            pieces.append(expr)
            i += 1
        unk = self._var()
        stmts.append(f"{ind}{unk} = f.get(_UNK)")
        if tagged:
            t = self._var()
            stmts.append(f"{ind}{t} = []")
            for f in tagged:
                v = self._var()
                stmts.append(f"{ind}{v} = f[{f.name!r}]")
                stmts.append(f"{ind}if {_differs(v, f.default())}:")
                s2, expr = self._encode_field(f, version, v, ind + "    ", ctx)
                stmts += s2
                stmts.append(f"{ind}    {t}.append(({f.tag}, {expr}))")
            pieces.append(f"(_tagged({t}, {unk}) if {t} or {unk} else b'\\x00')")
        else:
            pieces.append(f"(_tagged((), {unk}) if {unk} else b'\\x00')")
        stmts.append(f"{ind}return b''.join(({', '.join(pieces)},))")
        return stmts

    def _encode_struct_fn(self, fields: tuple[Field, ...], version: int, ctx: str) -> str:
        self._n += 1
        name = f"_e{self._n}"
        src = [f"def {name}(f):"] + self._encode_body(fields, version, ctx, b"")
        self.lines.append("\n".join(src))
        return name

    def record_encoder(self, schema: RecordSchema, version: int, prefix: bytes) -> str:
        """A function (fields dict) -> bytes: ``prefix`` (the frame) followed by the body."""
        self._n += 1
        name = f"_enc_{schema.name}_v{version}_{self._n}"
        src = [f"def {name}(f):"] + self._encode_body(schema.fields, version, schema.name, prefix)
        self.lines.append("\n".join(src))
        if shape_eligible(schema, version):
            return self._shape_encoder(schema, version, prefix, name)
        return name

    def _shape_encoder(self, schema: RecordSchema, version: int, prefix: bytes, general: str) -> str:
        """An encoder that packs a whole body with one struct call when its layout is fixed.

        Applies to records whose untagged fields are fixed-size or arrays of fixed-size elements, when
        every tagged field holds its default: the layout then depends only on the array lengths, and
        one ``struct.Struct`` per length combination writes frame, fields, counts and the empty tagged
        section. Anything else goes to the general encoder.

        A second function, registered in FRAMED_ENCODERS, does the same for a record inside a batch:
        its struct also writes the record framing (length, attributes, timestampDelta, offsetDelta,
        null key, value length, header count), which is constant per layout except the offset delta.
        """
        self._n += 1
        uid = self._n
        name = f"_encs_{schema.name}_v{version}_{uid}"
        framed_name = f"_encf_{schema.name}_v{version}_{uid}"
        present = schema.fields_in(version)
        plain = [f for f in present if not f.is_tagged_in(version)]
        tagged = [f for f in present if f.is_tagged_in(version)]
        arrays = [f for f in plain if f.is_array]
        codes = [("a", FIXED[f.element_type][0]) if f.is_array else ("f", FIXED[f.type][0]) for f in plain]

        def body_fmt(lengths: tuple[int, ...]) -> str:
            fmt = []
            it = iter(lengths)
            for kind, code in codes:
                fmt.append("B" + code * next(it) if kind == "a" else code)
            return "".join(fmt) + "x"  # "x": the empty tagged-field section

        def make(lengths: tuple[int, ...]) -> Any:
            return struct.Struct(f">{len(prefix)}s" + body_fmt(lengths)).pack

        def make_framed(key: tuple[Any, ...]) -> tuple[Any, bytes, bytes]:
            *lengths, one_byte_delta = key
            body = body_fmt(tuple(lengths))
            vlen = len(prefix) + struct.calcsize(">" + body)
            width = 1 if one_byte_delta else 2
            tail = b"\x01" + zigzag_bytes(vlen) + prefix  # null key, value length, frame
            rlen = 2 + width + len(tail) + vlen - len(prefix) + 1
            head = zigzag_bytes(rlen) + b"\x00\x00"  # length, attributes, timestampDelta
            fmt = f">{len(head)}s{'B' if width == 1 else 'H'}{len(tail)}s{body}x"  # "x": no headers
            return struct.Struct(fmt).pack, head, tail

        self.ns[f"_mkencshape{uid}"] = make
        self.ns[f"_mkencframed{uid}"] = make_framed
        self.ns[f"_encshapes{uid}"] = {}
        self.ns[f"_encframed{uid}"] = {}
        self.ns[f"_encprefix{uid}"] = prefix
        self.ns["_OD_INT"] = OD_INT
        names = [f.name for f in present]
        local = {nm: self._var() for nm in names}
        nvars = {f.name: self._var() for f in arrays}
        head: list[str] = []
        if len(names) == 1:
            head.append(f"    {local[names[0]]} = f[{names[0]!r}]")
        else:
            # one C call fetches every field (a missing one raises KeyError -> explained by the caller)
            self.ns[f"_get{uid}"] = operator.itemgetter(*names)
            head.append(f"    {', '.join(local[nm] for nm in names)} = _get{uid}(f)")
        conds = [_equals_default(local[f.name], f.default()) for f in tagged]
        conds.append("_UNK not in f")
        head.append(f"    if {' and '.join(conds)}:")
        for f in arrays:
            head.append(f"        {nvars[f.name]} = len({local[f.name]})")
        small = " and ".join(f"{nvars[f.name]} < {MAX_SHAPE_ARRAY}" for f in arrays)
        lens = ", ".join(nvars[f.name] for f in arrays)
        args = []
        for f in plain:
            v = local[f.name]
            if f.is_array:
                args.append(f"{nvars[f.name]} + 1")
                if f.element_type == "uuid":
                    args.append(f"*[u.int.to_bytes(16) for u in {v}]")
                else:
                    args.append(f"*{v}")
            elif f.type == "uuid":
                args.append(f"{v}.int.to_bytes(16)")
            else:
                args.append(v)
        body_args = ", ".join(args)

        plain_fn = [f"def {name}(f):", *head]
        plain_fn += [
            f"        if {small}:",
            f"            p = _encshapes{uid}.get(({lens},))",
            "            if p is None:",
            f"                if len(_encshapes{uid}) >= {MAX_SHAPES}:",
            f"                    return {general}(f)",
            f"                p = _encshapes{uid}[({lens},)] = _mkencshape{uid}(({lens},))",
            f"            return p(_encprefix{uid}, {body_args})",
            f"    return {general}(f)",
        ]
        self.lines.append("\n".join(plain_fn))

        framed_fn = [f"def {framed_name}(f, i):", *head]
        framed_fn += [
            f"        if {small} and i < {len(OD_INT)}:",
            f"            k = ({lens}, i < 64)",
            f"            e = _encframed{uid}.get(k)",
            "            if e is None:",
            f"                if len(_encframed{uid}) >= {2 * MAX_SHAPES}:",
            "                    return None",
            f"                e = _encframed{uid}[k] = _mkencframed{uid}(k)",
            f"            return e[0](e[1], _OD_INT[i], e[2], {body_args})",
            "    return None",
        ]
        self.lines.append("\n".join(framed_fn))
        self.framed[(schema.api_key or 0) << 16 | version] = framed_name
        return name

    # -- building records ---------------------------------------------------------------------

    def record_builder(self, schema: RecordSchema, version: int) -> str:
        """A function (kwargs dict) -> fields dict with defaults filled for omitted fields."""
        self._n += 1
        name = f"_build_{schema.name}_v{version}_{self._n}"
        items = []
        for f in schema.fields_in(version):
            default = f.default()
            if isinstance(default, list | dict):
                items.append(f"{f.name!r}: kw.pop({f.name!r}) if {f.name!r} in kw else {literal(default)}")
            else:
                items.append(f"{f.name!r}: kw.pop({f.name!r}, {literal(default)})")
        src = [f"def {name}(kw):", "    return {" + ", ".join(items) + "}"]
        self.lines.append("\n".join(src))
        return name

    def compile(self) -> dict[str, Any]:
        code = "\n\n".join(self.lines)
        exec(compile(code, "<migrator.kraft.record_codegen generated>", "exec"), self.ns)
        self.source = code
        return self.ns


def literal(value: Any) -> str:
    """Source text of a default value (ints, bools, floats, strings, None, [], zero UUID, dicts)."""
    if isinstance(value, uuid.UUID):
        if value.int != 0:
            raise ValueError(f"unexpected non-zero default uuid {value}")
        return "_ZERO"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[]"
    return repr(value)


def _differs(var: str, default: Any) -> str:
    """A condition true when a tagged field's value must be written (it is not its default)."""
    if default is None:
        return f"{var} is not None"
    if isinstance(default, list):
        return f"{var}"
    return f"{var} != {literal(default)}"


def _equals_default(var: str, default: Any) -> str:
    """A condition true when a tagged field holds its default (and is therefore not written)."""
    if default is None:
        return f"{var} is None"
    if isinstance(default, list):
        return f"not {var}"
    return f"{var} == {literal(default)}"
