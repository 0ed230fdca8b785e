"""Every admin API in every version the listener serves, sent over TCP to a controller with a real ZooKeeper.

Two controllers, each on a generated ZooKeeper-mode cluster: one left in soft start (its brokers never
register with it), where every admin API must answer NOT_CONTROLLER and Metadata the controller with no
topics (KIP-866); and one past the copy, in DualWriteMetadata, where each (api, version) gets a valid
request encoded by kio (or by `kio_admin_v0` for the versions kio lacks) and must get a decodable
answer with error NONE, and its change in the image and in ZooKeeper. DescribeQuorum goes to the
listener's Raft leader; Envelope carries a CreateTopics as a forwarding broker would.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import io
import json
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from migrate_helpers import SPEC, assert_consistent, cluster
from test_admin_protocol import _register_all

from migrator import commands
from migrator.controller.apis.admin_api import build
from migrator.controller.apis.envelope import principal_bytes
from migrator.controller.client.client import ControllerClient
from migrator.controller.managers.change import AclSpec, AdminChange
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import wire
from migrator.controller.protocol.kio_apis import schema_module
from migrator.controller.raft.raft_leader import RAFT_VERSIONS
from migrator.kraft.records import kafka_to_uuid
from migrator.migration.steps.soft_start import BrokersNotReadyError
from migrator.zk import paths as P
from migrator.zk.connection import close, connect

pytestmark = pytest.mark.zk

DESCRIBE_QUORUM, ENVELOPE = 55, 58
#: The issue's table: apiKey -> (name, versions) every one of which is swept.
SERVED: dict[int, tuple[str, range]] = {
    3: ("Metadata", range(13)),
    60: ("DescribeCluster", range(2)),
    19: ("CreateTopics", range(8)),
    20: ("DeleteTopics", range(7)),
    37: ("CreatePartitions", range(4)),
    44: ("IncrementalAlterConfigs", range(2)),
    33: ("AlterConfigs", range(3)),
    32: ("DescribeConfigs", range(5)),
    30: ("CreateAcls", range(4)),
    31: ("DeleteAcls", range(4)),
    29: ("DescribeAcls", range(4)),
    49: ("AlterClientQuotas", range(2)),
    48: ("DescribeClientQuotas", range(2)),
    51: ("AlterUserScramCredentials", range(1)),
    50: ("DescribeUserScramCredentials", range(1)),
    43: ("ElectLeaders", range(3)),
    45: ("AlterPartitionReassignments", range(1)),
    46: ("ListPartitionReassignments", range(1)),
    57: ("UpdateFeatures", range(2)),
    67: ("AllocateProducerIds", range(1)),
    DESCRIBE_QUORUM: ("DescribeQuorum", range(3)),
    ENVELOPE: ("Envelope", range(1)),
}
CASES = [(k, v) for k, (_, versions) in SERVED.items() for v in versions]
IDS = [f"{SERVED[k][0]}-v{v}" for k, v in CASES]

TOPIC, LITERAL, PREFIXED, MATCH, ANY = 2, 3, 4, 2, 1  # resource type TOPIC; pattern types
READ, ALLOW = 3, 3
SHA256 = 1
MS30 = datetime.timedelta(seconds=30)


def test_the_served_table_is_the_issues() -> None:
    """What ApiVersions lists for the admin APIs is exactly the swept table."""
    served = {**wire.SUPPORTED, **RAFT_VERSIONS}
    for k, (_, versions) in SERVED.items():
        assert served[k] == (versions.start, versions.stop - 1), SERVED[k][0]


def test_the_protocol_doc_lists_every_api_and_version_served() -> None:
    """docs/controller-protocol.md's table is what the listener serves: wire's table, Raft's, SASL's."""
    import re

    from migrator.controller.protocol.sasl_wire import SASL_VERSIONS

    text = (Path(__file__).parent.parent / "docs" / "controller-protocol.md").read_text()
    section = text.split("## APIs and versions served", 1)[1].split("\n## ", 1)[0]
    listed: dict[int, tuple[int, int]] = {}
    for m in re.finditer(r"^\| [^|]+ \| (\d+) \| (\d+)(?:–(\d+))? \|", section, re.M):
        lo = int(m.group(2))
        listed[int(m.group(1))] = (lo, int(m.group(3) or lo))
    assert listed == {**wire.SUPPORTED, **RAFT_VERSIONS, **SASL_VERSIONS}


# --- controllers ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Ctx:
    zk: KazooClient
    service: Any
    address: tuple[str, int]
    ids: list[int]

    def call(self, api_key: int, version: int, request: Any) -> Any:
        with ControllerClient(*self.address, timeout_s=30) as c:
            return c.call(api_key, version, request)

    def admin(self, change: AdminChange) -> None:
        assert self.service.admin is not None
        (outcome,) = self.service.admin([change], False)  # one request's changes, one batch
        assert not isinstance(outcome, Exception), outcome


@contextmanager
def _controller(zk_server: str, tmp: Path, register: bool) -> Iterator[Ctx]:
    """A controller on its own chroot's generated cluster: past the copy if `register`, else in soft
    start (no broker registers, and it waits for them long enough for the sweep)."""
    chroot = f"/zk2kraft-sweep-{uuid.uuid4().hex[:12]}"
    root = connect(zk_server)
    root.create(chroot)
    zk_connect = zk_server + chroot
    zk = connect(zk_connect)
    log_dir = tmp / "meta"
    try:
        with cluster(zk, zk_connect, SPEC.model_copy(update={"pending_deletions": 0})):
            ids = sorted(int(b) for b in zk.get_children(P.BROKER_IDS))
            running = commands.start_controller(
                zk_connect, str(log_dir), yes=True, broker_wait_timeout=900, session_timeout_ms=60_000
            )
            try:
                service = running.service
                assert service is not None and service.soft_start
                if register:
                    _register_all(service, ids)
                    assert running.wait_until(lambda r: service.admin is not None, 60), running.error
                yield Ctx(zk, service, running.address, ids)
                assert service.soft_start is not register
            finally:
                try:
                    result = running.stop()
                except BrokersNotReadyError:  # stopped while it waited for them: what soft start reports
                    assert not register
                    result = None
            if register:
                assert result is not None and result.state_after == "DualWriteMetadata"
                assert_consistent(zk, log_dir)
    finally:
        close(zk)
        root.delete(chroot, recursive=True)
        close(root)


@pytest.fixture(scope="class")
def soft(zk_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    with _controller(zk_server, tmp_path_factory.mktemp("soft"), register=False) as ctx:
        yield ctx


@pytest.fixture(scope="class")
def active(zk_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ctx]:
    with _controller(zk_server, tmp_path_factory.mktemp("active"), register=True) as ctx:
        # what the describing sweeps read, made once
        ctx.admin(AdminChange(kind="create-topic", topic="sw.desc", partitions=1, replication_factor=1))
        ctx.admin(AdminChange(kind="alter-topic-config", topic="sw.desc", configs={"retention.ms": "7777"}))
        ctx.admin(AdminChange(kind="add-acl", acl=_acl("sw.desc-acl", "User:reader")))
        ctx.admin(AdminChange(kind="add-acl", acl=_acl("sw.desc", "User:prefix", "PREFIXED")))
        yield ctx


def _acl(name: str, principal: str, pattern: str = "LITERAL") -> AclSpec:
    return AclSpec(
        resource_type="TOPIC", resource_name=name, pattern_type=pattern, principal=principal, operation="READ"
    )


# --- requests ------------------------------------------------------------------------------------


_NO_AUTH_OPS = {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def _m(api_key: int, version: int, kind: str = "request") -> Any:
    return schema_module(api_key, version, kind)


def _topic(m: Any, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> Any:
    return build(
        m.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=(),
        configs=tuple(build(m.CreatableTopicConfig, name=k, value=v) for k, v in (configs or {}).items()),
    )


def _create_topics(v: int, name: str, validate_only: bool = False) -> Any:
    m = _m(19, v)
    topic = _topic(m, name, 2, 1, {"retention.ms": str(1000 + v)})
    return build(m.CreateTopicsRequest, topics=(topic,), timeout=MS30, validate_only=validate_only)


def _acl_filter(m: Any, cls: str, name: str | None, pattern: int, principal: str | None = None) -> Any:
    return build(
        getattr(m, cls),
        resource_type_filter=TOPIC,
        resource_name_filter=name,
        pattern_type_filter=pattern,
        principal_filter=principal,
        host_filter=None,
        operation=ANY,
        permission_type=ANY,
    )


def _quota_alter(v: int, user: str, key: str, value: float) -> Any:
    m = _m(49, v)
    entry = build(
        m.EntryData,
        entity=(build(m.EntityData, entity_type="user", entity_name=user),),
        ops=(build(m.OpData, key=key, value=value, remove=False),),
    )
    return build(m.AlterClientQuotasRequest, entries=(entry,), validate_only=False)


def _scram_upsert(user: str, iterations: int = 4096) -> Any:
    m = _m(51, 0)
    salt = b"sweep-salt-" + user.encode()
    salted = hashlib.pbkdf2_hmac("sha256", b"pw-" + user.encode(), salt, iterations)
    up = build(
        m.ScramCredentialUpsertion,
        name=user,
        mechanism=SHA256,
        iterations=iterations,
        salt=salt,
        salted_password=salted,
    )
    return build(m.AlterUserScramCredentialsRequest, deletions=(), upsertions=(up,))


def _minimal(api_key: int, v: int, tag: str) -> Any:
    """A valid request of each API naming things that need not exist (the soft-start sweep)."""
    m = _m(api_key, v) if api_key in wire.SUPPORTED and api_key != ENVELOPE else None
    if api_key == 3:
        return build(
            m.MetadataRequest, topics=() if v == 0 else None, allow_auto_topic_creation=False, **_NO_AUTH_OPS
        )
    if api_key == 60:
        return build(m.DescribeClusterRequest, include_cluster_authorized_operations=False, endpoint_type=2)
    if api_key == 19:
        return _create_topics(v, f"soft.{tag}")
    if api_key == 20:
        if v >= 6:
            return build(
                m.DeleteTopicsRequest,
                topics=(build(m.DeleteTopicState, name=f"soft.{tag}", topic_id=uuid.UUID(int=0)),),
                timeout=MS30,
            )
        return build(m.DeleteTopicsRequest, topic_names=(f"soft.{tag}",), timeout=MS30)
    if api_key == 37:
        t = build(m.CreatePartitionsTopic, name=f"soft.{tag}", count=3, assignments=None)
        return build(m.CreatePartitionsRequest, topics=(t,), timeout=MS30, validate_only=False)
    if api_key in (33, 44):
        cfg = build(m.AlterableConfig, name="retention.ms", value="1", config_operation=0)
        res = build(m.AlterConfigsResource, resource_type=TOPIC, resource_name=f"soft.{tag}", configs=(cfg,))
        name = "AlterConfigsRequest" if api_key == 33 else "IncrementalAlterConfigsRequest"
        return build(getattr(m, name), resources=(res,), validate_only=False)
    if api_key == 32:
        res = build(
            m.DescribeConfigsResource,
            resource_type=TOPIC,
            resource_name=f"soft.{tag}",
            configuration_keys=None,
        )
        return build(
            m.DescribeConfigsRequest, resources=(res,), include_synonyms=False, include_documentation=False
        )
    if api_key == 30:
        c = build(
            m.AclCreation,
            resource_type=TOPIC,
            resource_name=f"soft.{tag}",
            resource_pattern_type=LITERAL,
            principal="User:x",
            host="*",
            operation=READ,
            permission_type=ALLOW,
        )
        return m.CreateAclsRequest(creations=(c,))
    if api_key == 31:
        return m.DeleteAclsRequest(filters=(_acl_filter(m, "DeleteAclsFilter", f"soft.{tag}", LITERAL),))
    if api_key == 29:
        return _acl_filter(m, "DescribeAclsRequest", f"soft.{tag}", LITERAL)
    if api_key == 49:
        return _quota_alter(v, f"soft-{tag}", "producer_byte_rate", 1.0)
    if api_key == 48:
        comp = build(m.ComponentData, entity_type="user", match_type=0, match=f"soft-{tag}")
        return build(m.DescribeClientQuotasRequest, components=(comp,), strict=False)
    if api_key == 51:
        return _scram_upsert(f"soft-{tag}")
    if api_key == 50:
        return m.DescribeUserScramCredentialsRequest(users=(m.UserName(name=f"soft-{tag}"),))
    if api_key == 43:
        tp = build(m.TopicPartitions, topic=f"soft.{tag}", partitions=(0,))
        return build(m.ElectLeadersRequest, election_type=0, topic_partitions=(tp,), timeout=MS30)
    if api_key == 45:
        part = build(m.ReassignablePartition, partition_index=0, replicas=(1,))
        return build(
            m.AlterPartitionReassignmentsRequest,
            timeout=MS30,
            topics=(build(m.ReassignableTopic, name=f"soft.{tag}", partitions=(part,)),),
        )
    if api_key == 46:
        return build(m.ListPartitionReassignmentsRequest, timeout=MS30, topics=None)
    if api_key == 57:
        return _features(v)
    if api_key == 67:
        return m.AllocateProducerIdsRequest(broker_id=1, broker_epoch=1)
    if api_key == DESCRIBE_QUORUM:
        q = _m_raft(v)
        return q.DescribeQuorumRequest(
            topics=(
                q.TopicData(
                    topic_name="__cluster_metadata", partitions=(q.PartitionData(partition_index=0),)
                ),
            )
        )
    assert api_key == ENVELOPE
    return _envelope(f"soft.{tag}")


def _features(v: int) -> Any:
    """kraft.version at its current level 0: valid, changes nothing (v1 validates only)."""
    m = _m(57, v)
    key = build(
        m.FeatureUpdateKey,
        feature="kraft.version",
        max_version_level=0,
        allow_downgrade=False,
        upgrade_type=1,
    )
    return build(m.UpdateFeaturesRequest, timeout=MS30, feature_updates=(key,), validate_only=True)


def _m_raft(v: int) -> Any:
    import importlib

    return importlib.import_module(f"kio.schema.describe_quorum.v{v}.request")


def _envelope(name: str) -> EnvelopeRequest:
    inner = wire.encode_request(19, 7, 7, "client-app", _create_topics(7, name))[4:]
    return EnvelopeRequest(
        request_data=inner,
        request_principal=principal_bytes("User:alice"),
        client_host_address=bytes([10, 0, 0, 1]),
    )


def _describe_quorum(address: tuple[str, int], v: int, request: Any) -> Any:
    """DescribeQuorum to the listener's Raft leader (not in `wire`'s table): header v2, body by kio."""
    import importlib

    head, body = io.BytesIO(), io.BytesIO()
    entity_writer(RequestHeaderV2)(
        head,
        RequestHeaderV2(
            request_api_key=DESCRIBE_QUORUM, request_api_version=v, correlation_id=9, client_id="sweep"
        ),
    )
    entity_writer(type(request))(body, request)
    payload = head.getvalue() + body.getvalue()
    with socket.create_connection(address, timeout=30) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "the listener closed the connection"
            data += chunk
    frame = data[4:]
    header, pos = entity_reader(ResponseHeaderV1)(frame, 0)
    assert header.correlation_id == 9
    cls = importlib.import_module(f"kio.schema.describe_quorum.v{v}.response").DescribeQuorumResponse
    response, size = entity_reader(cls)(frame, pos)
    assert pos + size == len(frame)
    return response


def _send(ctx: Ctx, api_key: int, v: int, request: Any) -> Any:
    if api_key == DESCRIBE_QUORUM:
        return _describe_quorum(ctx.address, v, request)
    return ctx.call(api_key, v, request)


def _codes(value: Any) -> list[int]:
    """Every error code in a response, nested ones included."""
    out: list[int] = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            x = getattr(value, f.name)
            if f.name == "error_code":
                out.append(int(x))
            else:
                out += _codes(x)
    elif isinstance(value, tuple):
        for x in value:
            out += _codes(x)
    return out


# --- soft start: NOT_CONTROLLER everywhere, Metadata without topics --------------------------------


class TestSoftStart:
    @pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
    def test_answers_not_controller_before_the_copy(self, soft: Ctx, api_key: int, version: int) -> None:
        tag = f"{api_key}v{version}"
        response = _send(soft, api_key, version, _minimal(api_key, version, tag))
        if api_key == 3:  # Metadata answers: the controller as the only node, no topics
            node = soft.service.core.config.node_id
            assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(node, *soft.address)]
            assert response.topics == ()
            return
        if api_key == ENVELOPE:  # Kafka turns the inner NOT_CONTROLLER into the envelope's own
            assert (int(response.error_code), response.response_data) == (E.NOT_CONTROLLER, None)
            return
        codes = _codes(response)
        assert codes and set(codes) == {E.NOT_CONTROLLER}, response
        assert not soft.zk.exists(P.topic_path(f"soft.{tag}"))
        assert f"soft.{tag}" not in soft.service.image.topics


# --- DualWriteMetadata: each version's valid request done, durable and in ZooKeeper ----------------


def _zk_json(zk: KazooClient, path: str) -> Any:
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def _zk_config(zk: KazooClient, path: str) -> dict[str, str]:
    data = _zk_json(zk, path)
    return data["config"] if data else {}


def _zk_acls(zk: KazooClient, path: str) -> list[dict[str, Any]]:
    data = _zk_json(zk, path)
    return data["acls"] if data else []


def _ok_metadata(ctx: Ctx, v: int) -> None:
    m = _m(3, v)
    resp = ctx.call(
        3,
        v,
        build(
            m.MetadataRequest, topics=() if v == 0 else None, allow_auto_topic_creation=False, **_NO_AUTH_OPS
        ),
    )
    node = ctx.service.core.config.node_id
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(node, *ctx.address)]
    assert sorted(t.name for t in resp.topics) == sorted(ctx.service.image.topics)
    assert {int(t.error_code) for t in resp.topics} == {E.NONE}
    if v >= 1:
        assert resp.controller_id == node
    if v >= 2:
        assert resp.cluster_id == ctx.service.core.config.cluster_id
    topic = next(t for t in resp.topics if t.name == "sw.desc")
    image = ctx.service.image.topics["sw.desc"]
    assert [(p.partition_index, p.leader_id, tuple(p.replica_nodes)) for p in topic.partitions] == [
        (i, p.leader, tuple(p.replicas)) for i, p in sorted(image.partitions.items())
    ]
    if v >= 10:
        assert topic.topic_id == kafka_to_uuid(image.topic_id)
    # one topic by name, one that does not exist
    if v >= 1:
        asked = tuple(
            build(m.MetadataRequestTopic, name=n, topic_id=uuid.UUID(int=0)) for n in ("sw.desc", "sw.none")
        )
        resp = ctx.call(
            3, v, build(m.MetadataRequest, topics=asked, allow_auto_topic_creation=False, **_NO_AUTH_OPS)
        )
        assert [(t.name, int(t.error_code)) for t in resp.topics] == [("sw.desc", 0), ("sw.none", 3)]


def _ok_describe_cluster(ctx: Ctx, v: int) -> None:
    m = _m(60, v)
    resp = ctx.call(
        60, v, build(m.DescribeClusterRequest, include_cluster_authorized_operations=False, endpoint_type=2)
    )
    if v == 0:  # v0 asks for brokers (no endpoint type); Kafka 3.9's controller answers INVALID_REQUEST
        assert resp.error_code == ErrorCode.invalid_request
        assert resp.error_message == (
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
        )
        return
    node = ctx.service.core.config.node_id
    assert (int(resp.error_code), resp.cluster_id, resp.controller_id) == (
        0,
        ctx.service.core.config.cluster_id,
        node,
    )
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(node, *ctx.address)]


def _ok_create_topics(ctx: Ctx, v: int) -> None:
    name = f"sw.ct{v}"
    if v >= 1:  # validateOnly (v1+): checked, nothing written
        resp = ctx.call(19, v, _create_topics(v, name, validate_only=True))
        assert [(t.name, int(t.error_code)) for t in resp.topics] == [(name, 0)]
        assert not ctx.zk.exists(P.topic_path(name)) and name not in ctx.service.image.topics
    resp = ctx.call(19, v, _create_topics(v, name))
    [t] = resp.topics
    assert (t.name, int(t.error_code)) == (name, 0)
    if v >= 1:
        assert t.error_message is None
    image = ctx.service.image.topics[name]
    if v >= 5:
        assert (t.num_partitions, t.replication_factor) == (2, 1)
    if v >= 7:
        assert t.topic_id == kafka_to_uuid(image.topic_id)
    znode = _zk_json(ctx.zk, P.topic_path(name))
    assert znode["topic_id"] == image.topic_id and sorted(znode["partitions"]) == ["0", "1"]
    assert all(len(r) == 1 and r[0] in ctx.ids for r in znode["partitions"].values())
    assert _zk_config(ctx.zk, f"/config/topics/{name}") == {"retention.ms": str(1000 + v)}


def _ok_delete_topics(ctx: Ctx, v: int) -> None:
    name = f"sw.dt{v}"
    ctx.admin(AdminChange(kind="create-topic", topic=name, partitions=1, replication_factor=1))
    assert ctx.zk.exists(P.topic_path(name))
    m = _m(20, v)
    if v >= 6:  # by id
        tid = kafka_to_uuid(ctx.service.image.topics[name].topic_id)
        req = build(
            m.DeleteTopicsRequest, topics=(build(m.DeleteTopicState, name=None, topic_id=tid),), timeout=MS30
        )
    else:
        req = build(m.DeleteTopicsRequest, topic_names=(name,), timeout=MS30)
    [r] = ctx.call(20, v, req).responses
    assert (r.name, int(r.error_code)) == (name, 0)
    assert name not in ctx.service.image.topics
    assert name not in ctx.zk.get_children(P.TOPICS)


def _ok_create_partitions(ctx: Ctx, v: int) -> None:
    name = f"sw.cp{v}"
    ctx.admin(AdminChange(kind="create-topic", topic=name, partitions=1, replication_factor=1))
    m = _m(37, v)
    t = build(m.CreatePartitionsTopic, name=name, count=3, assignments=None)
    [r] = ctx.call(
        37, v, build(m.CreatePartitionsRequest, topics=(t,), timeout=MS30, validate_only=False)
    ).results
    assert (r.name, int(r.error_code)) == (name, 0)
    assert sorted(_zk_json(ctx.zk, P.topic_path(name))["partitions"], key=int) == ["0", "1", "2"]
    assert ctx.zk.exists(P.partition_state_path(name, 2))
    assert len(ctx.service.image.topics[name].partitions) == 3


def _ok_alter_configs(ctx: Ctx, api_key: int, v: int) -> None:
    name = f"sw.ac{api_key}v{v}"
    ctx.admin(
        AdminChange(
            kind="create-topic",
            topic=name,
            partitions=1,
            replication_factor=1,
            configs={"cleanup.policy": "compact"},
        )
    )
    m = _m(api_key, v)
    value = str(2000 + 10 * api_key + v)
    cfg = build(m.AlterableConfig, name="retention.ms", value=value, config_operation=0)  # SET
    res = build(m.AlterConfigsResource, resource_type=TOPIC, resource_name=name, configs=(cfg,))
    cls = "AlterConfigsRequest" if api_key == 33 else "IncrementalAlterConfigsRequest"
    [r] = ctx.call(api_key, v, build(getattr(m, cls), resources=(res,), validate_only=False)).responses
    assert (r.resource_name, int(r.error_code)) == (name, 0)
    # the legacy API replaces the resource's configs; the incremental one sets one
    want = {"retention.ms": value} if api_key == 33 else {"cleanup.policy": "compact", "retention.ms": value}
    assert _zk_config(ctx.zk, f"/config/topics/{name}") == want
    assert ctx.service.image.configs[("TOPIC", name)].configs == want


def _ok_describe_configs(ctx: Ctx, v: int) -> None:
    m = _m(32, v)
    res = build(
        m.DescribeConfigsResource,
        resource_type=TOPIC,
        resource_name="sw.desc",
        configuration_keys=("retention.ms", "cleanup.policy"),
    )
    req = build(
        m.DescribeConfigsRequest, resources=(res,), include_synonyms=True, include_documentation=False
    )
    [r] = ctx.call(32, v, req).results
    assert (r.resource_name, int(r.error_code)) == ("sw.desc", 0)
    by = {c.name: c for c in r.configs}
    assert sorted(by) == ["cleanup.policy", "retention.ms"]
    assert (by["retention.ms"].value, by["cleanup.policy"].value) == ("7777", "delete")
    if v == 0:  # IsDefault, no source nor synonyms
        assert (by["retention.ms"].is_default, by["cleanup.policy"].is_default) == (False, True)
        return
    assert (by["retention.ms"].config_source, by["cleanup.policy"].config_source) == (1, 5)
    assert (by["retention.ms"].synonyms[0].name, by["retention.ms"].synonyms[0].value) == (
        "retention.ms",
        "7777",
    )
    assert by["retention.ms"].synonyms[0].source == 1 and by["retention.ms"].synonyms[-1].source == 5


def _ok_create_acls(ctx: Ctx, v: int) -> None:
    m = _m(30, v)
    principal = f"User:sw-ca{v}"
    c = build(
        m.AclCreation,
        resource_type=TOPIC,
        resource_name="sw.acl",
        resource_pattern_type=LITERAL,
        principal=principal,
        host="*",
        operation=READ,
        permission_type=ALLOW,
    )
    [r] = ctx.call(30, v, m.CreateAclsRequest(creations=(c,))).results
    assert (int(r.error_code), r.error_message) == (0, None)
    stored = _zk_acls(ctx.zk, "/kafka-acl/Topic/sw.acl")
    assert {"principal": principal, "permissionType": "Allow", "operation": "Read", "host": "*"} in stored
    assert any(a.principal == principal and a.pattern_type == "LITERAL" for a in ctx.service.image.acls)


def _ok_describe_acls(ctx: Ctx, v: int) -> None:
    """v0 implies a LITERAL filter: the PREFIXED ACL on "sw.desc" is not a match; v1+ asks MATCH."""
    m = _m(29, v)
    resp = ctx.call(29, v, _acl_filter(m, "DescribeAclsRequest", "sw.desc-acl", MATCH))
    assert int(resp.error_code) == 0
    found = sorted(
        (r.resource_name, getattr(r, "pattern_type", LITERAL), a.principal)
        for r in resp.resources
        for a in r.acls
    )
    literal = ("sw.desc-acl", LITERAL, "User:reader")
    assert found == ([literal] if v == 0 else sorted([literal, ("sw.desc", PREFIXED, "User:prefix")]))


def _ok_delete_acls(ctx: Ctx, v: int) -> None:
    """The same name LITERAL and PREFIXED: v0's filter is LITERAL (one deleted), v1+ asks ANY (both)."""
    name, principal = f"sw.da{v}", f"User:sw-da{v}"
    for pattern in ("LITERAL", "PREFIXED"):
        ctx.admin(AdminChange(kind="add-acl", acl=_acl(name, principal, pattern)))
    m = _m(31, v)
    [fr] = ctx.call(
        31, v, m.DeleteAclsRequest(filters=(_acl_filter(m, "DeleteAclsFilter", name, ANY, principal),))
    ).filter_results
    assert int(fr.error_code) == 0 and {int(a.error_code) for a in fr.matching_acls} == {0}
    left = sorted(a.pattern_type for a in ctx.service.image.acls if a.principal == principal)
    assert left == (["PREFIXED"] if v == 0 else [])
    assert len(fr.matching_acls) == (1 if v == 0 else 2)
    assert not any(a["principal"] == principal for a in _zk_acls(ctx.zk, f"/kafka-acl/Topic/{name}"))
    prefixed = _zk_acls(ctx.zk, f"{P.PREFIXED_ACL}/Topic/{name}")
    assert any(a["principal"] == principal for a in prefixed) is (v == 0)


