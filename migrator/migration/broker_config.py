"""Checks of the brokers' server.properties for migration mode (Kafka docs, "Enter migration mode").

Kafka 3.9 refuses to start a broker with a bad combination (KafkaConfig validation); this finds the
same mistakes before the rolling restart, and the one Kafka cannot see alone: a registered broker whose
configuration was never changed. Only non-secret keys are ever quoted in a message.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from migrator.migration.findings import CodeInfo, define, examples, finding
from migrator.results import Finding, Severity

MIGRATION_FLAG = "zookeeper.metadata.migration.enable"
IBP = "inter.broker.protocol.version"
DEFAULT_RESERVED_BROKER_MAX_ID = 1000
# Kafka's default listener.security.protocol.map: every security protocol maps to itself.
DEFAULT_PROTOCOL_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
LATEST_IV = 99  # "3.7" without -IVn means the release's latest IV

_G = "broker-config"


def _define(code: str, severity: Severity, meaning: str, why: str, hint: str) -> CodeInfo:
    return define(code, severity, meaning, why, hint, group=_G)


MIGRATION_DISABLED = _define(
    "BROKER_CONFIG_MIGRATION_DISABLED",
    Severity.BLOCKER,
    f"{MIGRATION_FLAG} is not true.",
    "The migration starts only after every broker re-registered with the KRaft controller in migration mode.",
    f"Set {MIGRATION_FLAG}=true and restart the broker (rolling restart).",
)
IBP_UNSET = _define(
    "BROKER_CONFIG_IBP_UNSET",
    Severity.WARNING,
    f"{IBP} is not set, so it follows the broker software's version.",
    "The controllers' metadata.version must equal the brokers' IBP and must not change during the migration; "
    "a software upgrade would silently change it.",
    f"Set {IBP} explicitly to the release the controllers are formatted for (e.g. 3.9).",
)
IBP_INVALID = _define(
    "BROKER_CONFIG_IBP_INVALID",
    Severity.BLOCKER,
    f"{IBP} is not a Kafka version (e.g. 3.7 or 3.7-IV2).",
    "Kafka refuses to start with it.",
    f"Set {IBP} to a release such as 3.9.",
)
IBP_TOO_OLD = _define(
    "BROKER_CONFIG_IBP_TOO_OLD",
    Severity.BLOCKER,
    f"{IBP} is below 3.4.",
    "KIP-866 needs IBP >= 3.4 (metadata.version 3.4-IV0); Kafka refuses migration mode below it.",
    f"Raise {IBP} to >= 3.4 (a rolling restart) before entering migration mode; Kafka >= 3.7 is recommended.",
)
IBP_MISMATCH = _define(
    "BROKER_CONFIG_IBP_MISMATCH",
    Severity.WARNING,
    f"Brokers set different {IBP} values.",
    "The controllers' metadata.version is one value and must equal every migrating broker's IBP.",
    f"Finish the IBP upgrade so every broker has the same {IBP}.",
)
NO_QUORUM = _define(
    "BROKER_CONFIG_NO_QUORUM",
    Severity.BLOCKER,
    "Neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set.",
    "A migrating broker registers with the KRaft quorum; Kafka refuses migration mode without its address.",
    "Set controller.quorum.bootstrap.servers (3.9) or controller.quorum.voters to the KRaft controllers.",
)
QUORUM_INVALID = _define(
    "BROKER_CONFIG_QUORUM_INVALID",
    Severity.BLOCKER,
    "controller.quorum.voters is not a list of id@host:port entries.",
    "Kafka refuses to start with it.",
    "Write controller.quorum.voters as 3000@ctrl0:9093,3001@ctrl1:9093,...",
)
QUORUM_MISMATCH = _define(
    "BROKER_CONFIG_QUORUM_MISMATCH",
    Severity.WARNING,
    "Brokers name different controller quorums.",
    "Every broker must register with the same KRaft quorum, or the migration waits for the ones that cannot.",
    "Use the same controller.quorum.voters / controller.quorum.bootstrap.servers on every broker.",
)
NODE_ID_COLLISION = _define(
    "BROKER_CONFIG_NODE_ID_COLLISION",
    Severity.BLOCKER,
    "A controller id in controller.quorum.voters equals a broker id.",
    "Brokers and KRaft controllers share one id space; a collision makes registration fail.",
    "Give the KRaft controllers node.ids no broker uses (e.g. 3000+).",
)
NO_CONTROLLER_LISTENER = _define(
    "BROKER_CONFIG_NO_CONTROLLER_LISTENER",
    Severity.BLOCKER,
    "controller.listener.names is not set.",
    "A migrating broker needs it to talk to the KRaft controllers; Kafka refuses migration mode without it.",
    "Set controller.listener.names to the controllers' listener name (e.g. CONTROLLER).",
)
CONTROLLER_LISTENER_UNMAPPED = _define(
    "BROKER_CONFIG_CONTROLLER_LISTENER_UNMAPPED",
    Severity.BLOCKER,
    "A name in controller.listener.names is missing from listener.security.protocol.map.",
    "Kafka cannot tell which security protocol to use towards the controllers and refuses to start.",
    "Add NAME:PROTOCOL (e.g. CONTROLLER:PLAINTEXT) to listener.security.protocol.map.",
)
BROKER_ID_MISSING = _define(
    "BROKER_CONFIG_BROKER_ID_MISSING",
    Severity.BLOCKER,
    "broker.id is not set (the broker relies on broker.id.generation.enable).",
    "Kafka 3.9 requires an explicit, non-negative broker.id in migration mode; generated ids cannot be used.",
    "Set broker.id to the id the broker registers today (see /brokers/ids or meta.properties).",
)
BROKER_ID_INVALID = _define(
    "BROKER_CONFIG_BROKER_ID_INVALID",
    Severity.BLOCKER,
    "broker.id is not an integer, is negative, or is above reserved.broker.max.id.",
    "Kafka refuses migration mode with it.",
    "Set broker.id to a non-negative integer not above reserved.broker.max.id (default 1000).",
)
DUPLICATE_BROKER_ID = _define(
    "BROKER_CONFIG_DUPLICATE_BROKER_ID",
    Severity.BLOCKER,
    "Two properties files set the same broker.id.",
    "Two brokers cannot register with one id; one of them would fail (or the directory is stale).",
    "Keep exactly one file per broker, each with its own broker.id.",
)
JBOD_NEEDS_37 = _define(
    "BROKER_CONFIG_JBOD_NEEDS_IBP_37",
    Severity.BLOCKER,
    "The broker has several log directories (JBOD) with IBP below 3.7-IV2.",
    "KRaft supports JBOD from metadata.version 3.7-IV2; Kafka refuses migration mode with JBOD below it.",
    f"Raise {IBP} to 3.7-IV2 or later, or use a single log directory.",
)
KRAFT_MODE_FILE = _define(
    "BROKER_CONFIG_KRAFT_MODE_FILE",
    Severity.WARNING,
    "A file has process.roles set: it configures a KRaft-mode node, not a ZooKeeper-mode broker.",
    "The check is for the brokers entering migration mode; KRaft-mode files are skipped.",
    "Keep only the ZooKeeper-mode brokers' server.properties in --broker-config.",
)
BROKER_NOT_COVERED = _define(
    "BROKER_CONFIG_MISSING",
    Severity.WARNING,
    "A broker registered in /brokers/ids has no properties file in --broker-config.",
    "Its configuration cannot be verified; a broker without the migration settings keeps the migration waiting.",
    "Add that broker's server.properties to the directory.",
)
NOT_REGISTERED = _define(
    "BROKER_CONFIG_NOT_REGISTERED",
    Severity.WARNING,
    "A properties file's broker.id has no registration in /brokers/ids.",
    "The broker is down or the file is stale; a broker that holds replicas but is down blocks the migration.",
    "Start the broker or remove the stale file.",
)


@dataclass(frozen=True)
class BrokerConfigFile:
    """One broker's properties as read by the CLI (which owns the Java-properties reader)."""

    path: str
    props: dict[str, str]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def parse_ibp(value: str) -> tuple[int, int, int, int] | None:
    """`3.7-IV2` → (3, 7, 0, 2); `3.7` → (3, 7, 0, latest); `0.10.2-IV0` → (0, 10, 2, 0)."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-IV(\d+))?", value.strip())
    if not m:
        return None
    major, minor = int(m.group(1)), int(m.group(2))
    patch = int(m.group(3)) if (m.group(3) and major == 0) else 0
    iv = int(m.group(4)) if m.group(4) is not None else LATEST_IV
    return (major, minor, patch, iv)


MIN_MIGRATION_IBP = (3, 4, 0, 0)
MIN_JBOD_IBP = (3, 7, 0, 2)


def _protocol_map(value: str | None) -> dict[str, str] | None:
    if value is None or not value.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out = {}
    for item in value.split(","):
        name, sep, proto = item.strip().partition(":")
        if not sep or not name.strip():
            return None
        out[name.strip().upper()] = proto.strip().upper()
    return out


def _voters(value: str) -> list[int] | None:
    ids = []
    for item in value.split(","):
        m = re.fullmatch(r"\s*(\d+)@(\[[^\]]+\]|[^:\s]+):(\d+)\s*", item)
        if not m:
            return None
        ids.append(int(m.group(1)))
    return ids


def check_broker_configs(
    files: Iterable[BrokerConfigFile], registered: Iterable[int] | None = None
) -> list[Finding]:
    """All per-file and cross-file checks; `registered` (ids in /brokers/ids) enables the coverage check."""
    out: list[Finding] = []
    by_id: dict[int, list[str]] = defaultdict(list)
    ibps: dict[str, list[str]] = defaultdict(list)
    quorums: dict[str, list[str]] = defaultdict(list)
    voter_ids: dict[int, str] = {}
    for f in files:
        p = f.props
        roles = p.get("process.roles", "").strip()
        if roles:
            out.append(
                finding(
                    KRAFT_MODE_FILE,
                    f"{f.name}: process.roles={roles}; not a ZooKeeper-mode broker, skipped",
                    paths=[f.path],
                )
            )
            continue
        bid = _check_broker_id(f, out)
        label = f"{f.name} (broker {bid})" if bid is not None else f.name
        ids = [bid] if bid is not None else []
        if bid is not None:
            by_id[bid].append(f.name)
        flag = p.get(MIGRATION_FLAG)
        if flag is None or flag.strip().lower() != "true":
            shown = "not set" if flag is None else f"={flag.strip()}"
            out.append(
                finding(MIGRATION_DISABLED, f"{label}: {MIGRATION_FLAG} {shown}", paths=[f.path], ids=ids)
            )
        ibp_raw = p.get(IBP)
        ibp = None
        if ibp_raw is None or not ibp_raw.strip():
            out.append(finding(IBP_UNSET, f"{label}: {IBP} is not set", paths=[f.path], ids=ids))
        else:
            ibp = parse_ibp(ibp_raw)
            if ibp is None:
                out.append(
                    finding(
                        IBP_INVALID,
                        f"{label}: {IBP}={ibp_raw.strip()!r} is not a Kafka version",
                        paths=[f.path],
                        ids=ids,
                    )
                )
            else:
                ibps[_ibp_key(ibp)].append(label)
                if ibp < MIN_MIGRATION_IBP:
                    out.append(
                        finding(
                            IBP_TOO_OLD,
                            f"{label}: {IBP}={ibp_raw.strip()} is below 3.4",
                            paths=[f.path],
                            ids=ids,
                        )
                    )
        voters = p.get("controller.quorum.voters", "").strip()
        bootstrap = p.get("controller.quorum.bootstrap.servers", "").strip()
        if not voters and not bootstrap:
            out.append(
                finding(
                    NO_QUORUM,
                    f"{label}: neither controller.quorum.voters nor controller.quorum.bootstrap.servers is set",
                    paths=[f.path],
                    ids=ids,
                )
            )
        else:
            quorums[_quorum_key(voters, bootstrap)].append(label)
        if voters:
            parsed = _voters(voters)
            if parsed is None:
                out.append(
                    finding(
                        QUORUM_INVALID,
                        f"{label}: controller.quorum.voters={voters!r} is not id@host:port,...",
                        paths=[f.path],
                        ids=ids,
                    )
                )
            else:
                for v in parsed:
                    voter_ids.setdefault(v, f.name)
        _check_listeners(f, label, ids, out)
        dirs = [d for d in p.get("log.dirs", p.get("log.dir", "")).split(",") if d.strip()]
        if len(dirs) > 1 and ibp is not None and ibp < MIN_JBOD_IBP:
            out.append(
                finding(
                    JBOD_NEEDS_37,
                    f"{label}: {len(dirs)} log directories with {IBP}={ibp_raw.strip() if ibp_raw else ''} (< 3.7-IV2)",
                    paths=[f.path],
                    ids=ids,
                )
            )
    for bid, names in sorted(by_id.items()):
        if len(names) > 1:
            out.append(
                finding(
                    DUPLICATE_BROKER_ID,
                    f"broker.id={bid} is set in {', '.join(names)}",
                    ids=[bid],
                    count=len(names),
                )
            )
    if len(ibps) > 1:
        parts = [f"{v} in {examples(labels, limit=3)}" for v, labels in sorted(ibps.items())]
        out.append(
            finding(IBP_MISMATCH, f"{IBP} differs: {'; '.join(parts)}", count=sum(map(len, ibps.values())))
        )
    if len(quorums) > 1:
        parts = [f"{q!r} in {examples(labels, limit=3)}" for q, labels in sorted(quorums.items())]
        out.append(
            finding(QUORUM_MISMATCH, f"controller quorum differs: {'; '.join(parts)}", count=len(quorums))
        )
    known = set(by_id) | set(registered or ())
    for v, name in sorted(voter_ids.items()):
        if v in known:
            out.append(
                finding(
                    NODE_ID_COLLISION,
                    f"controller id {v} in controller.quorum.voters ({name}) is also a broker id",
                    ids=[v],
                )
            )
    if registered is not None:
        reg = set(registered)
        missing = sorted(reg - set(by_id))
        if missing:
            out.append(
                finding(
                    BROKER_NOT_COVERED,
                    f"no properties file for registered broker{'s' if len(missing) > 1 else ''} "
                    f"{examples([str(i) for i in missing], limit=20)}",
                    ids=missing,
                    paths=[f"/brokers/ids/{i}" for i in missing],
                )
            )
        extra = sorted(set(by_id) - reg)
        if extra:
            out.append(
                finding(
                    NOT_REGISTERED,
                    f"broker.id {examples([str(i) for i in extra], limit=20)} in --broker-config "
                    f"{'is' if len(extra) == 1 else 'are'} not registered in /brokers/ids",
                    ids=extra,
                )
            )
    return out


def _check_broker_id(f: BrokerConfigFile, out: list[Finding]) -> int | None:
    raw = f.props.get("broker.id")
    if raw is None or not raw.strip():
        gen = f.props.get("broker.id.generation.enable", "true").strip().lower()
        note = " and broker.id.generation.enable is on" if gen != "false" else ""
        out.append(finding(BROKER_ID_MISSING, f"{f.name}: broker.id is not set{note}", paths=[f.path]))
        return None
    try:
        bid = int(raw.strip())
    except ValueError:
        out.append(
            finding(
                BROKER_ID_INVALID, f"{f.name}: broker.id={raw.strip()!r} is not an integer", paths=[f.path]
            )
        )
        return None
    try:
        reserved = int(f.props.get("reserved.broker.max.id", str(DEFAULT_RESERVED_BROKER_MAX_ID)).strip())
    except ValueError:
        reserved = DEFAULT_RESERVED_BROKER_MAX_ID
    if bid < 0:
        out.append(
            finding(BROKER_ID_INVALID, f"{f.name}: broker.id={bid} is negative", paths=[f.path], ids=[])
        )
        return None
    if bid > reserved:
        out.append(
            finding(
                BROKER_ID_INVALID,
                f"{f.name}: broker.id={bid} is above reserved.broker.max.id={reserved}",
                paths=[f.path],
                ids=[bid],
            )
        )
    return bid


def _check_listeners(f: BrokerConfigFile, label: str, ids: list[int], out: list[Finding]) -> None:
    names = [n.strip() for n in f.props.get("controller.listener.names", "").split(",") if n.strip()]
    if not names:
        out.append(
            finding(
                NO_CONTROLLER_LISTENER,
                f"{label}: controller.listener.names is not set",
                paths=[f.path],
                ids=ids,
            )
        )
        return
    pmap = _protocol_map(f.props.get("listener.security.protocol.map"))
    if pmap is None:
        out.append(
            finding(
                CONTROLLER_LISTENER_UNMAPPED,
                f"{label}: listener.security.protocol.map is not a list of NAME:PROTOCOL",
                paths=[f.path],
                ids=ids,
            )
        )
        return
    unmapped = [n for n in names if n.upper() not in pmap]
    if unmapped:
        out.append(
            finding(
                CONTROLLER_LISTENER_UNMAPPED,
                f"{label}: controller listener {', '.join(unmapped)} is not in listener.security.protocol.map "
                f"({', '.join(sorted(pmap))})",
                paths=[f.path],
                ids=ids,
            )
        )


def _ibp_key(ibp: tuple[int, int, int, int]) -> str:
    major, minor, patch, iv = ibp
    base = f"{major}.{minor}" + (f".{patch}" if major == 0 else "")
    return base if iv == LATEST_IV else f"{base}-IV{iv}"


def _quorum_key(voters: str, bootstrap: str) -> str:
    def norm(s: str) -> str:
        return ",".join(sorted(x.strip() for x in s.split(",") if x.strip()))

    return norm(voters) if voters else norm(bootstrap)
