"""The audit's HTML report: one self-contained file (inline CSS and SVG, no scripts, no external assets).

It shows the verdict, the identities of both inputs (ZooKeeper zxid and snapshot or connect string;
the log's offsets, the cut, snapshot and segments), counts per kind, a bar chart of differences per
kind, and the first differences of each kind with both sides' fields. Every text is HTML-escaped;
secrets never reach it because they never reach a row (see `rows`).
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from migrator.errors import UnreachableError
from spark_audit.rows import KIND_TITLES

__all__ = ["render_report", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d2330;max-width:80rem}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d8dce4}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
.verdict{padding:.7rem 1rem;border-radius:6px;font-weight:600;margin:1rem 0}
.ok{background:#e6f4ea;color:#1e6b34}.bad{background:#fde8e8;color:#9b1c1c}.fin{background:#e8effd;color:#1c3d9b}
table{border-collapse:collapse;margin:.4rem 0;font-size:.9rem}
th,td{border:1px solid #d8dce4;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f3f5f9} td.n{text-align:right;font-variant-numeric:tabular-nums}
td.m{color:#9b1c1c;font-weight:600} td.i{color:#6b5a1e} code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem}
.dl td:first-child{font-weight:600;white-space:nowrap}
.diff td{max-width:30rem;word-break:break-all} .tag{font-size:.75rem;padding:0 .35rem;border-radius:3px;background:#eef}
.warn{background:#fff6db;padding:.5rem 1rem;border-radius:6px}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _fmt(value: Any) -> str:
    """A value as an operator reads it: yes/no, lists and mappings spelled out (no Python or JSON reprs)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in sorted(value.items()))
    return str(value)


def _identity_table(identity: dict[str, Any], keys: list[tuple[str, str]]) -> str:
    rows = []
    for key, label in keys:
        if key not in identity or identity[key] in (None, [], {}):
            continue
        value = identity[key]
        if key in ("zxid", "snapshot_zxid", "digest_zxid", "last_processed_zxid") and isinstance(value, int):
            text = f"{value:#x} ({value})"
        else:
            text = _fmt(value)
        rows.append(f"<tr><td>{_e(label)}</td><td class=mono>{_e(text)}</td></tr>")
    return "<table class=dl>" + "".join(rows) + "</table>"


_ZK_KEYS = [
    ("source", "source"),
    ("zookeeper", "connect string"),
    ("path", "data directory"),
    ("snapshot", "snapshot file"),
    ("snapshot_zxid", "snapshot zxid"),
    ("zxid", "state at zxid"),
    ("consistent", "one consistent view"),
    ("replayed_txns", "transactions replayed"),
    ("txn_logs", "transaction logs"),
    ("compression", "compression"),
    ("chroot", "chroot"),
    ("migration_offset", "/migration offset (log image ZooKeeper covers)"),
    ("kraft_controller", "/controller (KRaft controller, epoch)"),
    ("export", "export file"),
    ("read_at", "read at"),
    ("znodes", "znodes"),
    ("cluster_id", "cluster id"),
    ("topics", "topics"),
    ("partitions", "partitions"),
    ("pending_deletions", "pending deletions"),
]
_KRAFT_KEYS = [
    ("source", "source"),
    ("log_dir", "log directory"),
    ("path", "path"),
    ("snapshot", "snapshot"),
    ("snapshot_end_offset", "snapshot end offset"),
    ("log_start_offset", "log start offset"),
    ("end_offset", "log end offset"),
    ("cut_offset", "image at offset"),
    ("last_applied_offset", "last applied offset"),
    ("segments", "segments"),
    ("migration_state", "migration state"),
    ("migration_state_offset", "migration state offset"),
    ("open_transaction", "open transaction (not applied)"),
    ("committed_transactions", "committed transactions"),
    ("cluster_id", "cluster id"),
    ("topics", "topics"),
    ("partitions", "partitions"),
]


