"""`zk2kraft admin` as a Kafka-protocol client of the controller: each `AdminChange` sent as the Kafka
request an admin client would send (CreateTopics, DeleteTopics, CreatePartitions,
IncrementalAlterConfigs, CreateAcls, DeleteAcls, AlterClientQuotas, AlterUserScramCredentials), its
per-item error turned into the one-line error and exit code of the CLI.

The controller answers only once the change is durable in the log and carried to ZooKeeper
(`controller.apis.admin_api`), so a successful answer means what the direct path's does.
"""

from __future__ import annotations

import base64
import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from migrator.controller.apis.admin_api import build, kio_module
from migrator.controller.client.admin_endpoint import Endpoint
from migrator.controller.client.client import ControllerClient, ControllerUnreachable
from migrator.controller.managers.change import AdminChange
from migrator.errors import BadInputError, FencedError, FindingsError, UnreachableError, ZkKraftError
from migrator.kraft.image import (
    ACL_OPERATIONS,
    ACL_PERMISSION_TYPES,
    ACL_RESOURCE_TYPES,
    PATTERN_TYPES,
    SCRAM_MECHANISMS,
)

__all__ = ["AdminClient", "Answer"]

NOT_CONTROLLER = 41
TOPIC, BROKER = 2, 4  # ConfigResource.Type
SET, DELETE = 0, 1  # AlterConfigOp.OpType
_NO_ID = uuid.UUID(int=0)

#: The request each kind of change travels as.
API_OF = {
    "create-topic": 19,
    "delete-topic": 20,
    "add-partitions": 37,
    "alter-topic-config": 44,
    "alter-broker-config": 44,
    "add-acl": 30,
    "remove-acl": 31,
    "set-quota": 49,
    "remove-quota": 49,
    "upsert-scram": 51,
    "delete-scram": 51,
}
API_NAMES = {
    19: "CreateTopics",
    20: "DeleteTopics",
    30: "CreateAcls",
    31: "DeleteAcls",
    37: "CreatePartitions",
    44: "IncrementalAlterConfigs",
    49: "AlterClientQuotas",
    51: "AlterUserScramCredentials",
}


@dataclass(frozen=True)
class Answer:
    """What the controller said to one change: done, in words, and which request carried it."""

    summary: str
    request: str  # e.g. "CreateTopics v7"
    topic_id: str | None = None


def _code(table: dict[int, str], name: str, what: str) -> int:
    wanted = name.strip().upper()
    for code, known in table.items():
        if known == wanted and known not in ("UNKNOWN", "ANY", "MATCH"):
            return code
    names = ", ".join(v for v in table.values() if v not in ("UNKNOWN", "ANY", "MATCH"))
    raise BadInputError(f"{what} {name!r}: one of {names}")


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


class AdminClient:
    """One connection to the controller's listener for a run of changes."""

    def __init__(self, endpoint: Endpoint, timeout_s: float) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        # the answer comes once ZooKeeper holds the change: the socket waits as long as the request may
        self.client = ControllerClient(
            endpoint.host, endpoint.port, client_id="zk2kraft-admin", timeout_s=timeout_s,
            security=endpoint.security,
        )  # fmt: skip

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, change: AdminChange) -> Answer:
        """Send one change; raise the CLI's error for a refused one (one line, naming Kafka's error)."""
        api_key = API_OF[change.kind]
        try:
            version = self.client.version_for(api_key)
        except ValueError as e:
            raise FindingsError(f"the controller at {self.endpoint.describe()}: {e}") from None
        request = _request(change, api_key, version, self.timeout_s)
        try:
            response = self.client.call(api_key, version, request)
        except ControllerUnreachable as e:
            raise ControllerUnreachable(
                f"{change.describe()}: {e}; the request was sent, so whether it was applied shows in "
                "`zk2kraft status` and the log"
            ) from None
        code, message, answer = _outcome(change, api_key, response)
        if code != 0:
            raise self._refusal(change, code, message)
        return Answer(answer[0], f"{API_NAMES[api_key]} v{version}", answer[1])

    def _refusal(self, change: AdminChange, code: int, message: str | None) -> ZkKraftError:
        where = f"the controller at {self.endpoint.describe()}"
        if code == _UNKNOWN_TOPIC_OR_PARTITION and not message and change.topic:
            message = f"topic {change.topic!r} does not exist"  # Kafka's reply names no topic
        text = f"{change.describe()}: {error_name(code)}" + (f": {message}" if message else "")
        if code == NOT_CONTROLLER:
            if message and "fenced" in message:
                return FencedError(f"{text} ({where})")
            return FindingsError(
                f"{text}: {where} takes no admin changes now (soft start: brokers are registering and the "
                "copy is not committed yet, KIP-866; or it is not following in DualWriteMetadata)"
            )
        if code == -1:  # the controller's own trouble, e.g. ZooKeeper out of reach after the append
            return UnreachableError(
                f"{text} ({where}); whether it was applied shows in `zk2kraft status` and the log"
            )
        return BadInputError(text)


