"""Run one of tests/kafka_checkers/*.java with Kafka 3.9's own jars (zk_fixtures.kafka_dist).

Compiled on first use into the cache beside the jars, keyed by the source's hash, as tests/kafka_image.py
does for KafkaImage: a test gets Kafka's answer, never zk2kraft's reading of it.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from zk_fixtures.kafka import java
from zk_fixtures.kafka_dist import classpath, kafka_libs

CHECKERS = Path(__file__).with_name("kafka_checkers")


def run_checker(name: str, *args: str) -> str:
    """The checker's stdout (stripped); a non-zero exit fails the test with Kafka's stderr."""
    source = CHECKERS / f"{name}.java"
    libs = kafka_libs()
    out = libs.parent / "checkers" / hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if not (out / f"{name}.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-d", str(out), "-cp", classpath(libs), str(source)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    done = subprocess.run(
        [java(), "-Xmx64m", "-XX:+UseSerialGC", "-cp", f"{classpath(libs)}:{out}", name, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{name} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-1500:]}"
        )
    return done.stdout.strip()
