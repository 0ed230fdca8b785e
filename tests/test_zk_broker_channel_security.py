"""The controller's channel to ZooKeeper-mode brokers over their inter-broker listener, secured.

Which listener (`inter.broker.listener.name`, else the one named after `security.inter.broker.protocol`)
and how (TLS, SASL PLAIN/SCRAM) come from the controller's Kafka-style properties, as Kafka 3.9's
KafkaConfig reads them. Over TCP, against the real controller and ZooKeeper: simulated ZK-mode brokers
serving an SASL_SSL (SCRAM) inter-broker listener learn the controller's image; a broker registering
no listener of that name is reported and gets nothing while the others are served; a wrong password on
the controller's side is reported, retried, and recovers once the broker's credential matches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster
from prometheus_client import generate_latest
from tls_certs import Certs, make_certs

from migrator import commands
from migrator.commands.config import load_config
from migrator.controller.managers.change import AdminChange
from migrator.controller.managers.scram import scram_credential
from migrator.controller.network.listener_config import listener_specs, set_default_properties
from migrator.controller.security.client_security import ClientSecurity
from migrator.controller.security.scram_server import scram_credential as server_credential
from migrator.controller.zk_brokers import zk_broker_messages as Z
from migrator.controller.zk_brokers.inter_broker import (
    InterBroker,
    inter_broker_config,
    inter_broker_endpoint,
)
from migrator.controller.zk_brokers.zk_broker_channel import BrokerChannel, ZkBrokerTarget, wait_until
from migrator.controller.zk_brokers.zk_broker_requests import BrokerInfo, Header, Item, PartitionState
from migrator.errors import BadInputError
from migrator.metrics import MigrationMetrics
from migrator.model import Broker, Endpoint
from zk_fixtures.broker_sim import BrokerSimulator
from zk_fixtures.simulated_broker import listeners_of
from zk_fixtures.zk_broker_server import ZkBrokerCache, ZkBrokerServer

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _broker(*endpoints: tuple[str, int, str]) -> Broker:
    return Broker(
        id=1,
        endpoints=[
            Endpoint(listener=n, host=f"h-{n.lower()}", port=p, security_protocol=s) for n, p, s in endpoints
        ],
    )


BROKER = _broker(("PLAINTEXT", 9092, "PLAINTEXT"), ("SSL", 9093, "SSL"), ("REPLICATION", 9094, "SASL_SSL"))


# -- which listener, and how: the controller's properties -------------------------------------------


def test_the_listener_named_by_inter_broker_listener_name_with_its_mapped_protocol(tmp_path):
    props = {
        "inter.broker.listener.name": "replication",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,REPLICATION:SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.replication.scram-sha-512.sasl.jaas.config": f'{SCRAM} required username="ib" password="pw";',
        "listener.name.replication.ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.truststore.location": "/not/this/one.pem",
    }
    inter = inter_broker_config(props)
    assert inter.listener_name == "REPLICATION" and inter.protocol == "SASL_SSL"
    sec = inter.security
    assert (sec.sasl_mechanism, sec.username, sec.password) == ("SCRAM-SHA-512", "ib", "pw")
    assert sec.ssl_cafile == str(tmp_path / "ca.pem")  # listener.name.<name>. first
    assert sec.ssl_check_hostname  # ssl.endpoint.identification.algorithm defaults to https
    assert "pw" not in repr(inter)
    assert inter_broker_endpoint(BROKER, inter) == ("h-replication", 9094)


def test_without_a_name_the_listener_is_named_after_security_inter_broker_protocol():
    assert inter_broker_config({}) == InterBroker("PLAINTEXT")
    assert inter_broker_endpoint(BROKER, inter_broker_config({})) == ("h-plaintext", 9092)
    ssl_only = inter_broker_config(
        {"security.inter.broker.protocol": "SSL", "ssl.endpoint.identification.algorithm": ""}
    )
    assert (ssl_only.listener_name, ssl_only.protocol) == ("SSL", "SSL")
    assert not ssl_only.security.ssl_check_hostname and not ssl_only.security.sasl
    assert inter_broker_endpoint(BROKER, ssl_only) == ("h-ssl", 9093)
    plain = inter_broker_config(
        {
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN} required username="a" password="b" user_a="b";',
        }
    )
    assert (plain.listener_name, plain.security.sasl_mechanism, plain.security.username) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "a",
    )
    # By name only (Kafka's broker.node(listenerName)): no SASL_PLAINTEXT listener, however the others map.
    assert "no SASL_PLAINTEXT endpoint" in str(inter_broker_endpoint(BROKER, plain))


def test_a_broker_without_the_listener_or_with_another_protocol_for_it_has_no_endpoint():
    inter = InterBroker(
        "REPLICATION", inter_broker_config({"security.inter.broker.protocol": "SSL"}).security
    )
    why = inter_broker_endpoint(_broker(("PLAINTEXT", 9092, "PLAINTEXT"), ("INTERNAL", 9095, "SSL")), inter)
    assert why == "no REPLICATION endpoint among ['PLAINTEXT', 'INTERNAL']"
    why = inter_broker_endpoint(_broker(("REPLICATION", 9094, "SASL_SSL")), inter)
    assert why == "its REPLICATION listener is SASL_SSL, the controller's inter-broker protocol is SSL"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
        ),
        (
            {"inter.broker.listener.name": "INTERNAL"},
            "Listener with name INTERNAL defined in inter.broker.listener.name not found in "
            "listener.security.protocol.map.",
        ),
        ({"security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol=TLS"),
        ({"security.inter.broker.protocol": "SASL_SSL"}, "sasl.mechanism.inter.broker.protocol=GSSAPI"),
        (
            {"security.inter.broker.protocol": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "PLAIN"},
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
        ),
        (
            {
                "security.inter.broker.protocol": "SSL",
                "ssl.truststore.type": "JKS",
                "ssl.truststore.location": "/x.jks",
            },
            "ssl.truststore.type=JKS",
        ),
        ({"controller.socket.timeout.ms": "0"}, "controller.socket.timeout.ms='0'"),
        ({"controller.socket.timeout.ms": "soon"}, "controller.socket.timeout.ms='soon'"),
    ],
)
def test_bad_inter_broker_settings_are_refused_when_the_config_is_read(tmp_path, props, message):
    with pytest.raises(BadInputError, match=message.replace(".", r"\.").replace("(", r"\(")):
        inter_broker_config(props)
    path = tmp_path / "controller.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    with pytest.raises(BadInputError, match="^--config: "):
        load_config(str(path))


def test_controller_socket_timeout_ms_bounds_each_brokers_answer() -> None:
    assert inter_broker_config({}).request_timeout_s == 30.0  # Kafka's default
    assert inter_broker_config({"controller.socket.timeout.ms": "1500"}).request_timeout_s == 1.5


# -- one channel against one broker's secured listener ------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


TID = uuid.uuid4()
PARTS = {("t", p): PartitionState("t", p, TID, 1, 1, (1, 2), 1, (1, 2)) for p in range(3)}
LIVE = (BrokerInfo(1, (("IB", "127.0.0.1", 1, "SASL_SSL"),)), BrokerInfo(2, ()))


def _full_state(broker_id: int, install: Callable[[list[Item], int], None]) -> None:
    install(
        [
            Item(Z.UPDATE_METADATA, partitions=dict(PARTS), live_brokers=LIVE, full=True),
            Item(Z.LEADER_AND_ISR, partitions=dict(PARTS), full=True),
        ],
        10,
    )


def _served(protocol: str, mechanism: str | None, certs: Certs) -> tuple[ZkBrokerCache, ZkBrokerServer]:
    """A broker whose listener IB is `protocol`, configured as in its server.properties."""
    props = {"listener.security.protocol.map": f"IB:{protocol}", "ssl.keystore.location": str(certs.server)}
    if mechanism is not None:
        props["sasl.enabled.mechanisms"] = mechanism
        props["listener.name.ib.plain.sasl.jaas.config"] = f'{PLAIN} required user_ib="pw";'
    creds = {
        ("ib", m): server_credential("ib", m, "pw", b"salt-ib", 4096)
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    }
    handler = SimpleNamespace(image=SimpleNamespace(scram_credentials=creds))
    security = listener_specs(props, handler, "IB://127.0.0.1:0")[0].security
    cache = ZkBrokerCache(1, lambda: 7)
    return cache, ZkBrokerServer(cache, security=security).start()


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("SSL", None),
        ("SASL_SSL", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_the_channel_speaks_tls_and_sasl_and_redoes_the_handshake_on_reconnect(certs, protocol, mechanism):
    cache, server = _served(protocol, mechanism, certs)
    sec = ClientSecurity(
        protocol,
        ssl_cafile=str(certs.ca),
        ssl_check_hostname=True,
        sasl_mechanism=mechanism,
        username="ib" if mechanism else None,
        password="pw" if mechanism else None,
    )
    target = ZkBrokerTarget(
        1, 7, *server.address, {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}
    )
    header = lambda t: Header(3000, 5, t.broker_epoch)  # noqa: E731
    ch = BrokerChannel(target, header, _full_state, request_timeout=2, backoff_ms=20, security=sec).start()
    try:
        assert wait_until(lambda: len(cache.partitions) == 3 and ch.idle(), 10), ch.status
        assert cache.roles[("t", 0)] == (True, 1, 1) and ch.status.connects == 1
        logins = server.security.authenticated["authenticated"] if server.security else 0
        assert logins == (1 if mechanism else 0)
        with cache.lock:
            cache.partitions.clear()
        server.drop_connections()  # the broker restarts its listener: the next send fails, then
        ch.enqueue([Item(Z.UPDATE_METADATA, partitions=dict(PARTS), live_brokers=LIVE)], 11)
        # reconnect, handshake again, and the full state
        assert wait_until(lambda: len(cache.partitions) == 3 and ch.status.connects == 2, 10), ch.status
        assert server.security is not None and not server.security.refused
        assert server.security.authenticated["authenticated"] == (2 if mechanism else 0)
    finally:
        ch.stop()
        server.stop()


def test_an_untrusted_broker_certificate_is_reported_and_retried(certs, tmp_path):
    other_ca = make_certs(tmp_path / "other").ca  # the controller trusts another CA
    cache, server = _served("SSL", None, certs)
    sec = ClientSecurity("SSL", ssl_cafile=str(other_ca), ssl_check_hostname=True)
    target = ZkBrokerTarget(
        1, 7, *server.address, {Z.LEADER_AND_ISR: 7, Z.UPDATE_METADATA: 8, Z.STOP_REPLICA: 4}
    )
    ch = BrokerChannel(
        target, lambda t: Header(3000, 5, 7), _full_state, request_timeout=2, backoff_ms=20, security=sec
    ).start()
    try:
        assert wait_until(lambda: ch.status.errors >= 2, 10), ch.status
        assert "CERTIFICATE_VERIFY_FAILED" in (ch.status.last_error or "") and ch.status.connects == 0
        assert cache.requests == {}
    finally:
        ch.stop()
        server.stop()


# -- over TCP: the controller, ZooKeeper, and brokers serving SASL_SSL ---------------------------------


def _controller_props(certs: Certs, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "inter.broker.listener.name": "REPLICATION",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,REPLICATION:SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.replication.{mechanism.lower()}.sasl.jaas.config": (
            f'{SCRAM} required username="{user}" password="{password}";'
        ),
        "listener.name.replication.ssl.truststore.location": str(certs.ca),
    }


def _broker_props(certs: Certs, mechanism: str) -> dict[str, str]:
    """The brokers' side, as in their server.properties."""
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,REPLICATION:SASL_SSL,INTERNAL:SASL_SSL",
        "ssl.keystore.location": str(certs.server),
        "sasl.enabled.mechanisms": mechanism,
    }


