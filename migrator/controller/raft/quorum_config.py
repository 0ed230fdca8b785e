"""The quorum's settings as Kafka 3.9's QuorumConfig reads them from the controller's properties.

A zk2kraft controller joins a quorum of static voters (kraft.version 0) named by
`controller.quorum.voters`, with Kafka's timeouts under Kafka's property names and defaults, so one
controller.properties serves a zk2kraft voter and the Kafka 3.9 controller that later takes its place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from migrator.errors import BadInputError

__all__ = ["QuorumConfig", "VoterEndpoint", "parse_voters"]

VOTERS = "controller.quorum.voters"
ELECTION_TIMEOUT = "controller.quorum.election.timeout.ms"
FETCH_TIMEOUT = "controller.quorum.fetch.timeout.ms"
ELECTION_BACKOFF_MAX = "controller.quorum.election.backoff.max.ms"
REQUEST_TIMEOUT = "controller.quorum.request.timeout.ms"
RETRY_BACKOFF = "controller.quorum.retry.backoff.ms"
APPEND_LINGER = "controller.quorum.append.linger.ms"
LISTENER_NAMES = "controller.listener.names"

#: QuorumConfig.DEFAULT_*: property -> default (ms)
DEFAULTS: dict[str, int] = {
    ELECTION_TIMEOUT: 1_000,
    FETCH_TIMEOUT: 2_000,
    ELECTION_BACKOFF_MAX: 1_000,
    REQUEST_TIMEOUT: 2_000,
    RETRY_BACKOFF: 20,
    APPEND_LINGER: 25,
}

#: QuorumConfig.NON_ROUTABLE_HOST: refused for a voter the raft client must connect to.
NON_ROUTABLE_HOST = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    """One `id@host:port` entry of `controller.quorum.voters`."""

    node_id: int
    host: str
    port: int


def parse_voters(text: str) -> dict[int, VoterEndpoint]:
    """`controller.quorum.voters` as QuorumConfig.parseVoterConnections reads it (routable hosts only).

    One difference, on purpose: an id listed twice is refused (Kafka keeps the last silently), since two
    addresses for one voter in a migration's quorum is a typo that would split it."""
    voters: dict[int, VoterEndpoint] = {}
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        parts = entry.split("@")
        if len(parts) != 2:
            raise BadInputError(
                f"{VOTERS}: {entry!r}: each entry should be in the form {{id}}@{{host}}:{{port}}"
            )
        try:
            node_id = int(parts[0])
        except ValueError:
            raise BadInputError(
                f"{VOTERS}: failed to parse voter ID as an integer from {parts[0]!r}"
            ) from None
        host, sep, port = parts[1].rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or any(c.isspace() for c in host):
            raise BadInputError(f"{VOTERS}: failed to parse host name from entry {entry!r}")
        if not port.isdigit() or not 0 <= int(port) <= 65535:
            raise BadInputError(f"{VOTERS}: failed to parse host port from entry {entry!r}")
        if host == NON_ROUTABLE_HOST:
            raise BadInputError(f"{VOTERS}: host string ({host}) is not routeable")
        if node_id in voters:
            raise BadInputError(f"{VOTERS}: voter {node_id} is listed twice")
        voters[node_id] = VoterEndpoint(node_id, host, int(port))
    return voters


def _int(props: Mapping[str, str], key: str) -> int:
    raw = props.get(key)
    if raw is None or not raw.strip():
        return DEFAULTS[key]
    try:
        return int(raw.strip())
    except ValueError:
        raise BadInputError(f"{key}={raw!r} is not an integer") from None


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Kafka's QuorumConfig for static voters: the voter set and the raft client's timeouts (ms)."""

    voters: dict[int, VoterEndpoint]
    election_timeout_ms: int = DEFAULTS[ELECTION_TIMEOUT]
    fetch_timeout_ms: int = DEFAULTS[FETCH_TIMEOUT]
    election_backoff_max_ms: int = DEFAULTS[ELECTION_BACKOFF_MAX]
    request_timeout_ms: int = DEFAULTS[REQUEST_TIMEOUT]
    retry_backoff_ms: int = DEFAULTS[RETRY_BACKOFF]
    append_linger_ms: int = DEFAULTS[APPEND_LINGER]
    #: the first of `controller.listener.names`: the listener the voters reach each other on
    listener_name: str = "CONTROLLER"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> QuorumConfig:
        """From a parsed controller.properties (`migrator.properties.parse_properties`)."""
        voters = parse_voters(props.get(VOTERS, ""))
        if not voters:
            raise BadInputError(f"{VOTERS} is not set: a quorum needs its static voters (id@host:port,...)")
        return cls(
            voters=voters,
            election_timeout_ms=_int(props, ELECTION_TIMEOUT),
            fetch_timeout_ms=_int(props, FETCH_TIMEOUT),
            election_backoff_max_ms=_int(props, ELECTION_BACKOFF_MAX),
            request_timeout_ms=_int(props, REQUEST_TIMEOUT),
            retry_backoff_ms=_int(props, RETRY_BACKOFF),
            append_linger_ms=_int(props, APPEND_LINGER),
            listener_name=(props.get(LISTENER_NAMES, "").split(",")[0].strip() or "CONTROLLER"),
        )

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(self.voters)
