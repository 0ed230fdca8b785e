"""The CLI shell: version, Kafka properties config, one-line errors with documented exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import click
import pytest

from cli.main import _default_map, _defaults_from_properties, main, run
from migrator.errors import ZkKraftError
from migrator.properties import read_properties

ZK2KRAFT = [sys.executable, "-c", "from cli.main import entry; entry()"]


def test_properties_format(tmp_path):
    p = tmp_path / "controller.properties"
    p.write_text(
        "# comment\n! also a comment\nzookeeper.connect = zk1:2181,zk2:2181/kafka\n"
        "metadata.log.dir=/var/kraft\nlisteners: CONTROLLER://:9093\n"
        "long.value=a,\\\n    b\nnode.id=3000\n"
    )
    props = read_properties(str(p))
    assert props["zookeeper.connect"] == "zk1:2181,zk2:2181/kafka"
    assert props["metadata.log.dir"] == "/var/kraft"
    assert props["listeners"] == "CONTROLLER://:9093"
    assert props["long.value"] == "a,b"
    assert props["node.id"] == "3000"


def test_config_maps_kafka_names_onto_options():
    values = _defaults_from_properties(
        {
            "zookeeper.connect": "zk:2181/k",
            "log.dirs": "/a,/b",
            "zookeeper.connection.timeout.ms": "18000",
            "node.id": "3000",
        }
    )
    assert values == {"zookeeper": "zk:2181/k", "log_dir": "/a", "zk_timeout": 18.0, "node_id": 3000}

    @click.group()
    def g() -> None:
        pass

    @g.command()
    @click.option("--zookeeper")
    def sub(zookeeper: str) -> None:
        pass

    assert _default_map(g, values) == {"sub": {"zookeeper": "zk:2181/k"}}


def test_missing_config_file_is_one_line_exit_2(capsys):
    assert run(["--config", "/no/such/file.properties", "zk", "status"]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip()
        == "zk2kraft: error: --config: cannot read /no/such/file.properties: No such file or directory"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("zookeeper.connection.timeout.ms=abc", "zookeeper.connection.timeout.ms='abc' is not a number"),
        ("node.id=three", "node.id='three' is not a number"),
    ],
)
def test_config_value_that_is_not_a_number_is_one_line_exit_2(tmp_path, capsys, line, message):
    p = tmp_path / "controller.properties"
    p.write_text(f"zookeeper.connect=zk:2181\nprocess.roles=controller\n{line}\n")  # other keys: ignored
    assert run(["--config", str(p), "status", "--log-dir", str(tmp_path / "log")]) == 2
    assert capsys.readouterr().err.strip() == f"zk2kraft: error: --config: {message}"


def test_version_and_help():
    out = subprocess.run([*ZK2KRAFT, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("zk2kraft, version ")
    out = subprocess.run([*ZK2KRAFT, "--help"], capture_output=True, text=True, check=True).stdout
    assert "zk" in out and "Example" in out


def test_usage_error_is_exit_2_without_traceback():
    proc = subprocess.run([*ZK2KRAFT, "zk", "start", "--port", "notanumber"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "notanumber" in proc.stderr


def test_zk_status_of_nothing_is_exit_3(tmp_path):
    proc = subprocess.run(
        [*ZK2KRAFT, "zk", "status", "--data-dir", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 3
    assert proc.stdout.strip() == "not running"


def test_zk_start_status_stop(tmp_path):
    data = str(tmp_path / "zk")
    start = subprocess.run(
        [*ZK2KRAFT, "zk", "start", "--data-dir", data], capture_output=True, text=True, check=True
    )
    try:
        connect = start.stdout.strip()
        assert connect.startswith("127.0.0.1:")
        status = subprocess.run(
            [*ZK2KRAFT, "zk", "status", "--data-dir", data, "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert f'"connect": "{connect}"' in status.stdout and '"running": true' in status.stdout
    finally:
        subprocess.run([*ZK2KRAFT, "zk", "stop", "--data-dir", data], check=True, capture_output=True)


@pytest.mark.parametrize("verbose", [False, True])
def test_zkkraft_error_shows_traceback_only_with_v(capsys, verbose):
    @main.command("boom-test")
    def boom() -> None:
        raise ZkKraftError("something specific at /path")

    try:
        code = run((["-v"] if verbose else []) + ["boom-test"])
    finally:
        main.commands.pop("boom-test")
    err = capsys.readouterr().err
    assert code == 2
    assert "zk2kraft: error: something specific at /path" in err
    assert ("Traceback" in err) is verbose


def test_config_after_the_subcommand_gives_the_same_defaults(zk_connect, tmp_path, capsys):
    """`zk2kraft status --config FILE` works as `zk2kraft --config FILE status` does."""
    p = tmp_path / "controller.properties"
    log_dir = tmp_path / "log"
    p.write_text(f"zookeeper.connect={zk_connect}\nmetadata.log.dir={log_dir}\nprocess.roles=controller\n")
    outs = []
    for argv in (["--config", str(p), "status", "--json"], ["status", "--config", str(p), "--json"]):
        assert run(argv) == 0, capsys.readouterr().err
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert str(log_dir) in json.dumps(outs[1])  # the file's metadata.log.dir was used
    # options on the command line still win over the file
    assert run(["status", "--config", str(p), "--log-dir", str(tmp_path / "other"), "--json"]) == 0
    assert str(tmp_path / "other") in capsys.readouterr().out


def test_config_after_the_subcommand_missing_file_is_one_line_exit_2(capsys):
    assert run(["zk", "status", "--config", "/no/such/file.properties"]) == 2
    assert capsys.readouterr().err.strip() == (
        "zk2kraft: error: --config: cannot read /no/such/file.properties: No such file or directory"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json", "--config", "/no/such/file.properties"],
        ["finalize", "--json", "--config", "/no/such/file.properties"],
        ["status", "--json", "--no-such-option"],
    ],
)
def test_json_commands_print_a_json_error_object(argv, capsys):
    code = run(argv)
    assert code == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["exit_code"] == 2 and error["message"] and error["code"]
    assert captured.err.strip()  # and the one line on stderr, as without --json


@pytest.mark.parametrize(
    ("connect", "cause"),
    [
        ("127.0.0.1:1", "connection refused (nothing listens there)"),
        ("no-such-host.invalid:2181", "cannot resolve the name"),
    ],
)
def test_unreachable_zookeeper_says_why_at_once(connect, cause, tmp_path):
    """A refused port and an unknown name fail at once and say which; no TLS hint for either."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [*ZK2KRAFT, "status", "--zookeeper", connect, "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert time.monotonic() - t0 < 8  # kazoo alone waited its 10 s timeout
    assert proc.returncode == 3
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"zk2kraft: error: cannot reach ZooKeeper at {connect}: {cause}"), line
    assert "TLS" not in proc.stderr