def _ok_alter_quotas(ctx: Ctx, v: int) -> None:
    user = f"sw-q{v}"
    [e] = ctx.call(49, v, _quota_alter(v, user, "producer_byte_rate", 1024.0 * (v + 1))).entries
    assert (int(e.error_code), e.error_message) == (0, None)
    assert {k: float(x) for k, x in _zk_config(ctx.zk, f"/config/users/{user}").items()} == {
        "producer_byte_rate": 1024.0 * (v + 1)
    }


def _ok_describe_quotas(ctx: Ctx, v: int) -> None:
    user = f"sw-dq{v}"
    [e] = ctx.call(49, 1, _quota_alter(1, user, "consumer_byte_rate", 4096.0)).entries
    assert int(e.error_code) == 0
    m = _m(48, v)
    comp = build(m.ComponentData, entity_type="user", match_type=0, match=user)  # EXACT
    resp = ctx.call(48, v, build(m.DescribeClientQuotasRequest, components=(comp,), strict=False))
    assert int(resp.error_code) == 0
    assert [
        ([(x.entity_type, x.entity_name) for x in en.entity], [(x.key, x.value) for x in en.values])
        for en in resp.entries
    ] == [([("user", user)], [("consumer_byte_rate", 4096.0)])]


def _ok_alter_scram(ctx: Ctx, v: int) -> None:
    [r] = ctx.call(51, v, _scram_upsert("sw-scram")).results
    assert (r.user, int(r.error_code)) == ("sw-scram", 0)
    assert ("sw-scram", "SCRAM-SHA-256") in ctx.service.image.scram_credentials
    assert "iterations=4096" in _zk_config(ctx.zk, "/config/users/sw-scram")["SCRAM-SHA-256"]


