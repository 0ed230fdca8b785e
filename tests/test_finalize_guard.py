"""`finalize` requires every broker of the copy to have registered as a KRaft broker, or `--rehearsal`;
`migrate` after finalize prints the real offsets (issue 17 item 3). Real processes, real ZooKeeper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster, run_cli


@pytest.mark.zk
def test_finalize_without_kraft_brokers_is_refused_unless_a_rehearsal(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    where = ["-z", zk_connect, "-l", str(log_dir)]
    with cluster(zk, zk_connect) as generated:
        r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
        assert r.returncode == 0, r.stderr
    assigned = sorted(
        {b for t in generated.image.topics.values() for p in t.partitions.values() for b in p.replicas}
    )
    assert zk.get_children("/brokers/ids") == []  # the ZooKeeper-mode brokers are gone
    r = run_cli(["finalize", "--yes", "--json", *where])
    assert r.returncode == 1, r.stdout + r.stderr
    err = json.loads(r.stdout)["error"]
    assert "have not registered as KRaft brokers" in err["message"] and "--rehearsal" in err["message"]
    assert "never registered with the KRaft controller: " + ", ".join(map(str, assigned)) in err["message"]
    assert json.loads(run_cli(["status", "--json", *where]).stdout)["state"] == "DualWriteMetadata"

    r = run_cli(["finalize", "--yes", "--rehearsal", *where])
    assert r.returncode == 0 and "MigrationFinalized" in r.stdout, r.stdout + r.stderr
    status = json.loads(run_cli(["status", "--json", *where]).stdout)
    end, covered = status["log_end_offset"], status["migration_znode"]["kraft_metadata_offset"]
    assert end > 0 and covered > 0
    r = run_cli(["migrate", "--yes", "--brokers-from-zk", *where])
    assert r.returncode == 0, r.stderr
    assert f"log end offset {end}, /migration offset {covered}," in r.stdout, r.stdout
