"""AllocateProducerIds (v0) on the controller listener: blocks of producer ids for brokers.

As Kafka 3.9's `ProducerIdControlManager.generateNextProducerId`: the broker's epoch is checked
(`ClusterControlManager.checkBrokerEpoch`: STALE_BROKER_EPOCH when it is not registered or the epoch
differs), then the next block of 1000 ids is handed out and a `ProducerIdsRecord` (BrokerId,
BrokerEpoch, NextProducerId = the block's end + 1) appended. The next block starts where the image's
last one ended: the copy turned ZooKeeper's `/latest_producer_id_block` into the same record (the next
id after the block ZooKeeper handed out), so no id ZooKeeper gave out is given again. The dual-write
writes each new block back to `/latest_producer_id_block` in Kafka's JSON, so a rollback to ZooKeeper
carries on after it. Answered once the record is durable in the log.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import core
from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.image import PRODUCER_ID_BLOCK_SIZE
from migrator.kraft.records import record

__all__ = ["handle", "refuse_all"]

_INT64_MAX = 2**63 - 1

Reply = tuple[int, int, int]  # error code, first id, length


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    broker_id, broker_epoch = int(request.broker_id), int(request.broker_epoch)

    def decide() -> core.Decision:
        image = service.image
        broker = image.brokers.get(broker_id)
        if broker is None:
            why = f"No broker registration found for broker id {broker_id}"
            return core.Decision([], (E.STALE_BROKER_EPOCH, 0, 0), [f"AllocateProducerIds refused: {why}"])
        if broker.broker_epoch != broker_epoch:
            why = f"Expected broker epoch {broker.broker_epoch}, but got broker epoch {broker_epoch}"
            return core.Decision([], (E.STALE_BROKER_EPOCH, 0, 0), [f"AllocateProducerIds refused: {why}"])
        block = image.producer_id_block
        first = 0 if block is None else block.block_end + 1
        if first > _INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
            return core.Decision([], (E.UNKNOWN_SERVER_ERROR, 0, 0), ["producer ids exhausted"])
        rec = record(
            "ProducerIdsRecord",
            0,
            BrokerId=broker_id,
            BrokerEpoch=broker_epoch,
            NextProducerId=first + PRODUCER_ID_BLOCK_SIZE,
        )
        return core.Decision([rec], (E.NONE, first, PRODUCER_ID_BLOCK_SIZE))

    reply = service._decide("AllocateProducerIds", decide, (E.NOT_CONTROLLER, 0, 0))  # noqa: SLF001 - the one append path
    code, first, size = reply
    return _response(version, code, first, size)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    return _response(version, code, 0, 0)


def _response(version: int, code: int, first: int, size: int) -> Any:
    m = kio_module(67, version, "response")
    return build(
        m.AllocateProducerIdsResponse,
        throttle_time=ZERO,
        error_code=error(code),
        producer_id_start=first,
        producer_id_len=size,
    )