@contextmanager
def secured_controller_and_brokers(
    zk: KazooClient,
    zk_connect: str,
    tmp_path: Path,
    *,
    wrong_password: bool = False,
    odd_broker: bool = False,
) -> Iterator[dict[str, Any]]:
    """The controller with an SASL_SSL (SCRAM) inter-broker listener configured, and simulated brokers
    serving it (with `odd_broker`, the first one names its inter-broker listener INTERNAL instead)."""
    certs = make_certs(tmp_path / "certs")
    metrics = MigrationMetrics()
    with cluster(zk, zk_connect) as generated:
        (user, mechanism), password = sorted(generated.secrets.scram_passwords.items())[0]
        set_default_properties(
            _controller_props(certs, mechanism, user, "not-" + password if wrong_password else password)
        )
        running = None
        sim = None
        try:
            running = commands.start_controller(
                zk_connect,
                str(tmp_path / "meta"),
                listen="127.0.0.1:0",
                yes=True,
                broker_wait_timeout=60,
                session_timeout_ms=3000,
                metrics=metrics,
            )
            listeners, racks = listeners_of(generated.image)
            ids = sorted(generated.image.brokers)
            odd = ids[0] if odd_broker else None
            if odd is not None:
                listeners[odd] = [x for x in listeners[odd] if x.name != "REPLICATION"]
            sim = BrokerSimulator(
                running.address,
                zk_connect,
                generated.image.cluster_id or "",
                ids,
                racks=racks,
                listeners=listeners,
                interval_s=0.3,
                own_timeout_s=2.0,
                inter_broker=True,
                inter_broker_listener="REPLICATION",
                inter_broker_props=_broker_props(certs, mechanism),
                inter_broker_names={odd: "INTERNAL"} if odd is not None else None,
            )
            sim.start()
            service = running.service
            assert service is not None
            assert running.wait_until(
                lambda r: not service.soft_start and service.zk_propagator is not None, 90
            ), running.error
            yield {
                "running": running,
                "sim": sim,
                "metrics": metrics,
                "odd": odd,
                "user": user,
                "mechanism": mechanism,
                "password": password,
                "log_dir": str(tmp_path / "meta"),
            }
        finally:
            if sim is not None:
                sim.stop()
            if running is not None:
                running.stop()
            set_default_properties({})


