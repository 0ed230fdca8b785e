"""Findings: the codes registry every check module defines into, and the finding a check reports.

A code is declared once (`define`: severity, meaning, why, fix hint); docs/checks.md is generated
from the registry. A finding's message goes through `migrator.secrets.redact_text`, so no check can
show a secret (invariant 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from migrator.results import Finding, Severity
from migrator.secrets import redact_text

__all__ = [
    "EXAMPLES",
    "MAX_LISTED",
    "SEVERITY_ORDER",
    "CodeInfo",
    "define",
    "examples",
    "finding",
    "plural",
    "redact",
    "registry",
    "sort_findings",
]

EXAMPLES = 5  # examples named in a message
MAX_LISTED = 50  # paths / ids carried in a finding (the count carries the total)


SEVERITY_ORDER = {Severity.BLOCKER: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class CodeInfo:
    """One finding code, as docs/checks.md documents it."""

    code: str
    severity: Severity
    meaning: str
    why: str
    hint: str
    group: str = "zookeeper"


_REGISTRY: dict[str, CodeInfo] = {}


def define(
    code: str, severity: Severity, meaning: str, why: str, hint: str, group: str = "zookeeper"
) -> CodeInfo:
    if code in _REGISTRY:
        raise ValueError(f"finding code {code} defined twice")
    info = CodeInfo(code, severity, meaning, why, hint, group)
    _REGISTRY[code] = info
    return info


def registry() -> dict[str, CodeInfo]:
    """Every code of every check module, in definition order."""
    from migrator.migration import broker_config, check_codes  # noqa: F401 - they register their codes

    return dict(_REGISTRY)


def finding(
    info: CodeInfo,
    message: str,
    *,
    paths: Iterable[str] = (),
    ids: Iterable[int] = (),
    count: int | None = None,
    hint: str | None = None,
) -> Finding:
    path_list = list(paths)
    id_list = sorted(set(ids))
    return Finding(
        code=info.code,
        severity=info.severity,
        message=redact(message),
        hint=hint or info.hint,
        paths=path_list[:MAX_LISTED],
        ids=id_list[:MAX_LISTED],
        count=count if count is not None else max(1, len(path_list), len(id_list)),
    )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.code))


# invariant 6: a message never shows a secret (the one rule: migrator.secrets)
redact = redact_text


def examples(items: Sequence[str], total: int | None = None, limit: int = EXAMPLES) -> str:
    """`a, b, c and 12 more` for messages that name a few of many."""
    total = len(items) if total is None else total
    shown = ", ".join(items[:limit])
    return shown if total <= limit else f"{shown} and {total - limit} more"


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"
