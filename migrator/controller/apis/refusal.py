"""A request refused whole, as Kafka's `getErrorResponse` answers it: the error at the top, nothing done.

Kept with the handlers because the admin APIs' refusals echo each item as their own responses do
(`admin_api.refuse_all`); the server, the authorization guard and Envelope all refuse through here.
"""

from __future__ import annotations

from typing import Any

from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from migrator.controller.apis import admin_api
from migrator.controller.protocol import messages as M
from migrator.controller.protocol.kio_apis import NATIVE
from migrator.controller.protocol.wire import RequestHeader, WireError, supported_ranges

__all__ = ["error_response"]


def error_response(header: RequestHeader, code: int, request: Any = None) -> Any:
    """Kafka's answer to a request it refuses as a whole: the error at the top, nothing done.

    AlterPartition and AlterReplicaState echo each partition with the error, as Kafka's
    `getErrorResponse` does, so a broker sees which partitions were refused.
    """
    k = header.api_key
    if k in NATIVE:
        return admin_api.refuse_all(k, header.api_version, request, code)
    if k == M.API_VERSIONS:
        return M.ApiVersionsResponse(code, supported_ranges())
    if k == M.ENVELOPE:  # the envelope refused whole: no inner response (Kafka's getErrorResponse)
        return EnvelopeResponse(response_data=None, error_code=ErrorCode(code))
    if k == M.BROKER_REGISTRATION:
        return M.BrokerRegistrationResponse(code)
    if k == M.BROKER_HEARTBEAT:
        return M.BrokerHeartbeatResponse(code)
    if k == M.ALTER_PARTITION:
        topics = []
        if isinstance(request, M.AlterPartitionRequest):
            topics = [
                M.AlterPartitionTopicResponse(
                    t.topic_name,
                    t.topic_id,
                    [M.AlterPartitionPartitionResponse(p.partition_index, code) for p in t.partitions],
                )
                for t in request.topics
            ]
        return M.AlterPartitionResponse(code, topics)
    if k == M.ALTER_REPLICA_STATE:
        topics2 = []
        if isinstance(request, M.AlterReplicaStateRequest):
            topics2 = [
                M.AlterReplicaStateTopicResponse(
                    t.name, [M.AlterReplicaStatePartitionResponse(p, code) for p in t.partitions]
                )
                for t in request.topics
            ]
        return M.AlterReplicaStateResponse(code, topics2)
    raise WireError(f"unknown apiKey {k}")