def _image_differences(running: Any, sim: BrokerSimulator, brokers: set[int]) -> list[str]:
    """How the caches of `brokers` differ from the controller's image (partitions, live brokers)."""
    service = running.service
    with service.lock:
        image = service.image
        want = {
            (t.name, p): (x.leader, x.leader_epoch, tuple(x.isr), x.partition_epoch, tuple(x.replicas))
            for t in image.topics.values()
            for p, x in t.partitions.items()
        }
        live = {b.id for b in image.brokers.values() if not b.fenced}
    out = []
    for bid in sorted(brokers):
        cache = sim.caches[bid]
        with cache.lock:
            have = {k: tuple(v) for k, v in cache.partitions.items()}
            known = set(cache.live_brokers)
            roles = set(cache.roles)
        if have != want:
            out.append(f"broker {bid}: {len(want.keys() ^ have.keys())} keys differ, {len(have)}/{len(want)}")
        if known != live:
            out.append(f"broker {bid}: live {sorted(known)} != {sorted(live)}")
        if roles != {k for k, s in want.items() if bid in s[4]}:
            out.append(f"broker {bid}: replicates {len(roles)} partitions, not the image's")
    return out


def _converged(running: Any, sim: BrokerSimulator, brokers: set[int], timeout: float = 40.0) -> None:
    last: list[str] = ["not checked"]

    def check() -> bool:
        last[:] = _image_differences(running, sim, brokers)
        return not last

    assert wait_until(check, timeout), last


