"""The cluster generator, its load into a real ZooKeeper, live broker sessions and the fixtures CLI."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import time
from collections import Counter

import pytest
from kazoo.client import KazooClient

from cli.main import run
from migrator.errors import BadInputError
from migrator.zk import codec, paths
from migrator.zk.layout import image_from_tree, znodes_from_image
from migrator.zk.reader import read_tree
from zk_fixtures.brokers import BrokerSessions, run_brokers_process
from zk_fixtures.generator import (
    SANITIZED_QUOTA_USER,
    ClusterSpec,
    assign_replicas,
    generate,
    load_cluster,
    rack_alternated,
)

SMALL = ClusterSpec(seed=7, brokers=5, racks=3, topics=15, partitions=4, replication_factor=3)


def _znodes(spec: ClusterSpec) -> dict[str, bytes]:
    g = generate(spec)
    return znodes_from_image(g.image, g.control)


def _wait_until(predicate, timeout: float, what: str) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# --- generation, no server -------------------------------------------------------------------------
def test_same_seed_gives_byte_identical_znodes_and_other_seeds_do_not():
    first = _znodes(SMALL)
    assert list(first.items()) == list(_znodes(SMALL).items())  # same order, same bytes
    other = _znodes(SMALL.model_copy(update={"seed": 8}))
    assert other != first
    assert generate(SMALL).secrets == generate(SMALL).secrets
    assert generate(SMALL).secrets != generate(SMALL.model_copy(update={"seed": 8})).secrets


def test_every_feature_is_generated():
    g = generate(SMALL)
    image, control = g.image, g.control
    assert image.cluster_id and len(image.brokers) == 5
    assert {b.rack for b in image.brokers.values()} == {"rack-a", "rack-b", "rack-c"}
    assert image.partition_count() == 15 * 4
    legacy = [t for t in image.topics.values() if t.topic_id is None]
    assert len(legacy) == SMALL.legacy_topics and {t.json_version for t in legacy} == {1, 2}
    parts = [p for t in image.topics.values() for p in t.partitions.values()]
    assert sum(p.leader == -1 for p in parts) == SMALL.offline_partitions
    assert any(p.leader == -1 and p.isr == [] for p in parts)
    assert any(p.leader_recovery_state == 1 for p in parts)
    assert sum(p.partition_epoch > 0 for p in parts) == SMALL.epoch_bumps
    moving = [p for p in parts if p.adding_replicas]
    assert len(moving) == len(image.reassignments) == SMALL.reassignments
    for r in image.reassignments:
        p = image.topics[r.topic].partitions[r.partition]
        assert p.replicas == r.replicas + p.removing_replicas
        original = set(p.replicas) - set(p.adding_replicas)
        assert set(p.adding_replicas) == set(r.replicas) - original and len(p.adding_replicas) == 1
        assert set(p.removing_replicas) == original - set(r.replicas)
    assert set(image.pending_deletions) <= set(image.topics) and len(image.pending_deletions) == 1
    assert ("BROKER", "") in image.configs  # <default>
    assert sum(k[0] == "BROKER" for k in image.configs) == 1 + SMALL.broker_configs
    assert sum(k[0] == "TOPIC" for k in image.configs) == SMALL.topic_configs
    kinds = Counter(tuple(sorted(q.entity)) for q in image.client_quotas)
    assert set(kinds) == {("user",), ("client-id",), ("client-id", "user"), ("ip",)}
    defaults = [q.entity for q in image.client_quotas if None in q.entity.values()]
    assert {"user": None} in defaults and {"client-id": None} in defaults and {"ip": None} in defaults
    assert {"user": None, "client-id": None} in defaults
    assert any(q.entity.get("user") == SANITIZED_QUOTA_USER for q in image.client_quotas)
    assert {m for _, m in image.scram_credentials} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert (SANITIZED_QUOTA_USER, "SCRAM-SHA-256") in image.scram_credentials  # shares a znode with quotas
    assert {a.resource_type for a in image.acls} == {
        "TOPIC",
        "GROUP",
        "CLUSTER",
        "TRANSACTIONAL_ID",
        "DELEGATION_TOKEN",
        "USER",
    }
    assert {a.pattern_type for a in image.acls} == {"LITERAL", "PREFIXED"}
    assert len({a.key() for a in image.acls}) == len(image.acls) == SMALL.acls
    assert len(image.delegation_tokens) == SMALL.tokens
    assert (
        image.producer_id_block
        and image.producer_id_block.block_end == image.producer_id_block.block_start + 999
    )
    assert image.features is not None
    assert (
        control.controller
        and control.controller.ephemeral
        and control.controller.kraft_controller_epoch == -1
    )
    assert control.controller.broker_id in image.brokers
    assert control.controller_epoch == SMALL.controller_epoch


def test_scram_keys_and_token_hmacs_derive_from_the_secrets():
    g = generate(SMALL)
    for (user, mechanism), cred in g.image.scram_credentials.items():
        algo = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        salted = hashlib.pbkdf2_hmac(
            algo, g.secrets.scram_passwords[(user, mechanism)].encode(), cred.salt, cred.iterations
        )
        client_key = hmac.new(salted, b"Client Key", algo).digest()
        assert cred.stored_key == hashlib.new(algo, client_key).digest()
        assert cred.server_key == hmac.new(salted, b"Server Key", algo).digest()
    for token_id, mac in g.secrets.token_hmacs.items():
        assert mac == hmac.new(g.secrets.token_secret_key.encode(), token_id.encode(), "sha512").digest()
    secrets = g.secrets.strings(g.image)
    assert len(secrets) > 3 * len(g.image.scram_credentials)


def test_rack_aware_round_robin_assignment():
    import random

    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    order = rack_alternated(racks)
    assert [racks[b] for b in order] == ["a", "b", "c", "a", "b", "c"]
    assignment = assign_replicas(60, 3, racks, random.Random(3))
    for replicas in assignment:
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}  # one replica per rack
    leaders = Counter(r[0] for r in assignment)
    assert set(leaders.values()) == {10}  # leaders spread evenly
    uneven = {1: "a", 2: "a", 3: "a", 4: "b"}  # more replicas than racks: every rack used once first
    for replicas in assign_replicas(8, 3, uneven, random.Random(1)):
        assert len(set(replicas)) == 3 and {uneven[b] for b in replicas} == {"a", "b"}
    plain = assign_replicas(10, 2, {1: None, 2: None, 3: None}, random.Random(2))
    assert all(len(set(r)) == 2 for r in plain) and {r[0] for r in plain} == {1, 2, 3}


def test_bad_specs_are_one_line_errors():
    with pytest.raises(BadInputError, match="replication factor 4 is larger than 3 brokers"):
        ClusterSpec.checked(brokers=3, replication_factor=4)
    with pytest.raises(BadInputError, match="reassignments move a replica"):
        ClusterSpec.checked(brokers=3, replication_factor=3, reassignments=1)
    with pytest.raises(BadInputError, match="partitions: Input should be greater than or equal to 1"):
        ClusterSpec.checked(partitions=0)
    with pytest.raises(BadInputError, match="legacy_topics=20 exceeds the 12 topics"):
        ClusterSpec.checked(legacy_topics=20)


# --- loading into ZooKeeper -------------------------------------------------------------------------
def _all_data(zk: KazooClient, root: str = "/") -> dict[str, bytes]:
    out = {}
    for child in zk.get_children(root):
        path = ("" if root == "/" else root) + "/" + child
        out[path] = zk.get(path)[0]
        out.update(_all_data(zk, path))
    return out


@pytest.mark.zk
def test_load_writes_every_feature_and_reads_back_equal(zk, zk_connect):
    g = load_cluster(zk, SMALL)
    image = g.image
    expected = znodes_from_image(image, g.control)
    assert g.znodes_written == len(expected)
    stored = _all_data(zk)
    assert stored == expected  # plain kazoo: every znode, exact bytes, nothing else

    # Spot checks of what each feature looks like in ZooKeeper, read with plain kazoo.
    user_znode = f"/config/users/{SANITIZED_QUOTA_USER.replace('@', '%40')}"
    user_config = json.loads(stored[user_znode])["config"]
    quota = next(q for q in image.client_quotas if q.entity == {"user": SANITIZED_QUOTA_USER})
    assert set(user_config) == {"SCRAM-SHA-256", "SCRAM-SHA-512", *quota.values}
    assert "/config/users/<default>" in stored and "/config/clients/<default>" in stored
    assert "/config/users/<default>/clients/<default>" in stored and "/config/ips/<default>" in stored
    assert "/config/brokers/<default>" in stored
    assert any(p.startswith("/kafka-acl-extended/prefixed/") for p in stored)
    assert "/kafka-acl/Cluster/kafka-cluster" in stored
    assert [p for p in stored if p.startswith("/admin/delete_topics/")] == [
        f"/admin/delete_topics/{t}" for t in image.pending_deletions
    ]
    moves = json.loads(stored["/admin/reassign_partitions"])["partitions"]
    assert len(moves) == SMALL.reassignments
    assert stored["/controller_epoch"] == b"5" and zk.exists("/controller_epoch").version == 4
    assert json.loads(stored["/cluster/id"])["id"] == image.cluster_id
    assert "/feature" in stored and "/latest_producer_id_block" in stored
    assert len([p for p in stored if p.startswith("/delegation_token/tokens/")]) == SMALL.tokens
    legacy = [t for t in image.topics.values() if t.topic_id is None]
    assert all(b"topic_id" not in stored[f"/brokers/topics/{t.name}"] for t in legacy)
    assert any(b'"leader":-1' in v for p, v in stored.items() if p.endswith("/state"))
    assert any(b'"leader_recovery_state":1' in v for p, v in stored.items() if p.endswith("/state"))
    for name, p in g.bumped_partitions:
        version = zk.exists(paths.partition_state_path(name, p)).version
        assert version == image.topics[name].partitions[p].partition_epoch > 0
    # Passwords and token HMACs exist only in the generator's secrets, never in ZooKeeper.
    blob = b"\n".join(stored.values()).decode()
    assert not any(pw in blob for pw in g.secrets.scram_passwords.values())
    assert not any(base64.b64encode(mac).decode() in blob for mac in g.secrets.token_hmacs.values())

    # The project's reader and layout see exactly the generated image.
    result = image_from_tree(read_tree(zk))
    assert result.problems == []
    assert result.image == image.model_copy(update={"brokers": {}})
    assert result.control.controller_epoch == 5 and result.control.controller_epoch_zk_version == 4
    assert result.control.controller is None  # the ZK controller's /controller is its broker's session's

    with BrokerSessions(zk_connect, image, g.control) as sessions:
        live = image_from_tree(read_tree(zk))
        assert live.control.controller == g.control.controller
        owners = {zk.exists(paths.broker_path(b)).ephemeralOwner for b in image.brokers}
        assert owners == {sessions.session_id(b) for b in image.brokers} and len(owners) == len(image.brokers)
        assert zk.exists("/controller").ephemeralOwner == sessions.session_id(g.control.controller.broker_id)
        for broker_id, broker in live.image.brokers.items():
            assert broker.zk_epoch == zk.exists(paths.broker_path(broker_id)).czxid
            assert broker.model_copy(update={"zk_epoch": None}) == image.brokers[broker_id]
        assert live.image.model_copy(update={"brokers": {}}) == result.image
    assert zk.get_children("/brokers/ids") == [] and zk.exists("/controller") is None


@pytest.mark.zk
def test_load_twice_needs_exist_ok(zk):
    spec = ClusterSpec(seed=3, topics=4, partitions=2)
    load_cluster(zk, spec)
    before = _all_data(zk)
    with pytest.raises(BadInputError, match="already exists"):
        load_cluster(zk, spec)
    again = load_cluster(zk, spec, exist_ok=True)
    assert again.znodes_written == 0
    assert _all_data(zk) == before
    assert zk.exists("/controller_epoch").version == spec.controller_epoch - 1


# --- broker sessions -------------------------------------------------------------------------------
@pytest.mark.zk
def test_one_session_per_broker_stop_and_expiry(zk, zk_connect):
    spec = ClusterSpec(seed=11, brokers=3, topics=1, partitions=1)
    g = load_cluster(zk, spec)
    controller = g.control.controller.broker_id
    with BrokerSessions(zk_connect, g.image, g.control, session_timeout=4.0) as sessions:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        other = next(b for b in (1, 2, 3) if b != controller)
        sessions.stop_broker(other)  # a clean shutdown removes only that broker, at once
        assert sorted(zk.get_children("/brokers/ids")) == sorted(str(b) for b in (1, 2, 3) if b != other)

        old_owner = zk.exists(paths.broker_path(controller)).ephemeralOwner
        sessions.expire_broker(controller)

        def re_registered() -> bool:
            stat = zk.exists(paths.broker_path(controller))
            return stat is not None and stat.ephemeralOwner not in (0, old_owner)

        _wait_until(re_registered, 20, "the expired broker to register again")
        _wait_until(lambda: zk.exists("/controller") is not None, 10, "/controller to come back")
        assert sessions.reregistered == {controller: 1}
        assert zk.exists("/controller").ephemeralOwner == sessions.session_id(controller)
        assert zk.get(paths.broker_path(controller))[0] == codec.encode_broker(g.image.brokers[controller])


@pytest.mark.zk
def test_missing_brokers_ids_parent_is_a_clear_error(zk_connect):
    g = generate(ClusterSpec(seed=1, brokers=2, topics=0))
    with pytest.raises(BadInputError, match=r"/brokers/ids/1: its parent /brokers/ids does not exist"):
        BrokerSessions(zk_connect, g.image, g.control).start()


@pytest.mark.zk
def test_sigkill_of_the_brokers_process_drops_registrations_after_session_timeout(zk, zk_connect):
    spec = ClusterSpec(seed=5, brokers=3, topics=2, partitions=2)
    load_cluster(zk, spec)
    proc = run_brokers_process(zk_connect, spec, session_timeout=4.0)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        assert zk.exists("/controller").ephemeralOwner != 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # No clean close: ZooKeeper keeps the ephemerals until the 4 s sessions expire.
        assert len(zk.get_children("/brokers/ids")) == 3
        took = _wait_until(
            lambda: zk.get_children("/brokers/ids") == [] and zk.exists("/controller") is None,
            20,
            "the registrations to vanish",
        )
        assert took > 1.0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.zk
def test_sigterm_of_the_brokers_process_closes_sessions_at_once(zk, zk_connect):
    spec = ClusterSpec(seed=5, brokers=2, topics=1, partitions=1)
    load_cluster(zk, spec)
    proc = run_brokers_process(zk_connect, spec, session_timeout=30.0)
    assert len(zk.get_children("/brokers/ids")) == 2
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert zk.get_children("/brokers/ids") == []


# --- CLI -----------------------------------------------------------------------------------------------
@pytest.mark.zk
def test_cli_load_json_summary(zk, zk_connect, capsys):
    code = run(
        [
            "fixtures", "load", "--zookeeper", zk_connect, "--seed", "2", "--brokers", "4", "--racks", "2",
            "--topics", "6", "--partitions", "3", "--replication-factor", "3", "--acls", "10",
            "--scram-users", "2", "--tokens", "1", "--json",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads(out)
    spec = ClusterSpec(seed=2, brokers=4, racks=2, topics=6, partitions=3, acls=10, scram_users=2, tokens=1)
    g = generate(spec)
    assert summary["znodes_written"] == len(znodes_from_image(g.image, g.control))
    assert summary["partitions"] == 18 and summary["cluster_id"] == g.image.cluster_id
    assert _all_data(zk) == znodes_from_image(g.image, g.control)
    assert not any(secret in out for secret in g.secrets.strings(g.image))


@pytest.mark.zk
def test_cli_brokers_holds_registrations_until_sigterm(zk, zk_connect):
    import subprocess
    import sys

    flags = ["--seed", "4", "--brokers", "3", "--topics", "2", "--partitions", "2"]
    assert run(["fixtures", "load", "--zookeeper", zk_connect, *flags]) == 0
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cli.main import entry; entry()",
            "fixtures",
            "brokers",
            "--json",
            *flags,
        ],
        env={**os.environ, "ZK2KRAFT_ZOOKEEPER": zk_connect},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = json.loads(proc.stdout.readline())
        controller = generate(ClusterSpec(seed=4, brokers=3, topics=2, partitions=2)).control.controller
        assert ready == {"ready": True, "brokers": [1, 2, 3], "controller": controller.broker_id}
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        assert json.loads(zk.get("/controller")[0])["brokerid"] == controller.broker_id
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert zk.get_children("/brokers/ids") == [] and zk.exists("/controller") is None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.mark.zk
def test_cli_errors_are_one_line(zk_connect, zk_server, capsys, monkeypatch):
    assert (
        run(["fixtures", "load", "--zookeeper", zk_connect, "--brokers", "2", "--replication-factor", "3"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replication factor 3 is larger than 2 brokers" in err
    monkeypatch.setenv("ZK2KRAFT_ZOOKEEPER", zk_connect)
    assert run(["fixtures", "load", "--topics", "1", "--partitions", "1"]) == 0
    capsys.readouterr()
    assert run(["fixtures", "load", "--topics", "1", "--partitions", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zk2kraft: error: znode ") and "already exists" in err and err.count("\n") == 1
    assert run(["fixtures", "load", "--topics", "1", "--partitions", "1", "--exist-ok", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["znodes_written"] == 0


@pytest.mark.zk
def test_a_restarted_brokers_process_waits_out_its_killed_predecessor(zk, zk_connect):
    """Kafka's brokers come back after a kill -9; so does the fixture, not "/controller already exists"."""
    spec = ClusterSpec(seed=5, brokers=2, topics=1, partitions=1)
    load_cluster(zk, spec)
    first = run_brokers_process(zk_connect, spec, session_timeout=4.0)
    old_owner = zk.exists("/controller").ephemeralOwner
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    second = run_brokers_process(zk_connect, spec, session_timeout=4.0, ready_timeout=60)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        owner = zk.exists("/controller").ephemeralOwner
        assert owner not in (0, old_owner)
    finally:
        second.terminate()
        second.wait(timeout=20)


