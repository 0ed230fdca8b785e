"""What a controller tells one ZooKeeper-mode broker, and the wire requests that say it in each version.

The propagator decides *what* each broker must learn (partition states, live brokers, replicas to
stop) as version-independent pending items; a broker's channel merges consecutive items of one type
into one request and builds it here in the version that broker's IBP gets (`zk_broker_messages`),
with the fields Kafka 3.9's ControllerChannelManager sets for a KRaft controller: `ControllerId` the
KRaft node id, `isKRaftController` true, `ControllerEpoch` the claim's `/controller_epoch`, `BrokerEpoch`
the epoch the broker's BrokerRegistration got, topic ids, and `Type` FULL for a full resend.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import struct
import threading
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from kio.serial import entity_reader, entity_writer

from migrator.bulk import without_gc
from migrator.controller.protocol.fast_writer import encode_fast, uvarint_bytes, writer_from
from migrator.controller.zk_brokers import zk_broker_messages as Z

__all__ = [
    "LEADER_DURING_DELETE",
    "BrokerInfo",
    "Header",
    "Item",
    "PartitionState",
    "build_request",
    "bulk",
    "decode_response_frame",
    "encode_body",
    "encode_entity",
    "encode_request_frame",
    "merge",
    "response_errors",
]

#: Kafka's LeaderAndIsr.LeaderDuringDelete: the leader UpdateMetadata names for a topic being deleted.
LEADER_DURING_DELETE = -2
#: from this many partitions on, a request is built without the cyclic collector (see `bulk`)
BULK = 1000
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_ZERO = uuid.UUID(int=0)
_INT32 = struct.Struct(">i")
_uv = uvarint_bytes


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the controller's image has it (what LeaderAndIsr and UpdateMetadata carry)."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    offline: tuple[int, ...] = ()  # replicas on brokers not alive (UpdateMetadata's OfflineReplicas)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as UpdateMetadata lists it: every endpoint, and its rack."""

    broker_id: int
    endpoints: tuple[tuple[str, str, int, str], ...]  # (listener, host, port, security protocol)
    rack: str | None = None


@dataclass
class Item:
    """One thing queued for a broker: `api_key` is the request type it becomes.

    LeaderAndIsr: `partitions` (the broker is a replica) and `leaders` ((id, host, port) of their live
    leaders); UpdateMetadata: `partitions` and `live_brokers`; StopReplica: `stop` ((topic, partition)
    → (leader epoch, delete)). `full` marks a full-state item (Type FULL)."""

    api_key: int
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    leaders: dict[int, tuple[str, int]] = field(default_factory=dict)
    live_brokers: tuple[BrokerInfo, ...] = ()
    stop: dict[tuple[str, int], tuple[int, bool]] = field(default_factory=dict)
    full: bool = False
    is_new: frozenset[tuple[str, int]] = frozenset()
    #: the same object is queued for many brokers (encoded once, see `encode_body`); never mutated
    shared: bool = False
    #: a shared item's body per (version, controller id, controller epoch), BrokerEpoch -1: kept on
    #: the item, so a channel that fell behind finds it as long as the item is queued anywhere
    encoded: dict[tuple[int, int, int], bytes] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def size(self) -> int:
        return len(self.partitions) + len(self.stop)


#: merges of shared items, by the items merged: channels that fell behind by the same items (most
#: of them, as the propagator queues the same UpdateMetadata for every broker) share one merged
#: item, so it is encoded once (`encode_body`) instead of once per broker
_MERGED: OrderedDict[tuple[int, ...], tuple[tuple[Item, ...], Item]] = OrderedDict()
_MERGED_MAX = 16
_merged_lock = threading.Lock()


def merge(items: list[Item]) -> Item:
    """Consecutive items of one type as one request: later states win, a full item stays full."""
    if not all(it.shared for it in items):
        return _merge(items)
    key = tuple(id(it) for it in items)
    with _merged_lock:
        hit = _MERGED.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], items, strict=True)):
            return hit[1]
    out = _merge(items)
    out.shared = True
    with _merged_lock:
        _MERGED[key] = (tuple(items), out)  # the items held: their ids stay theirs while cached
        while len(_MERGED) > _MERGED_MAX:
            _MERGED.popitem(last=False)
    return out


