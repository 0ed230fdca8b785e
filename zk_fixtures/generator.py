"""Kafka cluster layouts for tests, demos and benchmarks: every kind of metadata a ZK-mode cluster holds.

`generate(spec)` builds the model (a `ClusterImage` plus the coordination znodes) deterministically from
the seed; `load_cluster` writes it into ZooKeeper through the layout's encoder and the bulk writer, so
the bytes are exactly what Kafka writes and no JSON is spelled out here. The secrets behind SCRAM
credentials and token HMACs are returned apart so tests can prove they never leak.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from pydantic import BaseModel, ConfigDict, Field, model_validator

from migrator.controller.zk_brokers.zk_propagator import EXAMPLE_DOMAIN
from migrator.errors import BadInputError
from migrator.model import (
    Acl,
    Broker,
    ClientQuota,
    ClusterImage,
    ConfigEntity,
    ControllerZnode,
    DelegationToken,
    Endpoint,
    FeatureRange,
    FeatureZnode,
    Partition,
    ProducerIdBlock,
    Reassignment,
    ScramCredential,
    Topic,
    ZkControlState,
)
from migrator.zk import paths
from migrator.zk.bulk_write import create_all
from migrator.zk.layout import znodes_from_image

__all__ = [
    "ClusterSpec",
    "GeneratedCluster",
    "GeneratedSecrets",
    "SANITIZED_QUOTA_USER",
    "generate",
    "load_cluster",
    "assign_replicas",
]

# A user name that ZooKeeper stores URL-encoded (`/config/users/user%40example.com`).
SANITIZED_QUOTA_USER = "user@example.com"
SCRAM_ITERATIONS = {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096}
_SCRAM_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_BASE_TIMESTAMP_MS = 1_700_000_000_000
_DAY_MS = 86_400_000

_WORDS = [
    "orders",
    "payments",
    "clicks",
    "inventory",
    "users",
    "audit",
    "metrics",
    "shipments",
    "sessions",
    "ledger",
    "alerts",
    "search",
]
_PRINCIPALS = ["User:alice", "User:bob", "User:carol", "User:svc-etl", "User:CN=app,OU=kafka"]
_HOSTS = ["*", "*", "*", "10.0.0.7", "192.168.1.20"]
# Operations Kafka accepts per resource type (AclEntry.supportedOperations).
_ACL_OPERATIONS = {
    "TOPIC": ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALL"],
    "GROUP": ["READ", "DESCRIBE", "DELETE", "ALL"],
    "CLUSTER": ["CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER"],
    "TRANSACTIONAL_ID": ["DESCRIBE", "WRITE", "ALL"],
    "DELEGATION_TOKEN": ["DESCRIBE", "ALL"],
    "USER": ["CREATE_TOKENS", "DESCRIBE_TOKENS", "ALL"],
}
_TOPIC_CONFIG_CHOICES = [
    ("retention.ms", ["3600000", "86400000", "604800000", "-1"]),
    ("cleanup.policy", ["delete", "compact", "compact,delete"]),
    ("min.insync.replicas", ["1", "2"]),
    ("segment.bytes", ["104857600", "1073741824"]),
    ("max.message.bytes", ["1048588", "5242880"]),
    ("compression.type", ["producer", "lz4", "zstd"]),
    ("message.timestamp.type", ["CreateTime", "LogAppendTime"]),
]
_BROKER_DEFAULT_CONFIGS = {
    "log.cleaner.threads": "2",
    "max.connections": "10000",
    "log.retention.ms": "604800000",
}
_BROKER_CONFIG_CHOICES = [
    ("num.io.threads", ["8", "16"]),
    ("num.network.threads", ["3", "6"]),
    ("log.cleaner.io.max.bytes.per.second", ["1.0E8", "5.0E7"]),
    ("follower.replication.throttled.rate", ["10485760", "52428800"]),
]


class ClusterSpec(BaseModel):
    """What to generate. Counts of 0 leave a feature out; the defaults exercise every feature.

    A count left out shrinks to what the cluster can hold (2 brokers get replication factor 2, one
    topic gets at most one legacy topic); a count given explicitly that does not fit is an error.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 1
    brokers: int = Field(default=4, ge=1, le=100_000)
    racks: int = Field(default=2, ge=0)  # 0: brokers register no rack
    topics: int = Field(default=12, ge=0)
    partitions: int = Field(default=3, ge=1)
    replication_factor: int = Field(default=3, ge=1)
    topic_configs: int = Field(default=4, ge=0)  # topics carrying dynamic configs
    broker_configs: int = Field(default=2, ge=0)  # brokers with their own configs, plus `<default>`
    acls: int = Field(default=24, ge=0)
    quota_users: int = Field(default=3, ge=0)
    quota_clients: int = Field(default=2, ge=0)
    quota_user_clients: int = Field(default=2, ge=0)
    quota_ips: int = Field(default=2, ge=0)
    scram_users: int = Field(default=3, ge=0)
    tokens: int = Field(default=2, ge=0)
    producer_id_block: bool = True
    pending_deletions: int = Field(default=1, ge=0)
    reassignments: int = Field(default=2, ge=0)
    offline_partitions: int = Field(default=2, ge=0)
    legacy_topics: int = Field(default=2, ge=0)  # created before Kafka 2.8: no topic_id
    recovering_fraction: float = Field(default=0.05, ge=0.0, le=1.0)  # leader_recovery_state=1
    shrunk_isr_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    epoch_bumps: int = Field(default=3, ge=0)  # state znodes rewritten so their version (epoch) > 0
    controller_epoch: int = Field(default=5, ge=1, le=1000)
    features: bool = True

    @model_validator(mode="before")
    @classmethod
    def _fit_defaults(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = dict(data)

        def value(name: str) -> int:
            v = data.get(name, cls.model_fields[name].default)
            return v if isinstance(v, int) else cls.model_fields[name].default

        def fit(name: str, limit: int) -> None:
            if name not in data:
                data[name] = max(0, min(cls.model_fields[name].default, limit))

        fit("replication_factor", value("brokers"))
        fit("racks", value("brokers"))
        fit("broker_configs", value("brokers"))
        topics = value("topics")
        for name in ("topic_configs", "pending_deletions", "legacy_topics"):
            fit(name, topics)
        total = topics * max(1, value("partitions"))
        for name in ("offline_partitions", "epoch_bumps"):
            fit(name, total)
        fit("reassignments", total if value("brokers") > value("replication_factor") else 0)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ClusterSpec:
        if self.topics and self.replication_factor > self.brokers:
            raise ValueError(
                f"replication factor {self.replication_factor} is larger than {self.brokers} brokers"
            )
        if self.racks > self.brokers:
            raise ValueError(f"{self.racks} racks for only {self.brokers} brokers")
        if self.reassignments and self.brokers <= self.replication_factor:
            raise ValueError("reassignments move a replica to a new broker: need more brokers than RF")
        total = self.topics * self.partitions
        for name in ("reassignments", "offline_partitions", "epoch_bumps"):
            if getattr(self, name) > total:
                raise ValueError(f"{name}={getattr(self, name)} exceeds the {total} partitions")
        for name in ("topic_configs", "pending_deletions", "legacy_topics"):
            if getattr(self, name) > self.topics:
                raise ValueError(f"{name}={getattr(self, name)} exceeds the {self.topics} topics")
        if self.broker_configs > self.brokers:
            raise ValueError(f"broker_configs={self.broker_configs} exceeds the {self.brokers} brokers")
        return self

    @classmethod
    def checked(cls, **values: object) -> ClusterSpec:
        """Build from operator input: a bad combination is one BadInputError line, not a traceback."""
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as e:
            errors = getattr(e, "errors", lambda: [])()
            detail = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or 'spec'}: {err['msg']}" for err in errors
            )
            raise BadInputError(f"bad cluster spec: {detail or e}") from None