def _ok_describe_scram(ctx: Ctx, v: int) -> None:
    assert int(ctx.call(51, 0, _scram_upsert("sw-scram-d", 8192)).results[0].error_code) == 0
    m = _m(50, v)
    resp = ctx.call(50, v, m.DescribeUserScramCredentialsRequest(users=(m.UserName(name="sw-scram-d"),)))
    assert int(resp.error_code) == 0
    [r] = resp.results
    assert (r.user, int(r.error_code)) == ("sw-scram-d", 0)
    assert [(int(c.mechanism), c.iterations) for c in r.credential_infos] == [(SHA256, 8192)]


def _ok_elect_leaders(ctx: Ctx, v: int) -> None:
    """A preferred election where the preferred replica leads: ELECTION_NOT_NEEDED, the leader kept."""
    name = f"sw.el{v}"
    ctx.admin(AdminChange(kind="create-topic", topic=name, partitions=1, replication_factor=2))
    leader = ctx.service.image.topics[name].partitions[0].leader
    m = _m(43, v)
    tp = build(m.TopicPartitions, topic=name, partitions=(0, 9))
    resp = ctx.call(
        43, v, build(m.ElectLeadersRequest, election_type=0, topic_partitions=(tp,), timeout=MS30)
    )
    if v >= 1:
        assert int(resp.error_code) == 0
    [r] = resp.replica_election_results
    assert r.topic == name
    assert sorted((p.partition_id, int(p.error_code)) for p in r.partition_result) == [(0, 84), (9, 3)]
    assert _zk_json(ctx.zk, P.partition_state_path(name, 0))["leader"] == leader