_UNKNOWN_TOPIC_OR_PARTITION = 3  # Kafka's Errors.UNKNOWN_TOPIC_OR_PARTITION


# --- requests ----------------------------------------------------------------------------------------


def _request(change: AdminChange, api_key: int, version: int, timeout_s: float) -> Any:
    m = kio_module(api_key, version, "request")
    timeout = datetime.timedelta(seconds=timeout_s)
    k = change.kind
    if k == "create-topic":
        # A manual assignment travels as Kafka's admin client sends it: the replicas of each partition,
        # with num_partitions and replication_factor -1 (CreateTopicsRequest rejects both at once).
        manual = change.assignment or {}
        topic = build(
            m.CreatableTopic,
            name=change.topic,
            num_partitions=-1 if change.partitions is None or manual else change.partitions,
            replication_factor=-1
            if change.replication_factor is None or manual
            else change.replication_factor,
            assignments=tuple(
                build(m.CreatableReplicaAssignment, partition_index=p, broker_ids=tuple(manual[p]))
                for p in sorted(manual)
            ),
            configs=tuple(build(m.CreatableTopicConfig, name=n, value=v) for n, v in change.configs.items()),
        )
        return build(m.CreateTopicsRequest, topics=(topic,), timeout=timeout, validate_only=False)
    if k == "delete-topic":
        if hasattr(m, "DeleteTopicState"):
            state = build(m.DeleteTopicState, name=change.topic, topic_id=_NO_ID)
            return build(m.DeleteTopicsRequest, topics=(state,), timeout=timeout)
        return build(m.DeleteTopicsRequest, topic_names=(change.topic,), timeout=timeout)
    if k == "add-partitions":
        # the new partitions' replicas in partition order (CreatePartitionsAssignment), or None: placed
        new = change.assignment or {}
        assignments = (
            tuple(build(m.CreatePartitionsAssignment, broker_ids=tuple(new[p])) for p in sorted(new))
            if new
            else None
        )
        topic = build(
            m.CreatePartitionsTopic, name=change.topic, count=change.partitions, assignments=assignments
        )
        return build(m.CreatePartitionsRequest, topics=(topic,), timeout=timeout, validate_only=False)
    if k in ("alter-topic-config", "alter-broker-config"):
        ops = [
            build(m.AlterableConfig, name=n, config_operation=SET, value=v) for n, v in change.configs.items()
        ]
        ops += [
            build(m.AlterableConfig, name=n, config_operation=DELETE, value=None)
            for n in change.delete_configs
        ]
        kind = TOPIC if k == "alter-topic-config" else BROKER
        name = change.topic if kind == TOPIC else change.broker
        resource = build(
            m.AlterConfigsResource, resource_type=kind, resource_name=name or "", configs=tuple(ops)
        )
        return build(m.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=False)
    if k in ("add-acl", "remove-acl"):
        return _acl_request(m, change)
    if k in ("set-quota", "remove-quota"):
        entity = tuple(
            build(m.EntityData, entity_type=t, entity_name=n) for t, n in change.quota_entity.items()
        )
        ops = [build(m.OpData, key=key, value=v, remove=False) for key, v in change.quota_values.items()]
        ops += [build(m.OpData, key=key, value=0.0, remove=True) for key in change.quota_remove]
        entry = build(m.EntryData, entity=entity, ops=tuple(ops))
        return build(m.AlterClientQuotasRequest, entries=(entry,), validate_only=False)
    return _scram_request(m, change)