def _merge(items: list[Item]) -> Item:
    out = Item(items[0].api_key)
    new: set[tuple[str, int]] = set()
    for it in items:
        assert it.api_key == out.api_key
        out.partitions.update(it.partitions)
        out.leaders.update(it.leaders)
        out.stop.update(it.stop)
        out.live_brokers = it.live_brokers or out.live_brokers
        out.full = out.full or it.full
        new |= it.is_new
    out.is_new = frozenset(new)
    return out


@dataclass(frozen=True, slots=True)
class Header:
    """The control fields every request to one broker carries."""

    controller_id: int
    controller_epoch: int
    broker_epoch: int
    is_kraft_controller: bool = True


def _by_topic(parts: dict[tuple[str, int], Any]) -> dict[str, list[tuple[int, Any]]]:
    """Topics in name order, each one's partitions in number order (grouped first: sorting 100,000
    (topic, partition) tuples costs more than sorting each topic's numbers)."""
    grouped: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for (topic, p), v in parts.items():
        grouped[topic].append((p, v))
    out: dict[str, list[tuple[int, Any]]] = {}
    for topic in sorted(grouped):
        ps = grouped[topic]
        ps.sort(key=_first)
        out[topic] = ps
    return out


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


@functools.cache
def _names(cls: type) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__)  # type: ignore[attr-defined]


def _only(cls: type, **values: Any) -> Any:
    """`cls(**values)` with only the fields this version declares (the others do not exist in it)."""
    names = _names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


#: LeaderAndIsr and UpdateMetadata partition states already encoded, keyed by class, controller epoch, IsNew and
#: partition, with the state they encode: a partition's state is the same in the requests to each of
#: its replicas (and in later full sends). Keyed by (topic, partition) and checked by identity first:
#: hashing a whole PartitionState per lookup cost more than the lookup saved.
_STATE_BYTES: dict[tuple[type, int, bool, tuple[str, int]], tuple[PartitionState, bytes]] = {}
_STATE_BYTES_MAX = 250_000


def _state_bytes(ps_cls: type, ce: int, flag: bool, s: PartitionState) -> bytes:
    """`s` as `ps_cls` encodes it (IsNew `flag`), from `_STATE_BYTES` if encoded before."""
    key = (ps_cls, ce, flag, (s.topic, s.partition))
    got = _STATE_BYTES.get(key)
    if got is not None and (got[0] is s or got[0] == s):
        return got[1]
    out = bytearray()
    _state_writer(ps_cls)(s, out, ce, flag)
    encoded = bytes(out)
    if len(_STATE_BYTES) >= _STATE_BYTES_MAX:
        _STATE_BYTES.clear()
    _STATE_BYTES[key] = (s, encoded)
    return encoded


#: Each partition-state field of LeaderAndIsr and UpdateMetadata (every version; a version uses the
#: fields it declares) as read from a PartitionState `o`, the request's controller epoch `ce` and
#: IsNew `new`: what `build_request`'s lai_state / um_state put in the entities, for `writer_from`.
_STATE_FIELDS = (
    ("topic_name", "o.topic"),
    ("partition_index", "o.partition"),
    ("controller_epoch", "ce"),
    ("leader", "o.leader"),
    ("leader_epoch", "o.leader_epoch"),
    ("isr", "o.isr"),
    ("partition_epoch", "o.partition_epoch"),
    ("zk_version", "o.partition_epoch"),
    ("replicas", "o.replicas"),
    ("adding_replicas", "o.adding"),
    ("removing_replicas", "o.removing"),
    ("is_new", "new"),
    ("leader_recovery_state", "o.leader_recovery_state"),
    ("offline_replicas", "o.offline"),
)
#: A topic's entry: its name `t`, id `tid` and its partition states, encoded (`xs`).
_TOPIC_FIELDS = (("topic_name", "t"), ("topic_id", "tid"), ("partition_states", "xs"))


def _state_writer(ps_cls: type) -> Callable[..., None]:
    return writer_from(ps_cls, _STATE_FIELDS, "ce, new")