def _ok_alter_reassignments(ctx: Ctx, v: int) -> None:
    """A move onto the replicas a partition has: done at once, nothing pending; one of nothing: 85."""
    name = "sw.apr"
    ctx.admin(AdminChange(kind="create-topic", topic=name, partitions=2, replication_factor=1))
    replicas = tuple(ctx.service.image.topics[name].partitions[0].replicas)
    m = _m(45, v)
    parts = (
        build(m.ReassignablePartition, partition_index=0, replicas=replicas),
        build(m.ReassignablePartition, partition_index=1, replicas=None),  # cancel: none in progress
    )
    topic = build(m.ReassignableTopic, name=name, partitions=parts)
    resp = ctx.call(45, v, build(m.AlterPartitionReassignmentsRequest, timeout=MS30, topics=(topic,)))
    assert int(resp.error_code) == 0
    assert [(p.partition_index, int(p.error_code)) for t in resp.responses for p in t.partitions] == [
        (0, 0),
        (1, 85),
    ]
    assert _zk_json(ctx.zk, P.topic_path(name))["partitions"]["0"] == list(replicas)


def _ok_list_reassignments(ctx: Ctx, v: int) -> None:
    m = _m(46, v)
    resp = ctx.call(46, v, build(m.ListPartitionReassignmentsRequest, timeout=MS30, topics=None))
    assert int(resp.error_code) == 0
    ongoing = {(t.name, p.partition_index) for t in resp.topics for p in t.partitions}
    assert ongoing == {
        (t.name, i)
        for t in ctx.service.image.topics.values()
        for i, p in t.partitions.items()
        if p.adding_replicas or p.removing_replicas
    }