@pytest.mark.zk
def test_brokers_process_outlives_a_zookeeper_outage_and_stops_on_sigterm_during_one(tmp_path):
    """Kafka's brokers keep reconnecting through an outage and register again; so does the fixture."""
    from migrator.zk.connection import close, connect
    from zk_fixtures.server import ZkServer

    server = ZkServer(tmp_path / "zk").start()
    spec = ClusterSpec(seed=5, brokers=2, topics=1, partitions=1)
    client = connect(server.connect_string)
    proc = None
    try:
        load_cluster(client, spec)
        close(client)
        proc = run_brokers_process(server.connect_string, spec, session_timeout=4.0)
        server.stop()
        time.sleep(8)  # the outage: longer than kazoo's default retries and the session timeout
        server.start()
        client = connect(server.connect_string)
        # registered all along the way after the outage (kept or re-registered), not gone for good
        _wait_until(lambda: sorted(client.get_children("/brokers/ids")) == ["1", "2"], 30, "registrations")
        time.sleep(6)  # past the session timeout: an abandoned session would have expired by now
        assert sorted(client.get_children("/brokers/ids")) == ["1", "2"]
        assert client.exists("/controller") is not None
        close(client)
        server.stop()
        started = time.monotonic()
        proc.terminate()  # during the next outage
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - started < 10
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
