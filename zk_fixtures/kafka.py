"""Real Kafka 3.9 processes — ZooKeeper-mode brokers, KRaft brokers, KRaft controllers — and Kafka's own tools.

Each `KafkaNode` is `java -cp <cache>/* kafka.Kafka server.properties` with a small heap, its own log
directory and log4j writing to `<dir>/server.log`, started on free loopback ports and stopped by pid
(SIGTERM for a controlled shutdown, SIGKILL for a crash). `kafka_tool()` runs Kafka's command-line
classes from the same jars (kafka-metadata-quorum, kafka-topics, kafka-configs, kafka-acls,
kafka-dump-log, kafka-metadata-shell) as independent checkers of what zk2kraft writes and serves.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from migrator.errors import UnreachableError
from zk_fixtures.kafka_dist import KAFKA_VERSION, classpath, kafka_libs
from zk_fixtures.server import _terminate, free_port

TOOLS = {
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-metadata-shell": "org.apache.kafka.shell.MetadataShell",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
}
"""The scripts of Kafka's `bin/` and the classes they run (Kafka 3.9)."""

_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=INFO
"""

_TOOL_LOG4J = "log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\n" \
    "log4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n" \
    "log4j.appender.stderr.layout.ConversionPattern=%p %m (%c)%n\n"  # fmt: skip


def java() -> str:
    path = shutil.which("java")
    if path is None:
        raise UnreachableError("java not found: install a JRE (apt-get install default-jre-headless)")
    return path


def render_properties(props: Mapping[str, object]) -> str:
    """Kafka's `server.properties` text: `key=value` lines (booleans lower-case)."""
    out = []
    for k, v in props.items():
        text = str(v).lower() if isinstance(v, bool) else str(v)
        out.append(f"{k}={text}")
    return "\n".join(out) + "\n"


@dataclass
class KafkaNode:
    """One Kafka 3.9 process (broker or controller) in `directory`, its properties given whole.

    `directory` holds `server.properties`, `log4j.properties`, `server.log` and, unless the
    properties say otherwise, `data/` for `log.dirs`. Restart with other properties (the runbook's
    phases) by setting `props` and calling `start()` again on the same directory.
    """

    directory: Path
    props: dict[str, object]
    heap: str = "384m"
    version: str = KAFKA_VERSION
    jvm_opts: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)

    @property
    def node_id(self) -> int:
        return int(self.props.get("node.id", self.props.get("broker.id", -1)))  # type: ignore[arg-type]

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def listener_port(self, name: str) -> int:
        """The port of listener `name` in `listeners` (e.g. PLAINTEXT, CONTROLLER)."""
        for item in str(self.props["listeners"]).split(","):
            lname, _, rest = item.partition("://")
            if lname.strip() == name:
                return int(rest.rsplit(":", 1)[1])
        raise KeyError(name)

    def start(self, wait_port: str | None = None, timeout: float = 90.0) -> KafkaNode:
        """Start the process; with `wait_port` (a listener name) wait until that port accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"Kafka node {self.node_id} is already running (pid {self.proc.pid})")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.props.setdefault("log.dirs", str(self.directory / "data"))
        (self.directory / "server.properties").write_text(render_properties(self.props))
        (self.directory / "log4j.properties").write_text(_LOG4J.format(path=self.log_path))
        libs = kafka_libs(self.version)
        cmd = [
            java(),
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.directory / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.directory}",
            *self.jvm_opts,
            "-cp",
            classpath(libs),
            "kafka.Kafka",
            str(self.directory / "server.properties"),
        ]
        out = open(self.directory / "stdout.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        out.close()
        if wait_port is not None:
            self.wait_listening(wait_port, timeout)
        return self

    def wait_listening(self, listener: str, timeout: float = 90.0) -> None:
        port = self.listener_port(listener)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise UnreachableError(f"Kafka node {self.node_id} exited: {self.last_lines()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise UnreachableError(
            f"Kafka node {self.node_id} did not listen on {listener} :{port} in {timeout:.0f}s: {self.last_lines()}"
        )

    def wait_for_log(self, pattern: str, timeout: float = 60.0, since: int = 0) -> re.Match[str]:
        """Wait until `server.log` (from byte `since`) has a line matching `pattern`; return the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_path.exists():
                with open(self.log_path, errors="replace") as f:
                    f.seek(since)
                    m = rx.search(f.read())
                if m:
                    return m
            if self.proc is None or self.proc.poll() is not None:
                raise UnreachableError(
                    f"Kafka node {self.node_id} exited before /{pattern}/: {self.last_lines()}"
                )
            time.sleep(0.1)
        raise TimeoutError(
            f"Kafka node {self.node_id}: no /{pattern}/ in {timeout:.0f}s: {self.last_lines()}"
        )

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def error_lines(self) -> list[str]:
        """Every line Kafka logged at ERROR (a test names and explains those it expects)."""
        if not self.log_path.exists():
            return []
        return [ln for ln in self.log_path.read_text(errors="replace").splitlines() if "] ERROR " in ln]

    def last_lines(self, n: int = 8) -> str:
        lines: list[str] = []
        for p in (self.log_path, self.directory / "stdout.log"):
            if p.exists():
                lines += p.read_text(errors="replace").splitlines()[-n:]
        return " | ".join(lines[-n:]) or "no output"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after `timeout`."""
        if self.proc is not None:
            _terminate(self.proc.pid, timeout, self.proc)
            self.proc = None

    def kill(self) -> None:
        """SIGKILL: a crash, no controlled shutdown."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def kafka_tool(
    tool: str, *args: str, timeout: float = 120.0, check: bool = True, version: str = KAFKA_VERSION,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run one of Kafka's command-line tools (a key of `TOOLS`) from the fetched jars."""
    libs = kafka_libs(version)
    log4j = libs.parent / "tools-log4j.properties"
    if not log4j.exists():
        log4j.write_text(_TOOL_LOG4J)
    cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           f"-Dlog4j.configuration=file:{log4j}", "-cp", classpath(libs), TOOLS[tool], *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-800:]}"
        )
    return done


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports."""
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)
