"""The write-behind split (issue 13): `fetch` reads the log where no append runs, `sync(fetched_only=True)`
writes ZooKeeper without that lock. What it writes is what was fetched, in order, and the finalize guard
holds on this path too: nothing after POST_MIGRATION reaches ZooKeeper, however often it is asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import cluster

from migrator import commands
from migrator.errors import FindingsError
from migrator.kraft.log import MetadataLog
from migrator.kraft.records import record
from migrator.migration import driver
from migrator.zk import paths as P

pytestmark = pytest.mark.zk


def _config(value: str) -> list:  # type: ignore[type-arg]
    return [record("ConfigRecord", 0, ResourceType=4, ResourceName="", Name="num.io.threads", Value=value)]


def _zk_value(zk: KazooClient) -> str | None:
    path = P.config_entity_path(P.CONFIG_TYPE_BROKERS, P.DEFAULT_ENTITY)
    if not zk.exists(path):
        return None
    return json.loads(zk.get(path)[0])["config"].get("num.io.threads")  # type: ignore[no-any-return]


@pytest.mark.zk_matrix
def test_fetched_records_are_written_and_the_finalize_guard_holds(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect):
        commands.migrate(zk_connect, str(log_dir), yes=True, brokers_from_zk=True)
    with MetadataLog.open(log_dir, writable=True) as log:
        facts = driver.gather(zk, str(log_dir), log)
        claim, migration = driver._claim(zk, log, facts, 3000, driver._covered(facts, log))
        syncer = driver._syncer(zk, log, claim, migration, facts)
        syncer.fetch()  # no picture of ZooKeeper yet: loads the image; the sync reconciles
        syncer.sync(fetched_only=True)
        assert syncer.inner.ready and syncer.lag() == 0
        log.append(_config("7"), claim.kraft_epoch)
        syncer.fetch()
        log.append(_config("8"), claim.kraft_epoch)  # after the fetch: not written by this sync
        syncer.sync(fetched_only=True)
        assert _zk_value(zk) == "7" and syncer.lag() == 1
        syncer.fetch()
        syncer.sync(fetched_only=True)
        assert _zk_value(zk) == "8" and syncer.lag() == 0
        log.append([record("ZkMigrationStateRecord", 0, ZkMigrationState=3)], claim.kraft_epoch)
        log.append(_config("9"), claim.kraft_epoch)
        for _ in range(2):  # refused again on the next attempt, not only the first
            with pytest.raises(FindingsError, match="POST_MIGRATION at offset"):
                syncer.fetch()
        with pytest.raises(FindingsError, match="POST_MIGRATION at offset"):
            syncer.sync()
        assert _zk_value(zk) == "8"