@pytest.mark.zk
def test_sasl_ssl_scram_brokers_follow_and_one_without_the_listener_is_reported(zk, zk_connect, tmp_path):
    with secured_controller_and_brokers(zk, zk_connect, tmp_path, odd_broker=True) as ctx:
        running, sim, odd = ctx["running"], ctx["sim"], ctx["odd"]
        service = running.service
        propagator = service.zk_propagator
        served = set(sim.brokers) - {odd}
        _converged(running, sim, served)
        assert sorted(propagator.channels) == sorted(served)
        for bid in served:
            cache = sim.caches[bid]
            assert cache.requests.get("LeaderAndIsr", 0) >= 1 and cache.requests.get("UpdateMetadata", 0) >= 1
            assert cache.controller_id == service.core.config.node_id
        # Every channel went through TLS and SCRAM on the brokers' REPLICATION listener.
        for bid in served:
            security = sim.servers[bid].security
            assert security is not None and security.protocol == "SASL_SSL"
            assert security.authenticated["authenticated"] >= 1 and not security.refused
        assert all(s.connected and s.connects >= 1 and s.last_error is None for s in propagator.status())

        # The broker registering INTERNAL only: reported, no channel, nothing sent.
        assert odd not in propagator.channels and sim.caches[odd].requests == {}
        rows = {r["broker_id"]: r for r in propagator.status_rows()}
        assert rows[odd]["unreachable"] and not rows[odd]["connected"]
        assert rows[odd]["last_error"].startswith("no REPLICATION endpoint among [")
        assert "'INTERNAL'" in rows[odd]["last_error"]

        # The others go on: a topic created through the admin path reaches them over SASL_SSL.
        commands.admin(
            zk_connect,
            ctx["log_dir"],
            AdminChange(kind="create-topic", topic="ib-secure", partitions=2, replication_factor=2),
        )
        assert service.wait_for(lambda img: "ib-secure" in img.topics, 20)
        _converged(running, sim, served)
        assert sim.caches[odd].requests == {}

        def reported() -> list[dict] | None:
            got = commands.status(zk_connect, ctx["log_dir"]).zk_broker_channels
            return got if got and len(got) == len(sim.brokers) else None

        assert wait_until(lambda: reported() is not None, 10)
        status_rows = {r["broker_id"]: r for r in reported() or []}
        assert status_rows[odd]["last_error"] == rows[odd]["last_error"]
        metrics = generate_latest(ctx["metrics"].registry).decode()
        assert f'zk2kraft_zk_broker_channel_unreachable{{broker_id="{odd}"}} 1.0' in metrics
        for bid in served:
            assert f'zk2kraft_zk_broker_channel_connected{{broker_id="{bid}"}} 1.0' in metrics
            assert f'zk2kraft_zk_broker_channel_unreachable{{broker_id="{bid}"}} 0.0' in metrics


