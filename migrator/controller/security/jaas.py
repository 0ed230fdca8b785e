"""Kafka's JAAS configuration, read as Kafka reads it, for the controller listener's SASL mechanisms.

Two sources, as Kafka's JaasContext.loadServerContext looks for them: the property
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's JaasConfig grammar: ``module flag
name=value ... ;``), else a JAAS file (``java.security.auth.login.config``) with a section
``<listener>.KafkaServer`` or ``KafkaServer`` (``Name { module flag name=value ...; };``). The
tokenizer follows the java.io.StreamTokenizer set-up Kafka uses: ``'`` and ``"`` quote with Java
escapes, ``/`` starts a comment, ``//`` and ``/* */`` too.

Option values are passwords (``user_alice="alice-secret"``): ``LoginModule`` never shows them in its
repr, and no error message here quotes a value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from migrator.errors import BadInputError

__all__ = ["LoginModule", "parse_jaas_config", "parse_jaas_file", "server_login_modules"]

_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


@dataclass(frozen=True)
class LoginModule:
    """One login module entry; ``options`` hold secrets and stay out of repr."""

    module: str
    flag: str
    options: Mapping[str, str] = field(repr=False, default_factory=dict)


def _is_word(c: str, braces: bool) -> bool:
    o = ord(c)
    if c in ";='\"/" or (braces and c in "{}"):
        return False
    return 33 <= o <= 128 or 160 <= o


def _tokens(text: str, what: str, braces: bool) -> Iterator[tuple[str, str | None]]:
    """(ttype, sval): ttype "w" word, "q" quoted string, or the ordinary character itself."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # '//' and a lone '/' both comment out the rest of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in "'\"":
            out = []
            i += 1
            while i < n and text[i] != c and text[i] not in "\n\r":
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    i += 1
                    e = text[i]
                    if e in "01234567":
                        digits = e
                        while (
                            len(digits) < (3 if e <= "3" else 2) and i + 1 < n and text[i + 1] in "01234567"
                        ):
                            i += 1
                            digits += text[i]
                        out.append(chr(int(digits, 8)))
                    else:
                        out.append(_ESCAPES.get(e, e))
                else:
                    out.append(ch)
                i += 1
            i += 1  # the closing quote (an unterminated one ends at the line's end, as Java's does)
            yield "q", "".join(out)
        elif _is_word(c, braces):
            start = i
            while i < n and (_is_word(text[i], braces)):
                i += 1
            yield "w", text[start:i]
        else:
            i += 1
            yield c, None


def _entries(
    tokens: Iterator[tuple[str, str | None]], what: str, first: tuple[str, str | None]
) -> LoginModule:
    module = first[1]
    if first[0] not in ("w", "q") or module is None:
        raise BadInputError(f"{what}: login module class expected")
    ttype, flag = next(tokens, ("eof", None))
    if ttype == "eof":
        raise BadInputError(f"{what}: login module control flag not specified in JAAS config")
    if flag is None or flag.upper() not in _FLAGS:
        raise BadInputError(f"{what}: invalid login module control flag in JAAS config")
    options: dict[str, str] = {}
    while True:
        ttype, key = next(tokens, ("eof", None))
        if ttype in ("eof", ";"):
            break
        eq, _ = next(tokens, ("eof", None))
        vtype, value = next(tokens, ("eof", None)) if eq == "=" else ("eof", None)
        if vtype not in ("w", "q") or value is None:
            raise BadInputError(f"{what}: value not specified for key '{key}' in JAAS config")
        options[key or ""] = value
    if ttype != ";":
        raise BadInputError(f"{what}: JAAS config entry not terminated by semi-colon")
    return LoginModule(module, flag.upper(), options)


def parse_jaas_config(text: str, what: str = "sasl.jaas.config") -> list[LoginModule]:
    """A ``sasl.jaas.config`` value: one or more ``module flag options;`` entries."""
    tokens = _tokens(text, what, braces=False)
    out = []
    for first in tokens:
        out.append(_entries(tokens, what, first))
    if not out:
        raise BadInputError(f"{what}: login module not specified in JAAS config")
    return out


def parse_jaas_file(text: str, what: str = "JAAS file") -> dict[str, list[LoginModule]]:
    """A JAAS login configuration file: ``Name { entries };`` sections by name."""
    tokens = _tokens(text, what, braces=True)
    sections: dict[str, list[LoginModule]] = {}
    for ttype, name in tokens:
        if ttype != "w" or name is None:
            raise BadInputError(f"{what}: section name expected")
        if next(tokens, ("eof", None))[0] != "{":
            raise BadInputError(f"{what}: expected '{{' after {name}")
        entries = []
        while True:
            first = next(tokens, ("eof", None))
            if first[0] == "}":
                break
            if first[0] == "eof":
                raise BadInputError(f"{what}: section {name} not closed with '}}'")
            entries.append(_entries(tokens, f"{what}, section {name}", first))
        if next(tokens, ("eof", None))[0] != ";":
            raise BadInputError(f"{what}: section {name} not terminated by semi-colon")
        sections.setdefault(name, []).extend(entries)
    return sections


def server_login_modules(
    props: Mapping[str, str], listener: str, mechanism: str, jaas_file: str | Path | None = None
) -> list[LoginModule]:
    """The JAAS entries a listener's mechanism uses, found where Kafka's broker finds them."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if props.get(key):
        return parse_jaas_config(props[key], key)
    if jaas_file is not None:
        path = Path(jaas_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise BadInputError(f"JAAS file {path}: {e.strerror}") from None
        sections = parse_jaas_file(text, f"JAAS file {path}")
        for name in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
            if name in sections:
                return sections[name]
        raise BadInputError(f"JAAS file {path}: no section {listener.lower()}.KafkaServer or KafkaServer")
    raise BadInputError(
        f"listener {listener}: SASL mechanism {mechanism} needs {key} or a JAAS file with a KafkaServer section"
    )