def _with_control(identity: dict[str, Any]) -> dict[str, Any]:
    """The control znodes an operator looks for, pulled out of the identity's `control`."""
    out = dict(identity)
    control = identity.get("control") or {}
    migration = control.get("migration") or {}
    if migration.get("kraft_metadata_offset", -1) >= 0:
        out["migration_offset"] = migration["kraft_metadata_offset"]
    controller = control.get("controller") or {}
    if controller.get("kraft_controller_epoch", -1) >= 0:
        out["kraft_controller"] = (
            f"{controller.get('broker_id')} (epoch {controller['kraft_controller_epoch']})"
        )
    return out


def _chart(counts: list[Any]) -> str:
    """Bars of differences per kind, each scaled to that kind's entities (one mismatch among 10,000
    topics is a sliver, not a full bar); kinds without differences are left out."""
    data = [
        (c["kind"], c["mismatch"] + c["expected"], c["info"], max(c["zookeeper"], c["kraft"], 1))
        for c in counts
        if c["mismatch"] + c["expected"] + c["info"]
    ]
    if not data:
        return "<p>No differences in any kind.</p>"
    bar_w, label_w, row_h = 420, 150, 22
    height = row_h * len(data) + 30
    parts = [
        "<p>Each bar is one kind's entities; red: ZooKeeper and the log differ, amber: informational only.</p>",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 260}" height="{height}" '
        f'role="img" aria-label="differences per kind" font-family="system-ui,sans-serif" font-size="12">',
    ]
    for i, (kind, diffs, info, entities) in enumerate(data):
        y = 10 + i * row_h
        total = max(entities, diffs + info)
        w1 = max(1, round(bar_w * diffs / total)) if diffs else 0
        w2 = max(1, round(bar_w * info / total)) if info else 0
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_e(KIND_TITLES.get(kind, kind))}</text>'
        )
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="14" fill="#f3f5f9"/>')
        if w1:
            parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w1}" height="14" fill="#c0392b"/>')
        if w2:
            parts.append(f'<rect x="{label_w + w1}" y="{y + 3}" width="{w2}" height="14" fill="#e0b341"/>')
        parts.append(
            f'<text x="{label_w + bar_w + 8}" y="{y + 14}">{diffs:,} differing, {info:,} informational '
            f"of {entities:,}</text>"
        )
    y = 10 + len(data) * row_h + 8
    parts.append(f'<rect x="{label_w}" y="{y}" width="12" height="10" fill="#c0392b"/>')
    parts.append(f'<text x="{label_w + 16}" y="{y + 9}">differences</text>')
    parts.append(f'<rect x="{label_w + 110}" y="{y}" width="12" height="10" fill="#e0b341"/>')
    parts.append(f'<text x="{label_w + 126}" y="{y + 9}">informational</text>')
    parts.append("</svg>")
    return "".join(parts)


def _side(fields: dict[str, Any] | None) -> str:
    if fields is None:
        return "<em>absent</em>"
    return "<br>".join(
        f"<span class=mono>{_e(k)} = {_e(json.dumps(v, ensure_ascii=False))}</span>"
        for k, v in sorted(fields.items())
    )


def _differences(result: dict[str, Any], limit: int) -> str:
    diffs = result["differences"]
    if not diffs:
        return "<p>No differences.</p>"
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for d in diffs:
        by_kind.setdefault(d["kind"], []).append(d)
    totals = {c["kind"]: c for c in result["counts"]}
    out = []
    for kind, items in by_kind.items():
        c = totals.get(kind, {})
        total = c.get("mismatch", 0) + c.get("expected", 0) + c.get("info", 0)
        out.append(
            f"<h3>{_e(KIND_TITLES.get(kind, kind))} — showing {len(items)} of {total:,} "
            f"(first {limit} per kind and verdict, by key)</h3>"
        )
        out.append(
            "<table class=diff><tr><th>key</th><th>verdict</th><th>what differs (ZooKeeper → log)</th>"
            "<th>ZooKeeper</th><th>KRaft</th></tr>"
        )
        for d in items:
            what = [_e(d["status"].replace("_", " "))]
            for f in d["fields"]:
                tag = " <span class=tag>tolerated</span>" if f["tolerated"] else ""
                what.append(
                    f"<span class=mono>{_e(f['name'])}: {_e(f['zookeeper'])} → {_e(f['kraft'])}</span>{tag}"
                )
            if d.get("reason"):
                what.append(f"<em>{_e(d['reason'])}</em>")
            cls = "m" if d["verdict"] == "mismatch" else "i"
            out.append(
                f"<tr><td class=mono>{_e(d['key'])}</td><td class={cls}>{_e(d['verdict'])}</td>"
                f"<td>{'<br>'.join(what)}</td><td>{_side(d['zookeeper'])}</td><td>{_side(d['kraft'])}</td></tr>"
            )
        out.append("</table>")
    return "".join(out)


