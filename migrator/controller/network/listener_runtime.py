"""The service on the wire: the protocol server started around a ControllerService, and the
translation between the wire layer's messages and the core's requests and replies.

The wire layer (`messages`, `server`) is imported here only, and only when a listener runs, so the
decisions and the service stay usable (and testable) without it.
"""

from __future__ import annotations

from typing import Any, Protocol

from migrator.controller.apis import authorizer_requests
from migrator.controller.protocol.kio_apis import NATIVE
from migrator.errors import BadInputError

__all__ = ["IN_PROCESS", "RunningServer", "dispatch", "parse_listen", "start_server"]

#: `listen` value for a controller served in this process only (tests, an in-process broker
#: simulator): the service runs, no socket is bound.
IN_PROCESS = "in-process"


class RunningServer(Protocol):
    address: tuple[str, int]

    def stop(self) -> None: ...


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9093`); port 0 picks a free one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise BadInputError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:9093")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def start_server(handler: Any, listen: str) -> RunningServer:
    """Bind the controller protocol server on `listen` and serve `handler` on its own threads."""
    if listen == IN_PROCESS:
        return _InProcess()
    if "://" in listen:  # Kafka's `listeners` value: every listener with its security (listener_config)
        from migrator.controller.network.listener_config import start_listeners

        running = start_listeners(handler, listen)
        # KRaft brokers follow the log on these listeners too, named as `listeners` names them
        _attach_raft(running.servers, handler, running.servers[0].security.name)
        return running
    host, port = parse_listen(listen)
    try:
        from migrator.controller.network.server import ControllerServer
    except ModuleNotFoundError as e:  # pragma: no cover - only while the wire layer is missing
        raise BadInputError(
            f"the controller protocol listener is not available in this build ({e})"
        ) from None
    try:
        from migrator.controller.network.listener_config import connection_limits, default_properties

        server = ControllerServer(handler, host, port, **connection_limits(default_properties()))
        _attach_raft([server], handler)
        start = getattr(server, "start", None)
        if callable(start):
            start()
    except OSError as e:
        raise BadInputError(f"cannot listen on {listen}: {e.strerror or e}") from None
    return _Running(server)


def _attach_raft(servers: list[Any], handler: Any, name: str = "CONTROLLER") -> None:
    """Make the listeners the Raft leader of the handler's metadata log (KRaft brokers fetch it): one
    leader for all, so DescribeQuorum names every observer whichever listener it fetches on."""
    from migrator.controller.raft.raft_leader import RAFT_VERSIONS, RaftLeader
    from migrator.kraft.log import MetadataLog

    mlog = getattr(handler, "log", None)
    if not isinstance(mlog, MetadataLog) or not mlog.writable:
        return
    meta = mlog.meta
    leader = RaftLeader(
        mlog,
        node_id=meta.node_id if meta is not None else -1,
        cluster_id=meta.cluster_id if meta is not None else None,
        epoch=lambda: max(int(getattr(handler, "epoch", -1)), mlog.latest_epoch, 0),
    )
    leader.soft_start = lambda: bool(getattr(handler, "soft_start", False))
    refused = getattr(handler, "refused", None)
    if refused is not None:
        leader.on_refused = refused.refuse
    first = servers[0]
    host, port = getattr(getattr(first, "security", None), "advertised", None) or first.address[:2]
    leader.endpoint = (name, host, port)
    for server in servers:
        server.attach_raft(leader, RAFT_VERSIONS)


class _InProcess:
    address: tuple[str, int] = (IN_PROCESS, 0)

    def stop(self) -> None:
        pass


class _Running:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.address: tuple[str, int] = tuple(server.address)[:2]  # type: ignore[assignment]

    def stop(self) -> None:
        for name in ("stop", "close", "shutdown"):
            fn = getattr(self.server, name, None)
            if callable(fn):
                fn()
                return


#: What this controller serves: apiKey -> (min, max) version.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    18: (0, 3),  # ApiVersions
    56: (0, 3),  # AlterPartition
    62: (0, 3),  # BrokerRegistration
    63: (0, 1),  # BrokerHeartbeat
    10_001: (0, 0),  # AlterReplicaState (KIP-589; outside Kafka's range)
    58: (0, 0),  # Envelope: a broker's forwarded admin request, answered by controller.apis.envelope
}
# Metadata, CreateTopics, DeleteTopics: kio's entities, answered by controller.apis.admin_api
SUPPORTED_VERSIONS.update({k: (a.min_version, a.max_version) for k, a in NATIVE.items()})


def dispatch(service: Any, api_key: int, api_version: int, request: Any, client_id: str | None) -> Any:
    """Wire request → core request → service → core reply → wire response."""
    from migrator.controller import core
    from migrator.controller.protocol import messages as M
    from migrator.kraft.records import kafka_to_uuid, uuid_to_kafka

    if api_key == M.API_VERSIONS:
        return M.ApiVersionsResponse(
            0, [M.ApiVersionRange(k, lo, hi) for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())]
        )
    if api_key == M.ENVELOPE:
        from migrator.controller.apis import envelope

        # the inner request comes back here, run as the forwarded client
        return envelope.handle(service, api_version, request, dispatch)
    if api_key in NATIVE:
        from migrator.controller.apis import admin_api

        # each topic/config the caller may not act on is refused before the handler sees the request
        return authorizer_requests.guard(service, api_key, api_version, request, admin_api.handle)
    if api_key == M.BROKER_REGISTRATION:
        r = request
        reg = service.register(
            core.Registration(
                broker_id=r.broker_id,
                cluster_id=r.cluster_id,
                incarnation_id=uuid_to_kafka(r.incarnation_id),
                listeners=tuple(
                    core.Listener(li.name, li.host, li.port, li.security_protocol) for li in r.listeners
                ),
                features={f.name: (f.min_supported_version, f.max_supported_version) for f in r.features},
                rack=r.rack,
                is_migrating_zk_broker=r.is_migrating_zk_broker,
                log_dirs=tuple(uuid_to_kafka(d) for d in r.log_dirs),
                previous_broker_epoch=r.previous_broker_epoch,
            )
        )
        return M.BrokerRegistrationResponse(reg.error, reg.broker_epoch)
    if api_key == M.BROKER_HEARTBEAT:
        r = request
        hb = service.heartbeat(
            core.Heartbeat(
                r.broker_id, r.broker_epoch, r.current_metadata_offset, r.want_fence, r.want_shut_down
            )
        )
        return M.BrokerHeartbeatResponse(hb.error, hb.is_caught_up, hb.is_fenced, hb.should_shut_down)
    if api_key == M.ALTER_PARTITION:
        r = request
        ap = service.alter_partition(
            core.AlterPartition(
                r.broker_id,
                r.broker_epoch,
                tuple(
                    core.TopicAlter(
                        t.topic_name,
                        uuid_to_kafka(t.topic_id) if t.topic_id is not None else None,
                        tuple(
                            core.PartitionAlter(
                                p.partition_index,
                                p.leader_epoch,
                                tuple(
                                    core.IsrMember(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs
                                ),
                                p.partition_epoch,
                                p.leader_recovery_state,
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in r.topics
                ),
                api_version,
            )
        )
        by_key = {(t.topic_name, t.topic_id): t for t in r.topics}
        topics = []
        for t in ap.topics:
            asked = by_key.get((t.name, kafka_to_uuid(t.topic_id) if t.topic_id else None))
            topics.append(
                M.AlterPartitionTopicResponse(
                    t.name if asked is None else asked.topic_name,
                    kafka_to_uuid(t.topic_id) if t.topic_id else None,
                    [
                        M.AlterPartitionPartitionResponse(
                            p.partition,
                            p.error,
                            p.leader,
                            p.leader_epoch,
                            list(p.isr),
                            p.leader_recovery_state,
                            p.partition_epoch,
                        )
                        for p in t.partitions
                    ],
                )
            )
        return M.AlterPartitionResponse(ap.error, topics)
    if api_key == M.ALTER_REPLICA_STATE:
        r = request
        ars = service.alter_replica_state(
            core.AlterReplicaState(
                r.broker_id,
                r.broker_epoch,
                r.event_type,
                r.event_reason,
                tuple((t.name, tuple(t.partitions)) for t in r.topics),
            )
        )
        return M.AlterReplicaStateResponse(
            ars.error,
            [
                M.AlterReplicaStateTopicResponse(
                    name, [M.AlterReplicaStatePartitionResponse(pid, err) for pid, err in parts]
                )
                for name, parts in ars.topics
            ],
        )
    raise ValueError(f"apiKey {api_key} is not served by the controller")