def _acl_request(m: Any, change: AdminChange) -> Any:
    acl = change.acl
    if acl is None:
        raise BadInputError(f"{change.kind} needs an ACL")
    fields = dict(
        resource_type=_code(ACL_RESOURCE_TYPES, acl.resource_type, "--resource-type"),
        pattern_type=_code(PATTERN_TYPES, acl.pattern_type, "--pattern-type"),
        operation=_code(ACL_OPERATIONS, acl.operation, "--operation"),
        permission_type=_code(ACL_PERMISSION_TYPES, acl.permission_type, "--permission"),
    )
    if change.kind == "add-acl":
        creation = build(
            m.AclCreation,
            resource_type=fields["resource_type"],
            resource_name=acl.resource_name,
            resource_pattern_type=fields["pattern_type"],
            principal=acl.principal,
            host=acl.host,
            operation=fields["operation"],
            permission_type=fields["permission_type"],
        )
        return build(m.CreateAclsRequest, creations=(creation,))
    # an exact filter: it matches this one binding only
    exact = build(
        m.DeleteAclsFilter,
        resource_type_filter=fields["resource_type"],
        resource_name_filter=acl.resource_name,
        pattern_type_filter=fields["pattern_type"],
        principal_filter=acl.principal,
        host_filter=acl.host,
        operation=fields["operation"],
        permission_type=fields["permission_type"],
    )
    return build(m.DeleteAclsRequest, filters=(exact,))


def _scram_request(m: Any, change: AdminChange) -> Any:
    spec = change.scram
    if spec is None:
        raise BadInputError(f"{change.kind} needs a SCRAM credential")
    mechanism = _code(SCRAM_MECHANISMS, spec.mechanism, "--mechanism")
    if change.kind == "delete-scram":
        deletion = build(m.ScramCredentialDeletion, name=spec.user, mechanism=mechanism)
        return build(m.AlterUserScramCredentialsRequest, deletions=(deletion,), upsertions=())
    if not spec.salted_password:
        raise BadInputError("upsert-scram needs the password (`zk2kraft admin upsert-scram`)")
    upsertion = build(
        m.ScramCredentialUpsertion,
        name=spec.user,
        mechanism=mechanism,
        iterations=spec.iterations,
        salt=base64.b64decode(spec.salt),
        salted_password=base64.b64decode(spec.salted_password),
    )
    return build(m.AlterUserScramCredentialsRequest, deletions=(), upsertions=(upsertion,))


# --- answers -----------------------------------------------------------------------------------------


def _outcome(change: AdminChange, api_key: int, r: Any) -> tuple[int, str | None, tuple[str, str | None]]:
    """(error code, message, (summary, topic id)) of the one item the request carried."""
    k = change.kind
    if api_key == 19:
        t = r.topics[0]
        tid = None if t.topic_id in (None, _NO_ID) else str(t.topic_id)
        done = f"created topic {change.topic}: {t.num_partitions} partitions, replication factor {t.replication_factor}"
        return int(t.error_code), t.error_message, (done + (f", id {tid}" if tid else ""), tid)
    if api_key == 20:
        t = r.responses[0]
        return int(t.error_code), t.error_message, (f"deleted topic {change.topic}", None)
    if api_key == 37:
        t = r.results[0]
        return (
            int(t.error_code),
            t.error_message,
            (f"{change.topic} now has {change.partitions} partitions", None),
        )
    if api_key == 44:
        t = r.responses[0]
        what = f"set {len(change.configs)}, deleted {len(change.delete_configs)} config(s)"
        return int(t.error_code), t.error_message, (what, None)
    if api_key == 30:
        t = r.results[0]
        return int(t.error_code), t.error_message, ("added 1 ACL binding", None)
    if api_key == 31:
        f = r.filter_results[0]
        bad = next((a for a in f.matching_acls if int(a.error_code) != 0), None)
        if int(f.error_code) != 0 or bad is None:
            n = len(f.matching_acls)
            done = f"removed {n} ACL binding(s)" if n else "no such ACL; nothing to remove"
            return int(f.error_code), f.error_message, (done, None)
        return int(bad.error_code), bad.error_message, ("", None)
    if api_key == 49:
        t = r.entries[0]
        verb = "set" if k == "set-quota" else "removed"
        n = len(change.quota_values) if k == "set-quota" else len(change.quota_remove)
        return int(t.error_code), t.error_message, (f"{verb} {n} quota value(s)", None)
    t = r.results[0]
    verb = "upserted" if k == "upsert-scram" else "deleted"
    assert change.scram is not None
    return (
        int(t.error_code),
        t.error_message,
        (f"{verb} {change.scram.mechanism} credential of {t.user}", None),
    )