def _topic_bytes(cls: Any, topic: str, tid: uuid.UUID, states: list[bytes]) -> bytes:
    """A TopicState of request class `cls` with its states' bytes, written without its entity: the
    name and id before the states are the same in every request (`_topic_head`)."""
    head, flexible = _topic_head(cls.TopicState, topic, tid)
    n = len(states)
    if flexible:
        return b"".join((head, _uv(n + 1), *states, b"\x00"))  # compact array, empty tag section
    return b"".join((head, _INT32.pack(n), *states))


@functools.lru_cache(maxsize=4096)
def _topic_head(ts_cls: type, topic: str, tid: uuid.UUID) -> tuple[bytes, bool]:
    """A topic entry's bytes before its partition states (its name, and id where the version has
    one), and whether the version is flexible. PartitionStates is the entry's last field in every
    version of both requests, so the head is the entry with no states, less that empty array and
    (flexible) the tag section."""
    assert [f.name for f in dataclasses.fields(ts_cls)][-1] == "partition_states"
    flexible = bool(getattr(ts_cls, "__flexible__", False))
    out = bytearray()
    writer_from(ts_cls, _TOPIC_FIELDS, "t, tid, xs")(None, out, topic, tid, [])
    tail = b"\x01\x00" if flexible else b"\x00\x00\x00\x00"
    assert out.endswith(tail)
    return bytes(out[: -len(tail)]), flexible


def build_request(item: Item, version: int, h: Header, encoded_states: bool = False) -> Any:
    """The kio request entity for `item` in `version`; with `encoded_states`, LeaderAndIsr's
    partition states and UpdateMetadata's live brokers are their bytes (`protocol.fast_writer` writes them
    as they are), shared by requests."""
    common = {
        "controller_id": h.controller_id,
        "is_k_raft_controller": h.is_kraft_controller,
        "controller_epoch": h.controller_epoch,
        "broker_epoch": h.broker_epoch,
    }
    if item.api_key == Z.LEADER_AND_ISR:
        cls = Z.LEADER_AND_ISR_REQUEST[version]

        ps_cls = cls.PartitionState
        named, ce, new = _names(ps_cls), h.controller_epoch, item.is_new
        v3, v1, v6 = "adding_replicas" in named, "is_new" in named, "leader_recovery_state" in named

        def lai_state(s: PartitionState) -> Any:
            # The fields this version has, chosen once per request (this runs per partition).
            kw: dict[str, Any] = {
                "partition_index": s.partition,
                "controller_epoch": ce,
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "isr": s.isr,
                "partition_epoch": s.partition_epoch,
                "replicas": s.replicas,
            }
            if "topic_name" in named:
                kw["topic_name"] = s.topic
            if v3:
                kw["adding_replicas"], kw["removing_replicas"] = s.adding, s.removing
            if v1:
                kw["is_new"] = (s.topic, s.partition) in new
            if v6:
                kw["leader_recovery_state"] = s.leader_recovery_state
            return ps_cls(**kw)

        def lai_state_bytes(s: PartitionState) -> Any:
            return _state_bytes(ps_cls, ce, v1 and (s.topic, s.partition) in new, s)

        leaders = tuple(
            cls.LiveLeader(broker_id=b, host_name=host, port=port)
            for b, (host, port) in sorted(item.leaders.items())
        )
        return _only(
            cls,
            **common,
            **_partition_fields(cls, item, lai_state_bytes if encoded_states else lai_state, encoded_states),
            live_leaders=leaders,
        )
    if item.api_key == Z.UPDATE_METADATA:
        cls = Z.UPDATE_METADATA_REQUEST[version]

        ps_cls = cls.PartitionState
        named, ce = _names(ps_cls), h.controller_epoch
        live = _live_broker_bytes if encoded_states else _live_broker

        def um_state(s: PartitionState) -> Any:
            kw: dict[str, Any] = {
                "partition_index": s.partition,
                "controller_epoch": ce,
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "isr": s.isr,
                "zk_version": s.partition_epoch,
                "replicas": s.replicas,
            }
            if "topic_name" in named:
                kw["topic_name"] = s.topic
            if "offline_replicas" in named:
                kw["offline_replicas"] = s.offline
            return ps_cls(**kw)

        def um_state_bytes(s: PartitionState) -> Any:
            return _state_bytes(ps_cls, ce, False, s)

        write_um = _state_writer(ps_cls)

        def um_state_direct(s: PartitionState) -> bytes:
            out = bytearray()
            write_um(s, out, ce, False)
            return bytes(out)

        # An incremental UpdateMetadata's states are the same in every merge of it that channels
        # behind by different rounds send; a full one's are encoded once with it.
        state = (um_state_direct if item.full else um_state_bytes) if encoded_states else um_state
        return _only(
            cls,
            **common,
            **_partition_fields(cls, item, state, encoded_states),
            live_brokers=tuple(live(cls, b) for b in item.live_brokers),
        )
    assert item.api_key == Z.STOP_REPLICA
    cls = Z.STOP_REPLICA_REQUEST[version]
    grouped = _by_topic(item.stop)
    return _only(
        cls,
        **common,
        delete_partitions=any(d for _, d in item.stop.values()),
        ungrouped_partitions=tuple(
            cls.PartitionV0(topic_name=t, partition_index=p) for (t, p) in sorted(item.stop)
        ),
        topics=tuple(
            cls.TopicV1(name=t, partition_indexes=tuple(p for p, _ in ps)) for t, ps in grouped.items()
        ),
        topic_states=tuple(
            cls.TopicState(
                topic_name=t,
                partition_states=tuple(
                    cls.PartitionState(partition_index=p, leader_epoch=le, delete_partition=d)
                    for p, (le, d) in ps
                ),
            )
            for t, ps in grouped.items()
        ),
    )