def test_missing_chroot_is_one_line_without_kazoos_warning(zk_server, tmp_path):
    proc = subprocess.run(
        [*ZK2KRAFT, "status", "--zookeeper", zk_server + "/no-such-chroot", "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"zk2kraft: error: chroot /no-such-chroot does not exist on ZooKeeper {zk_server}"
    ]


def test_fixtures_load_creates_a_missing_chroot(zk_server, capsys):
    from migrator.zk.connection import close, connect

    chroot = f"/new-chroot-{time.monotonic_ns()}/kafka"
    spec = ["--brokers", "3", "--topics", "2", "--partitions", "1"]
    assert run(["fixtures", "load", "--zookeeper", zk_server + chroot, *spec]) == 0, capsys.readouterr().err
    client = connect(zk_server + chroot)
    try:
        assert client.exists("/brokers/topics") is not None
    finally:
        client.delete("/", recursive=True)
        close(client)


def _leaf_commands() -> list[tuple[str, ...]]:
    from cli.main import _register

    _register()
    out: list[tuple[str, ...]] = []

    def walk(cmd: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in sorted(cmd.commands.items()):
                walk(sub, (*path, name))
        else:
            out.append(path)

    walk(main, ())
    return out


# Commands whose normal path starts long-running work of their own (tested elsewhere with -v's logging).
_NOT_HERE = {("demo",), ("zk", "start")}


def test_verbose_works_on_every_command(tmp_path):
    """`-v` on every command reaches its body and ends in its own exit code, never an internal error."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: tuple[str, ...]) -> tuple[tuple[str, ...], int, str]:
        cmd = main
        for name in path:
            cmd = cmd.commands[name]  # type: ignore[attr-defined]
        names = {p.name for p in cmd.params}
        args = ["-v", *path]
        if "zookeeper" in names:
            args += ["--zookeeper", "127.0.0.1:1"]
        if "log_dir" in names:
            args += ["--log-dir", str(tmp_path / "no-log")]
        if "data_dir" in names:
            args += ["--data-dir", str(tmp_path / "no-zk")]
        for p in cmd.params:  # other required options and arguments get a value that is wrong
            if p.required and p.name not in ("zookeeper", "log_dir", "data_dir"):
                args += (
                    [str(tmp_path / "nothing")] if isinstance(p, click.Argument) else [p.opts[0], "nothing"]
                )
        proc = subprocess.run(
            [*ZK2KRAFT, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
        return path, proc.returncode, proc.stderr

    paths = [p for p in _leaf_commands() if p not in _NOT_HERE]
    assert len(paths) > 20
    with ThreadPoolExecutor(4) as pool:
        for path, code, err in pool.map(one, paths):
            assert code != 70 and "internal error" not in err, (path, err[-2000:])


@pytest.mark.parametrize("command", [["log", "verify"], ["log", "dump"], ["status"]])
def test_unreadable_log_directory_is_one_line_exit_3(command, zk_connect, tmp_path):
    """Mode 000 (tests run as root: without CAP_DAC_* root obeys mode bits as an operator would)."""
    import shutil

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    log_dir.chmod(0)
    try:
        zk = ["--zookeeper", zk_connect] if command == ["status"] else []
        proc = subprocess.run(
            ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *ZK2KRAFT, *command, *zk]
            + ["--log-dir", str(log_dir)],
            capture_output=True,
            text=True,
        )
    finally:
        log_dir.chmod(0o700)
    assert proc.returncode == 3, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("zk2kraft: error: ") and str(log_dir) in line and "Permission denied" in line
