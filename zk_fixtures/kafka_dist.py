"""Kafka's and ZooKeeper's own jars, fetched from Maven Central on first use into a cache outside the work tree.

The poms beside this module (`maven/kafka.pom.xml`, `maven/zookeeper.pom.xml`) name what is needed;
`mvn dependency:copy-dependencies` copies the runtime closure into `~/.cache/zk2kraft/<name>-<version>/libs`
(or `$ZK2KRAFT_CACHE`). A `.complete` stamp makes the next call free; a file lock keeps parallel test
processes from fetching twice. No jar is ever committed. A fetch that fails raises `KafkaFetchError`, one
line naming the cause: tests that need Kafka fail with it, they do not skip.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from migrator.errors import UnreachableError

KAFKA_VERSION = "3.9.2"
"""The newest 3.9.x that Maven Central serves: 3.9 is the last line with ZooKeeper mode and the migration."""

ZOOKEEPER_VERSIONS = ("3.5.10", "3.6.4", "3.7.2", "3.8.4", "3.9.3")
"""One server release of each ZooKeeper line that Kafka 2.x-3.9 clusters run on."""

_POMS = Path(__file__).with_name("maven")


class KafkaFetchError(UnreachableError):
    """Maven could not resolve Kafka's (or ZooKeeper's) jars: no `mvn`, no Maven Central, an unknown version."""


def cache_root() -> Path:
    """Where fetched distributions live: `$ZK2KRAFT_CACHE`, else `~/.cache/zk2kraft`."""
    env = os.environ.get("ZK2KRAFT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "zk2kraft"


def kafka_libs(version: str = KAFKA_VERSION, announce: Callable[[str], None] | None = None) -> Path:
    """The directory holding Kafka `version`'s runtime jars (broker, controller, tools, metadata shell)."""
    return _resolve("kafka", version, _POMS / "kafka.pom.xml", "kafka.version", announce)


def zookeeper_libs(version: str, announce: Callable[[str], None] | None = None) -> Path:
    """The directory holding ZooKeeper `version`'s server jars (and an slf4j binding)."""
    return _resolve("zookeeper", version, _POMS / "zookeeper.pom.xml", "zookeeper.version", announce)


def classpath(libs: Path) -> str:
    """A `java -cp` value for every jar in `libs` (Java's own wildcard form)."""
    return str(libs / "*")


def _resolve(
    name: str, version: str, pom: Path, version_property: str, announce: Callable[[str], None] | None
) -> Path:
    home = cache_root() / f"{name}-{version}"
    libs = home / "libs"
    stamp = home / ".complete"
    if stamp.exists():
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():  # another process fetched it while this one waited
            return libs
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaFetchError(
                f"cannot fetch {name} {version}: `mvn` not found (apt-get install maven), needed once to "
                f"download its jars from Maven Central into {home}"
            )
        say = announce or (lambda line: print(line, file=sys.stderr, flush=True))
        say(
            f"fetching {name} {version} from Maven Central into {libs} (once{'; about 60 MB' if name == 'kafka' else ''})"
        )
        if libs.exists():
            shutil.rmtree(libs)  # a fetch that died half-way
        done = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom), f"-D{version_property}={version}",
             "dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
            cwd=home, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln] or [
                (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            ][0]
            raise KafkaFetchError(
                f"cannot fetch {name} {version} from Maven Central (mvn exit {done.returncode}): "
                f"{lines[0].replace('[ERROR] ', '').strip()[:300]}"
            )
        size = sum(p.stat().st_size for p in libs.glob("*.jar"))
        stamp.write_text(f"{len(list(libs.glob('*.jar')))} jars, {size} bytes\n")
        say(f"fetched {name} {version}: {size / 1e6:.0f} MB")
    return libs


def main() -> None:
    """`python -m zk_fixtures.kafka_dist [kafka|zookeeper VERSION…]`: fetch ahead of time (CI, `make deps`)."""
    args = sys.argv[1:] or ["kafka"]
    try:
        if args[0] == "kafka":
            print(kafka_libs(*(args[1:2] or [KAFKA_VERSION])))
        elif args[0] == "zookeeper":
            for v in args[1:] or list(ZOOKEEPER_VERSIONS):
                print(zookeeper_libs(v))
        else:
            raise SystemExit(
                "usage: python -m zk_fixtures.kafka_dist [kafka [VERSION] | zookeeper [VERSION…]]"
            )
    except KafkaFetchError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None


if __name__ == "__main__":
    main()