@functools.lru_cache(maxsize=4096)
def _live_broker_bytes(cls: Any, b: BrokerInfo) -> bytes:
    """A live broker as UpdateMetadata `cls` lists it, encoded (the same in every UpdateMetadata
    until the broker changes: 50 brokers' entities were rebuilt for each request)."""
    return encode_fast(cls.Broker, _live_broker(cls, b))


def _live_broker(cls: Any, b: BrokerInfo) -> Any:
    plain = (
        next((e for e in b.endpoints if e[3] == "PLAINTEXT"), None) or (b.endpoints or [("", "", -1, "")])[0]
    )
    return _only(
        cls.Broker,
        id=b.broker_id,
        v0_host=plain[1],
        v0_port=plain[2],
        endpoints=tuple(
            _only(
                cls.Endpoint,
                port=port,
                host=host,
                listener=listener,
                security_protocol=SECURITY_PROTOCOLS.get(proto, 0),
            )
            for listener, host, port, proto in b.endpoints
        ),
        rack=b.rack,
    )


def encode_entity(cls: type, obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    return buf.getvalue()


def encode_request_frame(
    api_key: int, version: int, correlation_id: int, client_id: str, body: bytes
) -> bytes:
    """Size, request header (v1, or v2 for flexible versions) and the encoded body, as Kafka's
    NetworkClient sends them."""
    header = _header_bytes(api_key, version, client_id)
    size = len(header) + len(body)
    return b"".join((struct.pack(">ihhi", size, api_key, version, correlation_id), header[8:], body))


@functools.lru_cache(maxsize=64)
def _header_bytes(api_key: int, version: int, client_id: str) -> bytes:
    """The request header with correlation id 0: it is the int32 after ApiKey and ApiVersion in every
    header version, the only field that changes between requests."""
    hcls = Z.request_header_class(api_key, version)
    header = hcls(request_api_key=api_key, request_api_version=version, correlation_id=0, client_id=client_id)
    return encode_entity(hcls, header)


# An UpdateMetadata goes to every ZK-mode broker with the same content but each broker's own epoch.
# Its body is encoded once and the 8-byte BrokerEpoch patched per broker: a full UpdateMetadata of
# 100,000 partitions costs ~0.3 s of CPU to build and encode, once instead of once per broker.
_EPOCH_AT: dict[tuple[int, int], int | None] = {}
_shared_lock = threading.Lock()


def _epoch_offset(api_key: int, version: int) -> int | None:
    """Where BrokerEpoch sits in this version's body (it follows fixed-size fields only), or None."""
    key = (api_key, version)
    if key not in _EPOCH_AT:
        cls = Z.request_class(api_key, version)
        at: int | None = None
        if "broker_epoch" in cls.__dataclass_fields__:  # type: ignore[attr-defined]
            a = encode_entity(cls, build_request(Item(api_key), version, Header(1, 1, 0x0102030405060708)))
            b = encode_entity(cls, build_request(Item(api_key), version, Header(1, 1, 0x1112131415161718)))
            at = next(i for i in range(len(a)) if a[i] != b[i])
        _EPOCH_AT[key] = at
    return _EPOCH_AT[key]


def encode_body(item: Item, version: int, h: Header, shared: bool = False) -> bytes:
    """The request body's bytes; a `shared` item (one object sent to many brokers) is encoded once."""
    cls = Z.request_class(item.api_key, version)
    if not shared:
        with bulk(item.size()):
            return encode_fast(cls, build_request(item, version, h, encoded_states=True))
    key = (version, h.controller_id, h.controller_epoch)
    with _shared_lock:  # one channel encodes, the others wait for its bytes
        body = item.encoded.get(key)
        if body is None:
            with bulk(item.size()):
                body = encode_fast(
                    cls,
                    build_request(
                        item, version, dataclasses.replace(h, broker_epoch=-1), encoded_states=True
                    ),
                )
            item.encoded[key] = body
    at = _epoch_offset(item.api_key, version)
    if at is None:
        return body
    return body[:at] + struct.pack(">q", h.broker_epoch) + body[at + 8 :]


def bulk(size: int) -> AbstractContextManager[None]:
    """`migrator.bulk.without_gc` for a request of `size` partitions, if it is large: a full request
    allocates an entity per partition and topic that lives until it is encoded, and the collector's
    rescans of the heap they grow cost more than the build (measured: ~2/3 of a broker's apply of a
    100,000-partition UpdateMetadata)."""
    return without_gc() if size >= BULK else contextlib.nullcontext()


def decode_response_frame(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """A response (without its size) → (correlation id, kio response). Raises ValueError on garbage."""
    try:
        hdr, pos = entity_reader(Z.response_header_class(api_key, version))(payload, 0)
        body, size = entity_reader(Z.response_class(api_key, version))(payload, pos)
    except Exception as e:  # kio raises its DecodeError family, IndexError, ValueError on odd input
        raise ValueError(f"malformed response: {type(e).__name__}: {e}") from None
    if pos + size != len(payload):
        raise ValueError(f"{len(payload) - pos - size} bytes after the response body")
    return int(hdr.correlation_id), body


def response_errors(api_key: int, body: Any) -> tuple[int, list[tuple[str, int, int]]]:
    """(top-level error, [(topic or topic id, partition, error)] for each partition that failed)."""
    # Every partition's entry is there, nearly all with error 0: only a failed one is named (a topic
    # id's text for each partition was a sixth of the propagation's CPU under AlterPartition load).
    failed: list[tuple[str, int, int]] = []
    if api_key == Z.LEADER_AND_ISR and hasattr(body, "topics"):
        for t in body.topics:
            failed += [
                (str(t.topic_id), int(p.partition_index), int(p.error_code))
                for p in t.partition_errors
                if p.error_code
            ]
    elif api_key in (Z.LEADER_AND_ISR, Z.STOP_REPLICA):
        failed += [
            (p.topic_name, int(p.partition_index), int(p.error_code))
            for p in body.partition_errors
            if p.error_code
        ]
    return int(body.error_code), failed


def _partition_fields(cls: Any, item: Any, state: Callable[[Any], Any], encoded: bool) -> dict[str, Any]:
    """LeaderAndIsr's and UpdateMetadata's partitions: ungrouped (old versions) and by topic (new);
    `encoded`: `state` gives bytes, and each topic is its bytes too (no entity per topic)."""
    out: dict[str, Any] = {"type": Z.TYPE_FULL if item.full else Z.TYPE_INCREMENTAL}
    if "topic_states" not in cls.__dataclass_fields__:  # old versions: one ungrouped array
        out["ungrouped_partition_states"] = tuple(state(s) for _, s in sorted(item.partitions.items()))
        return out
    if encoded:
        out["topic_states"] = tuple(
            _topic_bytes(cls, t, ps[0][1].topic_id, [state(s) for _, s in ps])
            for t, ps in _by_topic(item.partitions).items()
        )
        return out
    out["topic_states"] = tuple(
        _only(
            cls.TopicState,
            topic_name=t,
            topic_id=ps[0][1].topic_id,
            partition_states=tuple(state(s) for _, s in ps),
        )
        for t, ps in _by_topic(item.partitions).items()
    )
    return out