def render_report(result: Any, limit: int = 20) -> str:
    """The report of an AuditResult (or its JSON dict) as one HTML document."""
    r = result.model_dump(mode="json") if hasattr(result, "model_dump") else result
    cls = "fin" if r["phase"] == "finalized" else ("ok" if r["exit_code"] == 0 else "bad")
    counts = r["counts"]
    rows = []
    for c in counts:
        m = c["mismatch"] + c["expected"]
        rows.append(
            f"<tr><td>{_e(KIND_TITLES.get(c['kind'], c['kind']))}</td><td class=n>{c['zookeeper']:,}</td>"
            f"<td class=n>{c['kraft']:,}</td><td class=n>{c['equal']:,}</td>"
            f"<td class=n>{c['missing_in_kraft']:,}</td><td class=n>{c['missing_in_zookeeper']:,}</td>"
            f"<td class=n>{c['mismatched']:,}</td><td class=n>{c['tolerated']:,}</td>"
            f"<td class='n{' m' if m else ''}'>{m:,}</td><td class=n>{c['info']:,}</td></tr>"
        )
    warnings = "".join(f"<p class=warn>{_e(w)}</p>" for w in r.get("warnings") or [])
    diff_label = "expected differences" if r["phase"] == "finalized" else "differences (all)"
    scan = r.get("log_scan") or {}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>zk2kraft audit — {_e(r["phase"])}</title>
<style>{_CSS}</style></head><body>
<h1>zk2kraft audit: ZooKeeper vs the KRaft metadata log</h1>
<div>phase <b>{_e(r["phase"])}</b> ({_e(r["phase_source"])}) · migration state <b>{_e(r["state"])}</b>
 · Spark {_e(r.get("master"))} · {r.get("seconds", 0):.1f}s</div>
<div class="verdict {cls}">{_e(r["verdict"])}</div>
{warnings}
<h2>Inputs</h2>
<h3>ZooKeeper</h3>{_identity_table(_with_control(r.get("zookeeper") or {}), _ZK_KEYS)}
<h3>KRaft log</h3>{_identity_table(r.get("kraft") or {}, _KRAFT_KEYS)}
<p class=mono>log scan: {scan.get("batches", 0):,} batches, {scan.get("records", 0):,} records checked (CRC);
copy committed at offset {_e(scan.get("copy_end_offset"))}</p>
<h2>Counts per kind</h2>
<table><tr><th>kind</th><th>ZooKeeper</th><th>KRaft</th><th>equal</th><th>missing in KRaft</th>
<th>missing in ZooKeeper</th><th>fields differ</th><th>only tolerated fields differ</th><th>{diff_label}</th>
<th>informational</th></tr>
{"".join(rows)}</table>
<h2>Differences per kind</h2>
{_chart(counts)}
<h2>Differences</h2>
{_differences(r, limit)}
</body></html>
"""


def write_report(result: Any, path: str | os.PathLike[str], limit: int = 20) -> None:
    out = Path(path)
    try:
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(render_report(result, limit), encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        raise UnreachableError(f"cannot write the report {out}: {e.strerror}") from None