def _ok_update_features(ctx: Ctx, v: int) -> None:
    before = dict(ctx.service.builder.result.feature_levels)
    resp = ctx.call(57, v, _features(v))
    assert int(resp.error_code) == 0
    assert [(r.feature, int(r.error_code)) for r in resp.results] == [("kraft.version", 0)]
    assert ctx.service.builder.result.feature_levels.get("kraft.version", 0) == 0
    assert ctx.service.builder.result.feature_levels.get("metadata.version") == before.get("metadata.version")


def _ok_allocate_producer_ids(ctx: Ctx, v: int) -> None:
    broker = ctx.service.image.brokers[min(ctx.service.image.brokers)]
    m = _m(67, v)
    resp = ctx.call(
        67, v, m.AllocateProducerIdsRequest(broker_id=broker.id, broker_epoch=broker.broker_epoch)
    )
    assert (int(resp.error_code), resp.producer_id_len) == (0, 1000)
    assert ctx.service.flush(30)
    assert _zk_json(ctx.zk, P.LATEST_PRODUCER_ID_BLOCK) == {
        "version": 1,
        "broker": broker.id,
        "block_start": str(resp.producer_id_start),
        "block_end": str(resp.producer_id_start + 999),
    }


def _ok_describe_quorum(ctx: Ctx, v: int) -> None:
    resp = _describe_quorum(ctx.address, v, _minimal(DESCRIBE_QUORUM, v, ""))
    node = ctx.service.core.config.node_id
    assert int(resp.error_code) == 0
    [p] = resp.topics[0].partitions
    assert (int(p.error_code), p.leader_id) == (0, node)
    assert [r.replica_id for r in p.current_voters] == [node]
    if v >= 2:
        assert resp.nodes[0].node_id == node and resp.nodes[0].listeners[0].port == ctx.address[1]


