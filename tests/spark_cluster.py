"""A real standalone Spark cluster on loopback, started from pyspark's own launcher (`bin/spark-class`).

One master and two workers (one core and 2 GiB each, so an executor gets 2 GiB), each a JVM this
module starts in its own process group and stops by its pid. `start()` waits until both workers have
registered (the master's log says so), so a job submitted right after gets both executors.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
WORKERS = 2
WORKER_MEMORY = "2g"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    url: str
    work: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The environment a driver needs to use this cluster's executors on this machine."""
        return {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "ZK2KRAFT_SPARK_EXECUTOR_MEMORY": WORKER_MEMORY,
        }

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _spawn(cluster: Cluster, name: str, *args: str) -> None:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    # no REST submission server: its fixed port 6066 would clash with any other master on the machine
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    env["SPARK_WORKER_DIR"] = str(cluster.work / f"{name}-work")
    log = open(cluster.work / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
    cluster.procs.append(
        subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    )


def start(work: Path, timeout: float = 180) -> Cluster:
    work.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    cluster = Cluster(url=f"spark://127.0.0.1:{port}", work=work)
    try:
        _spawn(
            cluster,
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        )
        for i in range(WORKERS):
            _spawn(
                cluster,
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                WORKER_MEMORY,
                "--webui-port",
                str(_free_port()),
                cluster.url,
            )
        deadline = time.monotonic() + timeout
        master_log = work / "master.log"
        while time.monotonic() < deadline:
            text = master_log.read_text(errors="replace") if master_log.exists() else ""
            if text.count("Registering worker") >= WORKERS:
                return cluster
            dead = [p for p in cluster.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark daemon exited with {dead[0].returncode}; see {work}")
            time.sleep(0.5)
        raise RuntimeError(
            f"the Spark workers did not register with {cluster.url} in {timeout:.0f}s; see {work}"
        )
    except BaseException:
        cluster.stop()
        raise