class GeneratedSecrets(BaseModel):
    """Every secret the generator made up, for tests that grep zk2kraft's output for leaks.

    Passwords and token HMACs exist only here; SCRAM salts and keys (see `strings`) are also stored in
    ZooKeeper and the log, as Kafka stores them, but must never be printed, logged or reported.
    """

    model_config = ConfigDict(extra="forbid")

    scram_passwords: dict[tuple[str, str], str] = Field(default_factory=dict)  # (user, mechanism)
    token_secret_key: str = ""  # Kafka's delegation.token.secret.key
    token_hmacs: dict[str, bytes] = Field(default_factory=dict)  # token id → HMAC-SHA512

    def strings(self, image: ClusterImage) -> list[str]:
        """Every spelling of every secret a leak could take: raw, base64, hex."""
        out: set[str] = set(self.scram_passwords.values())
        if self.token_secret_key:
            out.add(self.token_secret_key)
        blobs: list[bytes] = list(self.token_hmacs.values())
        for cred in image.scram_credentials.values():
            blobs += [cred.salt, cred.stored_key, cred.server_key]
        for blob in blobs:
            out.update((base64.b64encode(blob).decode(), base64.urlsafe_b64encode(blob).decode(), blob.hex()))
        return sorted(out)


@dataclass
class GeneratedCluster:
    spec: ClusterSpec
    image: ClusterImage
    control: ZkControlState
    secrets: GeneratedSecrets
    znodes_written: int = 0
    seconds: float = 0.0
    bumped_partitions: list[tuple[str, int]] = field(default_factory=list)


