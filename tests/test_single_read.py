"""`migrate` reads ZooKeeper for the copy after the claim and reconciles the first sync from that read."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient
from migrate_helpers import assert_consistent, cluster, log_replay

from migrator import commands

pytestmark = pytest.mark.zk


def test_change_between_preflight_and_claim_is_copied(
    zk: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    """The pre-flight read only decides whether to claim: what changes before the claim is still copied."""
    log_dir = tmp_path / "meta"
    with cluster(zk, zk_connect) as generated:
        pending = set(generated.image.pending_deletions)
        gone = sorted(t for t in generated.image.topics if t not in pending)[0]

        def confirm(question: str) -> bool:
            # between the pre-flight read and the claim: a topic disappears from ZooKeeper
            zk.delete(f"/brokers/topics/{gone}", recursive=True)
            zk.delete(f"/config/topics/{gone}", recursive=True)
            return True

        result = commands.migrate(zk_connect, str(log_dir), yes=False, confirm=confirm, brokers_from_zk=True)
        assert result.state_after == "DualWriteMetadata"
        assert result.manifest is not None
        assert result.manifest.topics == len(generated.image.topics) - len(pending) - 1
        replay, _ = log_replay(log_dir)
        assert gone not in replay.image.topics
        # the first sync's repairs (the pending deletion finished) came from the copy's read
        assert any("pending deletion" in str(r) for r in result.repairs)
        zk_image, _ = assert_consistent(zk, log_dir)
        assert gone not in zk_image.topics
