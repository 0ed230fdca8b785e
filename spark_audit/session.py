"""The audit's SparkSession: embedded `local[*]` by default, or whatever spark-submit hands over.

Embedded, zk2kraft starts the JVM itself with its output (Spark's log, the Python workers' stderr)
going to a log file, so nothing of Spark reaches the operator's terminal unless `-v` asks for it;
workers run this interpreter (`PYSPARK_PYTHON`), traffic stays on loopback (`SPARK_LOCAL_IP`), the
UI and the console progress bar are off. Under `spark-submit` the JVM already runs and the
submitter's configuration is left alone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_audit.errors import SparkJobError

__all__ = ["DEFAULT_MASTER", "SparkHandle", "get_session", "is_local", "keep_log", "spark_submitted", "stop"]

DEFAULT_MASTER = "local[*]"
_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = ("spark_audit", "migrator", "state_machine")


@dataclass
class SparkHandle:
    spark: Any
    log_file: str | None  # where the embedded JVM's output goes (None under spark-submit or with -v)
    embedded: bool


_HANDLE: SparkHandle | None = None


def spark_submitted() -> bool:
    """True when spark-submit (or pyspark) started the JVM and handed this process its gateway."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def _defaults(master: str) -> dict[str, str]:
    cores = os.cpu_count() or 2
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(
            max(2, 2 * cores) if not is_local(master) else min(8, max(2, cores))
        ),
        "spark.sql.adaptive.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.memory": os.environ.get("ZK2KRAFT_SPARK_DRIVER_MEMORY", "1g"),
    }
    executor_memory = os.environ.get("ZK2KRAFT_SPARK_EXECUTOR_MEMORY")
    if executor_memory and not is_local(master):
        conf["spark.executor.memory"] = executor_memory
    if is_local(master):
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    return conf


def _package_zip() -> str:
    """The project's Python packages as one zip for executors on a cluster (`addPyFile`)."""
    out = Path(tempfile.mkdtemp(prefix="zk2kraft-pyfiles-")) / "zk2kraft.zip"
    atexit.register(shutil.rmtree, out.parent, True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for package in _PACKAGES:
            for path in sorted((_ROOT / package).rglob("*.py")):
                z.write(path, path.relative_to(_ROOT))
    return str(out)


def get_session(
    master: str | None = None, *, verbose: bool = False, app_name: str = "zk2kraft-audit"
) -> SparkHandle:
    """The process's one SparkSession (created on first use, reused after) with the sources registered.

    `master` is ignored under spark-submit (the submitter chose it). A JVM that cannot start or a master
    that cannot be reached is a SparkJobError (exit 3) naming the log file.
    """
    global _HANDLE
    if _HANDLE is not None and _HANDLE.spark.sparkContext._jsc is not None:
        return _HANDLE
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from spark_audit.sources import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    submitted = spark_submitted()
    log_file: str | None = None
    master = master or DEFAULT_MASTER
    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        if is_local(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name)
        for key, value in _defaults(master).items():
            conf.set(key, value)
        builder = builder.config(conf=conf)
        if SparkContext._gateway is None:
            popen: dict[str, Any] = {}
            log_fd: int | None = None
            if not verbose:
                log_fd, log_file = tempfile.mkstemp(prefix="zk2kraft-spark-", suffix=".log")
                popen = {"stdout": log_fd, "stderr": log_fd}
                atexit.register(_remove_log, log_file)
            try:
                gateway = launch_gateway(conf, popen_kwargs=popen)
            except Exception as e:  # noqa: BLE001 - pyspark raises its own runtime error types
                keep_log()
                raise SparkJobError(
                    f"cannot start Spark ({type(e).__name__}: {e}); is Java 17+ installed?{_see(log_file)}"
                ) from None
            finally:
                # our own descriptor, not `popen`: launch_gateway adds its own keys to that dict
                if log_fd is not None:
                    os.close(log_fd)
            SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - a bad master is a Py4J error with a Java stack trace
        keep_log()
        raise SparkJobError(
            f"cannot start a Spark session on {master}: {_one_line(e)}{_see(log_file)}"
        ) from None
    spark.sparkContext.setLogLevel("INFO" if verbose else "WARN")
    if not submitted and not is_local(master):
        spark.sparkContext.addPyFile(_package_zip())
    register(spark)
    _HANDLE = SparkHandle(spark=spark, log_file=log_file, embedded=not submitted)
    return _HANDLE


_KEEP_LOG = False


def keep_log() -> None:
    """Keep the embedded JVM's log file after exit (an error message names it)."""
    global _KEEP_LOG
    _KEEP_LOG = True


def _remove_log(path: str) -> None:
    if not _KEEP_LOG:
        Path(path).unlink(missing_ok=True)


def _one_line(e: BaseException) -> str:
    for line in str(e).splitlines():
        if line.strip():
            return line.strip()[:300]
    return type(e).__name__


def _see(log_file: str | None) -> str:
    return f" (Spark's log: {log_file})" if log_file else ""


def stop() -> None:
    """Stop the session (tests and the CLI's exit); the next get_session starts a new one."""
    global _HANDLE
    if _HANDLE is not None:
        _HANDLE.spark.stop()
        _HANDLE = None
