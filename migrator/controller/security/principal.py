"""Who a TLS client is, as Kafka names it: the subject DN rendered the way Java renders it, mapped by
``ssl.principal.mapping.rules``; and the client's address as Java prints it, which ACL hosts compare to.

Kafka's DefaultKafkaPrincipalBuilder takes ``X500Principal.getName()`` (RFC 2253, Java's flavour:
keywords CN C L ST O OU STREET DC UID, other attributes as ``OID=#hex``, ``,=+<>#;"\\`` escaped) of the
peer certificate and applies SslPrincipalMapper; without a client certificate the principal is
``User:ANONYMOUS``. An ACL or ``super.users`` entry written for a Kafka cluster must name the same
principal here, so every step follows Kafka's exactly (rule grammar, back-reference quirks, ``/L`` and
``/U``). Rule patterns are Python regular expressions, which agree with Java's for what rules use
(classes, groups, anchors, greedy and lazy quantifiers).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from migrator.errors import BadInputError

__all__ = [
    "ANONYMOUS",
    "SslPrincipalMapper",
    "java_host_address",
    "rfc2253_subject",
    "ssl_principal",
]

ANONYMOUS = "User:ANONYMOUS"
DEFAULT_RULES = "DEFAULT"

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(BadInputError):
    """No rule maps the DN (Kafka's SslPrincipalMapper.NoMatchingRule): the connection is refused."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return (
            "RULE:"
            + self.pattern.pattern
            + "/"
            + self.replacement
            + ("/L" if self.lower else "/U" if self.upper else "")
        )

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda m: _java_replacement(replacement, m), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _escape_literal_back_references(text: str, groups: int) -> str:
    """Kafka's escapeLiteralBackReferences: ``$n`` beyond the group count becomes a literal ``$n``."""
    if groups == 0:
        return text
    value = text
    for m in _BACK_REFERENCE.finditer(text):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        n = int(digits)
        while n > groups and n >= 10:
            n //= 10
        if n > groups:
            # Kafka's matcher scans the original text but inserts into the growing copy at the
            # original position, unshifted; kept so that names come out as Kafka's do.
            start = m.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
    return value


def _java_replacement(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: ``\\x`` is x, ``$n`` the longest group number that exists."""
    out = []
    i = 0
    groups = m.re.groups
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == len(replacement):
                raise BadInputError("ssl.principal.mapping.rules: character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i == len(replacement) or not replacement[i].isdigit():
                raise BadInputError("ssl.principal.mapping.rules: illegal group reference in replacement")
            ref = int(replacement[i])
            if ref > groups:
                raise BadInputError(f"ssl.principal.mapping.rules: no group {ref}")
            i += 1
            while (
                i < len(replacement) and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups
            ):
                ref = ref * 10 + int(replacement[i])
                i += 1
            out.append(m.group(ref) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule that matches names the principal."""

    def __init__(self, rules: str | None = None) -> None:
        self.rules = [r for r in (self._parse(text) for text in self._split(rules)) if r is not None]

    @staticmethod
    def _split(rules: str | None) -> list[str]:
        text = (DEFAULT_RULES if rules is None else rules).strip()
        return [m.group(1) for m in _RULE_SPLITTER.finditer(text)]

    @staticmethod
    def _parse(text: str) -> _Rule | None:
        m = _RULE_PARSER.match(text)
        if m is None:
            raise BadInputError(f"ssl.principal.mapping.rules: invalid rule: {text}")
        if m.end() != len(text):
            raise BadInputError(
                f"ssl.principal.mapping.rules: invalid rule: `{text}`, unmatched substring: `{text[m.end() :]}`"
            )
        if m.group(1) is not None:
            return _Rule()
        if m.group(2) is not None:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise BadInputError(f"ssl.principal.mapping.rules: bad pattern in {text}: {e}") from None
            return _Rule(pattern, m.group(4), m.group(6) == "L", m.group(6) == "U")
        return None  # empty rules are ignored

    def __str__(self) -> str:
        return "SslPrincipalMapper(rules = [" + ", ".join(str(r) for r in self.rules) + "])"

    def name(self, dn: str) -> str:
        for rule in self.rules:
            found = rule.apply(dn)
            if found is not None:
                return found
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(str(r) for r in self.rules)}]")