@pytest.mark.zk
def test_a_wrong_sasl_password_is_reported_retried_and_recovers(zk, zk_connect, tmp_path):
    with secured_controller_and_brokers(zk, zk_connect, tmp_path, wrong_password=True) as ctx:
        running, sim = ctx["running"], ctx["sim"]
        service = running.service
        propagator = service.zk_propagator
        assert wait_until(lambda: all(s.errors >= 2 for s in propagator.status()), 30), (
            propagator.status_rows()
        )
        assert sorted(propagator.channels) == sorted(sim.brokers)
        for s in propagator.status():
            assert not s.connected and s.connects == 0 and s.stopped is None
            assert f"SASL authentication refused by broker {s.broker_id}" in (s.last_error or "")
        assert all(c.requests == {} for c in sim.caches.values())
        assert running.error is None and running.thread.is_alive()  # reported, not a crash

        def reported() -> bool:
            rows = commands.status(zk_connect, ctx["log_dir"]).zk_broker_channels or []
            return len(rows) == len(sim.brokers) and all("SASL" in (r.get("last_error") or "") for r in rows)

        assert wait_until(reported, 10), commands.status(zk_connect, ctx["log_dir"]).zk_broker_channels
        secret = "not-" + ctx["password"]
        assert secret not in str(propagator.status_rows())

        # The operator gives the user the password the controller uses (kafka-configs, through the
        # controller, dual-written to /config/users where the brokers read it): the retries succeed.
        spec = scram_credential(ctx["user"], ctx["mechanism"], secret, 4096)
        commands.admin(zk_connect, ctx["log_dir"], AdminChange(kind="upsert-scram", scram=spec))
        _converged(running, sim, set(sim.brokers))
        assert all(s.connected and s.connects >= 1 for s in propagator.status())