def _ok_envelope(ctx: Ctx, v: int) -> None:
    answer = ctx.call(ENVELOPE, v, _envelope("sw.env"))
    assert int(answer.error_code) == 0
    correlation, inner = wire.decode_response(19, 7, answer.response_data)
    assert correlation == 7 and [(t.name, int(t.error_code)) for t in inner.topics] == [("sw.env", 0)]
    assert ctx.zk.exists(P.topic_path("sw.env"))


OK: dict[int, Callable[[Ctx, int], None]] = {
    3: _ok_metadata,
    60: _ok_describe_cluster,
    19: _ok_create_topics,
    20: _ok_delete_topics,
    37: _ok_create_partitions,
    44: lambda ctx, v: _ok_alter_configs(ctx, 44, v),
    33: lambda ctx, v: _ok_alter_configs(ctx, 33, v),
    32: _ok_describe_configs,
    30: _ok_create_acls,
    31: _ok_delete_acls,
    29: _ok_describe_acls,
    49: _ok_alter_quotas,
    48: _ok_describe_quotas,
    51: _ok_alter_scram,
    50: _ok_describe_scram,
    43: _ok_elect_leaders,
    45: _ok_alter_reassignments,
    46: _ok_list_reassignments,
    57: _ok_update_features,
    67: _ok_allocate_producer_ids,
    DESCRIBE_QUORUM: _ok_describe_quorum,
    ENVELOPE: _ok_envelope,
}


class TestDualWrite:
    @pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
    def test_each_version_is_served(self, active: Ctx, api_key: int, version: int) -> None:
        OK[api_key](active, version)