# -- the subject DN of a DER certificate, as X500Principal.getName() renders it ----------------

_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# Java's AVA.isDerString (non-canonical): UTF8, Printable, T61, IA5, General, BMP strings.
_STRING_CHARSETS = {
    0x0C: "utf-8",
    0x13: "utf-8",
    0x14: "latin-1",
    0x16: "utf-8",
    0x1B: "utf-8",
    0x1E: "utf-16-be",
}
_ESCAPED = ',=+<>#;"\\'


def _der(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """(tag, start of contents, end of contents, start of the element) of the element at pos."""
    if pos + 2 > len(data):
        raise BadInputError("certificate: truncated DER")
    tag = data[pos]
    length = data[pos + 1]
    start = pos + 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4 or start + n > len(data):
            raise BadInputError("certificate: bad DER length")
        length = int.from_bytes(data[start : start + n], "big")
        start += n
    if start + length > len(data):
        raise BadInputError("certificate: truncated DER")
    return tag, start, start + length, pos


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    out = []
    pos = start
    while pos < end:
        el = _der(data, pos)
        out.append(el)
        pos = el[2]
    return out


def _oid(body: bytes) -> str:
    arcs = []
    n = 0
    for b in body:
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            arcs.append(n)
            n = 0
    if not arcs:
        raise BadInputError("certificate: empty attribute type")
    first = min(arcs[0] // 40, 2)  # X.690: the first subidentifier packs the first two arcs
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def _ava(data: bytes, el: tuple[int, int, int, int]) -> str:
    oid_el, value_el = _children(data, el[1], el[2])[:2]
    oid = _oid(data[oid_el[1] : oid_el[2]])
    keyword = _KEYWORDS.get(oid, oid)
    tag = value_el[0]
    if keyword[0].isdigit() or tag not in _STRING_CHARSETS:
        return keyword + "=#" + data[value_el[3] : value_el[2]].hex()
    text = data[value_el[1] : value_el[2]].decode(_STRING_CHARSETS[tag], errors="replace")
    chars = []
    for c in text:
        if c in _ESCAPED:
            chars.append("\\" + c)
        elif c == "\0":
            chars.append("\\00")
        else:
            chars.append(c)
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        chars[lead] = "\\" + chars[lead]
        lead += 1
    trail = len(chars) - 1
    while trail >= lead and chars[trail] in (" ", "\r"):
        chars[trail] = "\\" + chars[trail]
        trail -= 1
    return keyword + "=" + "".join(chars)


def rfc2253_subject(cert_der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` (RFC 2253) renders it."""
    try:
        return _subject(cert_der)
    except (IndexError, ValueError) as e:
        raise BadInputError(f"certificate: not a DER X.509 certificate ({e})") from None


def _subject(cert_der: bytes) -> str:
    _, cert_start, cert_end, _ = _der(cert_der, 0)
    tbs = _children(cert_der, cert_start, cert_end)[0]
    fields = _children(cert_der, tbs[1], tbs[2])
    if fields and fields[0][0] == 0xA0:  # explicit version
        fields = fields[1:]
    subject = fields[4]  # serial, signature, issuer, validity, subject
    rdns = []
    for rdn in _children(cert_der, subject[1], subject[2]):
        rdns.append("+".join(_ava(cert_der, ava) for ava in _children(cert_der, rdn[1], rdn[2])))
    return ",".join(reversed(rdns))


def ssl_principal(cert_der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS client: ``User:`` + the mapped DN, or ANONYMOUS without a certificate."""
    if cert_der is None:
        return ANONYMOUS
    return "User:" + mapper.name(rfc2253_subject(cert_der))


def java_host_address(address: str) -> str:
    """A client address as Java's ``InetAddress.getHostAddress()`` prints it (ACL hosts are compared to
    this): IPv4 dotted, IPv4-mapped IPv6 as IPv4, other IPv6 as eight uncompressed hex groups."""
    scope = ""
    if "%" in address:
        address, scope = address.split("%", 1)
        scope = "%" + scope
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        groups = ip.packed
        return ":".join(f"{int.from_bytes(groups[i : i + 2], 'big'):x}" for i in range(0, 16, 2)) + scope
    return str(ip)
