"""The image Kafka 3.9's own classes build from a metadata log directory (tests/kafka_checkers/KafkaImage.java).

The Java source is compiled against Kafka's jars (zk_fixtures.kafka_dist) on first use, into the cache
beside them, keyed by the source's hash; a test then gets Kafka's answer, never zk2kraft's reading of it.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from zk_fixtures.kafka import java
from zk_fixtures.kafka_dist import classpath, kafka_libs

_SOURCE = Path(__file__).with_name("kafka_checkers") / "KafkaImage.java"


@dataclass(frozen=True)
class KafkaImage:
    log_start: int  # Kafka's log start: the first segment's base offset
    replayed_from: int  # where Kafka's observer's records began (0, or the latest snapshot's end)
    topics: dict[str, int]  # name -> partition count
    configs: set[tuple[str, str, str]]  # (resource type, resource name, key)


def _compiled() -> Path:
    libs = kafka_libs()
    digest = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:16]
    out = libs.parent / "checkers" / digest
    if not (out / "KafkaImage.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-d", str(out), "-cp", classpath(libs), str(_SOURCE)],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
    return out


def kafka_image(partition_dir: Path) -> KafkaImage:
    """What a Kafka 3.9 observer's MetadataLoader holds after catching up from `partition_dir`'s leader."""
    classes = _compiled()
    cp = f"{classpath(kafka_libs())}:{classes}"
    done = subprocess.run(
        [java(), "-Xmx256m", "-XX:+UseSerialGC", "-cp", cp, "KafkaImage", str(partition_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise AssertionError(f"KafkaImage exited {done.returncode}: {done.stderr.strip()[-1500:]}")
    lines = done.stdout.splitlines()
    head = lines[0].split()
    topics: dict[str, int] = {}
    configs: set[tuple[str, str, str]] = set()
    for line in lines[1:]:
        kind, *rest = line.split(" ")
        if kind == "topic":
            topics[rest[0]] = int(rest[1])
        elif kind == "config":
            configs.add((rest[0], rest[1], rest[2]))
    return KafkaImage(int(head[1]), int(head[3]), topics, configs)
