"""The demo's phase 3 of the runbook: the simulated brokers restarted one by one in KRaft mode.

Each broker shuts down in a controlled way, leaves ZooKeeper, and comes back as a KRaft broker that
fetches `__cluster_metadata` from the controller over Kafka's Raft protocol with its own fetch loop
(zk_fixtures.kraft_broker) and replays it into its own metadata cache. After every restart the demo
waits until every KRaft broker so far has fetched up to the controller's committed offset and holds
exactly the controller's image, and prints it: ZooKeeper-mode and KRaft brokers side by side.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from zk_fixtures.kraft_broker import MetadataFollower, equal_to_controller, restart_in_kraft_mode

if TYPE_CHECKING:
    from cli.demo_cmd import DemoContext

__all__ = ["run_kraft_restarts"]


def run_kraft_restarts(ctx: DemoContext) -> None:
    sim, running = ctx.simulator, ctx.controller
    if sim is None or running is None or running.service is None:
        ctx.failures.append("no controller or simulated brokers to restart in KRaft mode")
        return
    service = running.service
    ids = sorted(sim.brokers)
    followers: list[MetadataFollower] = []
    for n, broker_id in enumerate(ids, start=1):
        t0 = time.perf_counter()
        try:
            kraft = restart_in_kraft_mode(sim, broker_id, ctx.brokers)
        except TimeoutError as e:
            ctx.failures.append(f"broker {broker_id} did not come back in KRaft mode: {e}")
            return
        assert kraft.follower is not None
        followers.append(kraft.follower)
        at = equal_to_controller(service, followers)
        if at is None:
            ctx.failures.append(f"after restarting broker {broker_id}: a KRaft broker's cache differs")
            return
        f = kraft.follower
        image = f.cache()
        got = f"a snapshot at {f.snapshot[0]} and the log after it" if f.snapshot else "the log from offset 0"
        zk_mode = ids[n:]
        ctx.console.print(
            f"  Broker {broker_id} restarted in KRaft mode in {time.perf_counter() - t0:.1f}s: registered without "
            f"the migration flag (broker epoch {kraft.epoch}), fetched {got} over Raft, unfenced; its cache equals "
            f"the controller's image at offset {at} ({len(image.topics)} topics, {image.partition_count()} "
            f"partitions, {len(image.brokers)} brokers), as do the {len(followers) - 1} KRaft brokers before it"
            + (f"; ZooKeeper-mode still: {', '.join(map(str, zk_mode))}." if zk_mode else ".")
        )
    migrating = sorted(b for b, reg in service.image.brokers.items() if reg.is_migrating_zk_broker)
    if migrating:
        ctx.failures.append(f"brokers still registered as migrating ZooKeeper brokers: {migrating}")
    ctx.console.print(
        f"Every broker is a KRaft broker following the metadata log ({len(ids)} of {len(ids)}); "
        "none is registered in ZooKeeper any more."
    )