def _uuid(rng: random.Random) -> str:
    """Kafka's Uuid.randomUuid().toString(): base64url, no padding, never starting with '-', never zero."""
    while True:
        raw = bytearray(rng.randbytes(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, as java.util.UUID.randomUUID
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def rack_alternated(broker_racks: dict[int, str | None]) -> list[int]:
    """Brokers interleaved across racks (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack or "", []).append(broker)
    racks = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(broker_racks):
        for rack in racks:
            members = by_rack[rack]
            if i < len(members):
                out.append(members[i])
        i += 1
    return out


def assign_replicas(
    partitions: int,
    replication_factor: int,
    broker_racks: dict[int, str | None],
    rng: random.Random,
    arranged: list[int] | None = None,
) -> list[list[int]]:
    """Kafka's AdminUtils assignment: round robin from a random start with shifting followers; when
    brokers have racks, over the rack-alternated list, skipping followers whose rack (or broker)
    already holds a replica while another rack (or broker) holds none."""
    rack_aware = any(rack is not None for rack in broker_racks.values())
    brokers = arranged or (rack_alternated(broker_racks) if rack_aware else sorted(broker_racks))
    n = len(brokers)
    num_racks = len({broker_racks[b] for b in brokers})
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = brokers[first]
        replicas = [leader]
        if not rack_aware:
            for j in range(replication_factor - 1):
                replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
            out.append(replicas)
            continue
        racks_used = {broker_racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = brokers[(first + 1 + (shift * num_racks + k) % (n - 1)) % n]
                k += 1
                rack = broker_racks[broker]
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    break
        out.append(replicas)
    return out


def _rack_name(index: int, racks: int) -> str:
    return f"rack-{chr(ord('a') + index)}" if racks <= 26 else f"rack-{index:03d}"


def _scram(password: str, salt: bytes, iterations: int, mechanism: str) -> tuple[bytes, bytes]:
    """(stored_key, server_key) as Kafka's ScramFormatter derives them (RFC 5802)."""
    algo = _SCRAM_HASH[mechanism]
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", algo).digest()
    stored_key = hashlib.new(algo, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", algo).digest()
    return stored_key, server_key


class _Generator:
    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.now = _BASE_TIMESTAMP_MS + self.rng.randrange(365 * _DAY_MS)
        self.image = ClusterImage(cluster_id=_uuid(self.rng))
        self.secrets = GeneratedSecrets()
        self._reassigned: set[tuple[str, int]] = set()
        self._offline_set: set[tuple[str, int]] = set()

    def run(self) -> GeneratedCluster:
        self._brokers()
        self._topics()
        self._reassignments()
        self._offline()
        self._recovering()
        bumped = self._epoch_bumps()
        self._configs()
        self._quotas()
        self._scram()
        self._acls()
        self._tokens()
        self._producer_ids()
        self._features()
        self._kafka_read_order()
        names = sorted(self.image.topics)
        self.image.pending_deletions = (
            names[len(names) - self.spec.pending_deletions :] if self.spec.pending_deletions else []
        )
        return GeneratedCluster(
            spec=self.spec,
            image=self.image,
            control=self._control(),
            secrets=self.secrets,
            bumped_partitions=bumped,
        )

    def _brokers(self) -> None:
        spec = self.spec
        for i in range(spec.brokers):
            broker_id = i + 1
            host = f"kafka-{broker_id}{EXAMPLE_DOMAIN}"
            self.image.brokers[broker_id] = Broker(
                id=broker_id,
                endpoints=[
                    Endpoint(listener="PLAINTEXT", host=host, port=9092, security_protocol="PLAINTEXT"),
                    Endpoint(listener="SSL", host=host, port=9093, security_protocol="SSL"),
                    Endpoint(listener="REPLICATION", host=host, port=9094, security_protocol="SASL_SSL"),
                ],
                rack=_rack_name(i % spec.racks, spec.racks) if spec.racks else None,
                features={"metadata.version": FeatureRange(min_version=1, max_version=21)},
                json_version=5,
                jmx_port=9999 if i % 2 else -1,
                timestamp=self.now - self.rng.randrange(30 * _DAY_MS),
            )

    def _topics(self) -> None:
        spec = self.spec
        if not spec.topics:
            return
        racks = {b.id: b.rack for b in self.image.brokers.values()}
        arranged = rack_alternated(racks) if any(racks.values()) else sorted(racks)
        # Alternate the versions: Kafka 2.4-2.7 wrote version 2 (adding/removing replicas), older 1.
        legacy = {
            t: 2 - i % 2
            for i, t in enumerate(sorted(self.rng.sample(range(spec.topics), spec.legacy_topics)))
        }
        width = len(str(spec.topics - 1))
        rng = self.rng
        random_ = rng.random
        shrunk = spec.shrunk_isr_fraction
        for t in range(spec.topics):
            name = f"{_WORDS[t % len(_WORDS)]}.events-{t:0{width}d}"
            if t % 7 == 3:
                name = name.replace(".", "_")
            assignment = assign_replicas(spec.partitions, spec.replication_factor, racks, rng, arranged)
            partitions: dict[int, Partition] = {}
            for p, replicas in enumerate(assignment):
                isr = list(replicas)
                if len(isr) > 1 and random_() < shrunk:
                    isr.pop(1 + int(random_() * (len(isr) - 1)))
                # Validated construction is faster than model_construct here (measured: 8 vs 26 µs).
                partitions[p] = Partition(
                    partition=p,
                    replicas=replicas,
                    isr=isr,
                    leader=isr[0],
                    leader_epoch=rng.getrandbits(3),
                    controller_epoch=1 + int(random_() * spec.controller_epoch),
                )
            if t in legacy:
                topic = Topic(name=name, topic_id=None, partitions=partitions, json_version=legacy[t])
            else:
                topic = Topic(name=name, topic_id=_uuid(rng), partitions=partitions)
            self.image.topics[name] = topic

    def _partition_sample(
        self, count: int, exclude: set[tuple[str, int]], min_json_version: int = 0
    ) -> list[tuple[str, int]]:
        candidates = [
            (topic.name, p)
            for topic in self.image.topics.values()
            if topic.json_version >= min_json_version
            for p in topic.partitions
            if (topic.name, p) not in exclude
        ]
        return sorted(self.rng.sample(candidates, min(count, len(candidates))))

    def _reassignments(self) -> None:
        """In flight: the topic znode lists old ∪ new replicas with adding/removing, as Kafka does."""
        spec = self.spec
        # Topic znodes before version 2 cannot express adding/removing replicas.
        chosen = self._partition_sample(spec.reassignments, set(), min_json_version=2)
        self._reassigned = set(chosen)
        brokers = sorted(self.image.brokers)
        for name, p in chosen:
            part = self.image.topics[name].partitions[p]
            original = part.replicas
            outside = [b for b in brokers if b not in original]
            target = list(original)
            target[self.rng.randrange(1, len(target)) if len(target) > 1 else 0] = self.rng.choice(outside)
            part.replicas = target + [b for b in original if b not in target]
            part.adding_replicas = [b for b in target if b not in original]
            part.removing_replicas = [b for b in original if b not in target]
            part.isr = [b for b in part.isr if b in original]
            part.leader = part.isr[0]
            self.image.reassignments.append(Reassignment(topic=name, partition=p, replicas=target))

    def _offline(self) -> None:
        chosen = self._partition_sample(self.spec.offline_partitions, self._reassigned)
        self._offline_set = set(chosen)
        for i, (name, p) in enumerate(chosen):
            part = self.image.topics[name].partitions[p]
            part.leader = -1
            # With unclean election disabled the last ISR member stays; some clusters show none.
            part.isr = [] if i % 2 == 0 else [part.replicas[-1]]
            part.leader_recovery_state = 0

    def _recovering(self) -> None:
        """Partitions whose leader was elected uncleanly and is still RECOVERING (KIP-704)."""
        total = self.image.partition_count()
        count = math.ceil(self.spec.recovering_fraction * total)
        for name, p in self._partition_sample(count, self._offline_set | self._reassigned):
            self.image.topics[name].partitions[p].leader_recovery_state = 1

    def _epoch_bumps(self) -> list[tuple[str, int]]:
        bumped = self._partition_sample(self.spec.epoch_bumps, set())
        for name, p in bumped:
            self.image.topics[name].partitions[p].partition_epoch = 1 + self.rng.randrange(3)
        return bumped

    def _configs(self) -> None:
        spec = self.spec
        names = sorted(self.image.topics)
        for name in sorted(self.rng.sample(names, spec.topic_configs)):
            picks = self.rng.sample(_TOPIC_CONFIG_CHOICES, self.rng.randrange(1, 4))
            configs = {key: self.rng.choice(values) for key, values in sorted(picks)}
            self.image.configs[("TOPIC", name)] = ConfigEntity(
                resource_type="TOPIC", name=name, configs=configs
            )
        if spec.broker_configs:
            self.image.configs[("BROKER", "")] = ConfigEntity(
                resource_type="BROKER", name="", configs=dict(_BROKER_DEFAULT_CONFIGS)
            )
            for broker_id in sorted(self.rng.sample(sorted(self.image.brokers), spec.broker_configs)):
                picks = self.rng.sample(_BROKER_CONFIG_CHOICES, self.rng.randrange(1, 4))
                configs = {key: self.rng.choice(values) for key, values in sorted(picks)}
                self.image.configs[("BROKER", str(broker_id))] = ConfigEntity(
                    resource_type="BROKER", name=str(broker_id), configs=configs
                )

    def _rates(self, keys: list[str]) -> dict[str, float]:
        values = {
            "producer_byte_rate": float(self.rng.choice([1_048_576, 5_242_880, 10_485_760])),
            "consumer_byte_rate": float(self.rng.choice([2_097_152, 20_971_520])),
            "request_percentage": self.rng.choice([12.5, 50.0, 200.0]),
            "controller_mutation_rate": float(self.rng.choice([10, 100])),
            "connection_creation_rate": float(self.rng.choice([5, 50, 100])),
        }
        return {k: values[k] for k in keys}

    def _quotas(self) -> None:
        spec = self.spec
        client_keys = ["producer_byte_rate", "consumer_byte_rate", "request_percentage"]
        quotas = self.image.client_quotas
        users = self._quota_user_names()
        clients = [f"app-{i}" for i in range(max(spec.quota_clients, spec.quota_user_clients))]
        if spec.quota_users:
            quotas.append(ClientQuota(entity={"user": None}, values=self._rates(client_keys)))
            for user in users:
                keys = self.rng.sample(client_keys + ["controller_mutation_rate"], self.rng.randrange(1, 4))
                quotas.append(ClientQuota(entity={"user": user}, values=self._rates(sorted(keys))))
        if spec.quota_clients:
            quotas.append(ClientQuota(entity={"client-id": None}, values=self._rates(client_keys[:2])))
            for client in clients[: spec.quota_clients]:
                quotas.append(ClientQuota(entity={"client-id": client}, values=self._rates(client_keys[:1])))
        if spec.quota_user_clients:
            pair_users = users or [SANITIZED_QUOTA_USER]
            quotas.append(
                ClientQuota(entity={"user": None, "client-id": None}, values=self._rates(client_keys[1:2]))
            )
            quotas.append(
                ClientQuota(
                    entity={"user": pair_users[0], "client-id": None}, values=self._rates(client_keys[:1])
                )
            )
            for i in range(spec.quota_user_clients):
                entity = {"user": pair_users[i % len(pair_users)], "client-id": clients[i]}
                quotas.append(ClientQuota(entity=entity, values=self._rates(client_keys[:2])))
        if spec.quota_ips:
            quotas.append(ClientQuota(entity={"ip": None}, values=self._rates(["connection_creation_rate"])))
            for i in range(spec.quota_ips):
                ip = f"10.1.{i // 250}.{i % 250 + 1}"
                quotas.append(
                    ClientQuota(entity={"ip": ip}, values=self._rates(["connection_creation_rate"]))
                )

    def _quota_user_names(self) -> list[str]:
        names = [SANITIZED_QUOTA_USER] + [f"quota-user-{i}" for i in range(1, self.spec.quota_users)]
        return names[: self.spec.quota_users]

    def _scram(self) -> None:
        # The first SCRAM user also has quotas, so one `/config/users/<u>` carries both.
        users = [SANITIZED_QUOTA_USER] + [f"scram-user-{i}" for i in range(1, self.spec.scram_users)]
        for i, user in enumerate(users[: self.spec.scram_users]):
            mechanisms = [["SCRAM-SHA-256", "SCRAM-SHA-512"], ["SCRAM-SHA-256"], ["SCRAM-SHA-512"]][i % 3]
            for mechanism in mechanisms:
                password = base64.urlsafe_b64encode(self.rng.randbytes(18)).decode()
                salt = self.rng.randbytes(24)
                iterations = SCRAM_ITERATIONS[mechanism]
                stored_key, server_key = _scram(password, salt, iterations, mechanism)
                self.image.scram_credentials[(user, mechanism)] = ScramCredential(
                    user=user,
                    mechanism=mechanism,
                    salt=salt,
                    stored_key=stored_key,
                    server_key=server_key,
                    iterations=iterations,
                )
                self.secrets.scram_passwords[(user, mechanism)] = password

    def _acls(self) -> None:
        if not self.spec.acls:
            return
        r = self.rng
        topics = sorted(self.image.topics) or ["orders"]
        kinds = list(_ACL_OPERATIONS)
        weights = [40, 25, 5, 10, 10, 10]  # in _ACL_OPERATIONS order: mostly topics and groups
        # Enough principals that many bindings stay distinct; the first few are the usual suspects.
        principals = _PRINCIPALS + [f"User:svc-{k}" for k in range(self.spec.acls // 10)]
        seen: set[tuple[str, ...]] = set()
        attempts = 0
        while len(seen) < self.spec.acls and attempts < self.spec.acls * 50:
            # Every resource type first, then a realistic mix.
            resource_type = kinds[attempts] if attempts < len(kinds) else r.choices(kinds, weights)[0]
            prefixed = resource_type != "CLUSTER" and (attempts % 4 == 1 or r.random() < 0.2)
            attempts += 1
            acl = Acl(
                resource_type=resource_type,
                resource_name=self._acl_resource_name(resource_type, prefixed, topics),
                pattern_type="PREFIXED" if prefixed else "LITERAL",
                principal=r.choice(principals),
                host=r.choice(_HOSTS),
                operation=r.choice(_ACL_OPERATIONS[resource_type]),
                permission_type="DENY" if r.random() < 0.1 else "ALLOW",
            )
            if acl.key() not in seen:
                seen.add(acl.key())
                self.image.acls.append(acl)
        if len(seen) < self.spec.acls:
            raise BadInputError(f"cannot make {self.spec.acls} distinct ACLs from this cluster's resources")

    def _acl_resource_name(self, resource_type: str, prefixed: bool, topics: list[str]) -> str:
        r = self.rng
        if resource_type == "CLUSTER":
            return "kafka-cluster"
        if resource_type == "TOPIC":
            if prefixed:
                return r.choice(_WORDS) + "."
            return "*" if r.random() < 0.05 else topics[r.randrange(len(topics))]
        if resource_type == "GROUP":
            return ("app-" if prefixed else f"app-{r.randrange(50)}-consumers") if r.random() < 0.9 else "*"
        if resource_type == "TRANSACTIONAL_ID":
            return "tx-" if prefixed else f"tx-{r.choice(_WORDS)}-{r.randrange(20)}"
        if resource_type == "DELEGATION_TOKEN":
            return "tok-" if prefixed else "*"
        return "User:svc-" if prefixed else r.choice(_PRINCIPALS)

    def _tokens(self) -> None:
        if not self.spec.tokens:
            return
        key = base64.b64encode(self.rng.randbytes(32)).decode()
        self.secrets.token_secret_key = key
        for i in range(self.spec.tokens):
            token_id = _uuid(self.rng)
            owner = _PRINCIPALS[i % len(_PRINCIPALS)]
            issue = self.now - self.rng.randrange(_DAY_MS)
            self.image.delegation_tokens[token_id] = DelegationToken(
                token_id=token_id,
                owner=owner,
                requester=owner if i % 2 == 0 else "User:admin",
                renewers=sorted({_PRINCIPALS[(i + 1) % len(_PRINCIPALS)], "User:bob"}),
                issue_timestamp=issue,
                max_timestamp=issue + 7 * _DAY_MS,
                expiry_timestamp=issue + _DAY_MS,
            )
            # Kafka's token HMAC: HMAC-SHA512 of the token id under delegation.token.secret.key.
            self.secrets.token_hmacs[token_id] = hmac.new(key.encode(), token_id.encode(), "sha512").digest()

    def _producer_ids(self) -> None:
        if self.spec.producer_id_block:
            start = 1000 * self.rng.randrange(1, 5000)
            self.image.producer_id_block = ProducerIdBlock(
                broker=self.rng.choice(sorted(self.image.brokers)), block_start=start, block_end=start + 999
            )

    def _features(self) -> None:
        # ZK-mode controllers (IBP >= 2.7) write /feature enabled and, before the migration, empty.
        if self.spec.features:
            self.image.features = FeatureZnode(json_version=2, status=1, features={})

    def _kafka_read_order(self) -> None:
        """Quotas and ACLs in the order Kafka (and `layout.image_from_tree`) reads them back from
        ZooKeeper, so a loaded cluster read back equals the generated image, lists included."""
        rank = {"user": 0, "client-id": 1, "ip": 3}

        def quota_key(q: ClientQuota) -> tuple[object, ...]:
            kind = 2 if len(q.entity) == 2 else rank[next(iter(q.entity))]
            return (kind, *paths.quota_entity_path(q.entity).split("/"))

        self.image.client_quotas.sort(key=quota_key)
        stores = list(paths.ACL_STORES)

        def acl_key(a: Acl) -> tuple[object, ...]:
            return (
                stores.index(a.pattern_type),
                paths.resource_type_segment(a.resource_type),
                a.resource_name,
            )

        self.image.acls.sort(key=acl_key)  # stable: a resource's ACLs keep their order in its znode

    def _control(self) -> ZkControlState:
        controller = self.rng.choice(sorted(self.image.brokers))
        return ZkControlState(
            controller=ControllerZnode(
                json_version=2,
                broker_id=controller,
                timestamp=self.now,
                kraft_controller_epoch=-1,
                ephemeral=True,
            ),
            controller_epoch=self.spec.controller_epoch,
            # The ZK controller bumps /controller_epoch with a conditional set each election.
            controller_epoch_zk_version=self.spec.controller_epoch - 1,
        )


def generate(spec: ClusterSpec) -> GeneratedCluster:
    """The cluster `spec` describes; the same seed always gives the same model and the same znodes."""
    return _Generator(spec).run()


def _version_bumps(generated: GeneratedCluster) -> Iterator[tuple[str, int]]:
    """(path, times) of the znodes whose version must be raised after creation."""
    for name, p in generated.bumped_partitions:
        epoch = generated.image.topics[name].partitions[p].partition_epoch
        yield paths.partition_state_path(name, p), epoch
    if generated.control.controller_epoch_zk_version:
        yield paths.CONTROLLER_EPOCH, generated.control.controller_epoch_zk_version


def load_cluster(
    client: KazooClient,
    spec: ClusterSpec,
    exist_ok: bool = False,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> GeneratedCluster:
    """Generate `spec` and write its persistent znodes; broker registrations are `BrokerSessions`' job."""
    generated = generate(spec)
    started = time.perf_counter()
    znodes = znodes_from_image(generated.image, generated.control)
    if on_total is not None:
        on_total(len(znodes))
    generated.znodes_written = create_all(client, znodes, exist_ok=exist_ok, progress=progress)
    bumps = list(_version_bumps(generated))
    for path, times in bumps:
        # Rewriting the same bytes raises the znode version, which Kafka reads as the partition epoch.
        stat = client.exists(path)
        if stat is None:
            raise BadInputError(f"layout wrote no {path}")
        pending = [client.set_async(path, znodes[path]) for _ in range(times - stat.version)]
        for result in pending:
            result.get()
    generated.seconds = time.perf_counter() - started
    return generated
