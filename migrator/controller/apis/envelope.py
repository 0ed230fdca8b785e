"""Envelope (apiKey 58, KIP-590): a broker forwards a client's admin request to the controller with the
client's principal and address, and the controller runs it as that client.

Kafka 3.9's steps, in its order (ControllerApis.handleEnvelopeRequest, EnvelopeUtils, RequestChannel):

- the envelope's own connection needs CLUSTER_ACTION on the cluster: checked at the listener's one
  authorization seam (``api_acls.REQUIRED[58]``) before this module runs; refused, the envelope is
  answered CLUSTER_AUTHORIZATION_FAILED with no ResponseData and nothing inside is run;
- RequestPrincipal is DefaultKafkaPrincipalBuilder's serde (an int16 version, then DefaultPrincipalData
  of that version): anything else is PRINCIPAL_DESERIALIZATION_FAILURE (97);
- ClientHostAddress is Java's ``InetAddress.getByAddress``: 4 or 16 bytes, else INVALID_REQUEST;
- RequestData is a whole request (header and body, no size): a header that cannot be read is
  UNSUPPORTED_VERSION (Kafka's way to tell a bad inner request from a bad envelope); an apiKey Kafka
  does not forward (Metadata, Envelope itself, ...) is INVALID_REQUEST; a body that cannot be read, or
  a version or API this controller does not serve, is UNSUPPORTED_VERSION;
- the inner request then passes the same authorization as a direct one (the API's cluster ACL, then
  ``authorizer_requests``' per-topic and per-config checks), with the forwarded principal and client
  address as the caller, and the normal dispatch;
- ResponseData is the inner response with its own header (the inner correlation id), the envelope's
  ErrorCode 0 — unless the inner response holds NOT_CONTROLLER anywhere (a DescribeQuorum:
  NOT_LEADER_OR_FOLLOWER): then the envelope itself is NOT_CONTROLLER without ResponseData, so the
  forwarding broker looks for the active controller (what a soft-started controller answers, KIP-866).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from migrator.controller.apis import refusal
from migrator.controller.protocol import kafka_errors as E
from migrator.controller.protocol import wire
from migrator.controller.protocol.wire_bounds import _check_body
from migrator.controller.protocol.wire_versions import _read, _write
from migrator.controller.security.api_acls import CLUSTER_AUTHORIZATION_FAILED, authorize_cluster
from migrator.controller.security.listener_security import Caller, current_caller, forwarded
from migrator.controller.security.principal import java_host_address

__all__ = ["FORWARDABLE", "PRINCIPAL_DESERIALIZATION_FAILURE", "handle", "principal_bytes"]

log = logging.getLogger("zk2kraft.controller.envelope")

PRINCIPAL_DESERIALIZATION_FAILURE = 97
_DESCRIBE_QUORUM = 55
_VERSION = struct.Struct(">h")

#: The apiKeys Kafka marks forwardable (``ApiKeys.forwardable``): CreateTopics, DeleteTopics,
#: CreateAcls, DeleteAcls, AlterConfigs, CreatePartitions, the delegation-token writes, ElectLeaders,
#: IncrementalAlterConfigs, Alter/ListPartitionReassignments, AlterClientQuotas,
#: AlterUserScramCredentials, DescribeQuorum, UpdateFeatures, UnregisterBroker, AllocateProducerIds.
FORWARDABLE = frozenset({19, 20, 30, 31, 33, 37, 38, 39, 40, 43, 44, 45, 46, 49, 51, 55, 57, 64, 67})

_RESULTS = {
    PRINCIPAL_DESERIALIZATION_FAILURE: "principal_deserialization_failure",
    E.INVALID_REQUEST: "invalid_request",
    E.UNSUPPORTED_VERSION: "unsupported_version",
}

Dispatch = Callable[[Any, int, int, Any, "str | None"], Any]


class EnvelopeError(Exception):
    """The envelope is answered ``code`` as a whole, nothing inside run."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def principal_bytes(principal: str, token_authenticated: bool = False) -> bytes:
    """``Type:name`` as DefaultKafkaPrincipalBuilder serializes it (what a forwarding broker sends)."""
    kind, _, name = principal.partition(":")
    body = _write(
        DefaultPrincipalData,
        DefaultPrincipalData(type_=kind, name=name, token_authenticated=token_authenticated),
    )
    return _VERSION.pack(0) + body


def _principal(data: bytes | None) -> str:
    """``Type:name`` from the serde's bytes (KafkaPrincipal.toString, which ACLs name)."""
    if data is None or len(data) < 2:
        raise EnvelopeError(PRINCIPAL_DESERIALIZATION_FAILURE, "no principal data")
    (version,) = _VERSION.unpack_from(data, 0)
    if version != 0:  # DefaultPrincipalData's only version
        raise EnvelopeError(PRINCIPAL_DESERIALIZATION_FAILURE, f"principal data version {version}")
    try:
        _check_body(DefaultPrincipalData, data, 2)
        value, _ = _read(DefaultPrincipalData, data, 2)
    except wire.WireError as e:
        raise EnvelopeError(PRINCIPAL_DESERIALIZATION_FAILURE, f"principal data: {e}") from None
    return f"{value.type_}:{value.name}"


def _client_host(data: bytes) -> str:
    if len(data) not in (4, 16):
        raise EnvelopeError(E.INVALID_REQUEST, f"a client address of {len(data)} bytes")
    return java_host_address(str(ipaddress.ip_address(data)))


def _inner(data: bytes) -> tuple[wire.RequestHeader, Any]:
    try:
        header, _ = wire.decode_request_header(data)
    except wire.WireError as e:
        raise EnvelopeError(E.UNSUPPORTED_VERSION, f"the forwarded request header: {e}") from None
    if header.api_key not in FORWARDABLE:
        raise EnvelopeError(E.INVALID_REQUEST, f"apiKey {header.api_key} is not eligible for forwarding")
    try:
        return wire.decode_request(data)
    except wire.WireError as e:
        raise EnvelopeError(E.UNSUPPORTED_VERSION, f"the forwarded request: {e}") from None


def _codes(entity: Any) -> set[int]:
    """Every error code in a response, at any depth (Kafka's errorCounts)."""
    found: set[int] = set()
    stack = [entity]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple | list):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            for f in dataclasses.fields(item):
                value = getattr(item, f.name)
                if f.name == "error_code" and value is not None:
                    found.add(int(value))
                elif isinstance(value, tuple | list) or dataclasses.is_dataclass(value):
                    stack.append(value)
    return found


def _count(caller: Caller | None, result: str) -> None:
    if caller is not None and caller.envelopes is not None:
        caller.envelopes[result] += 1


def handle(service: Any, version: int, request: Any, dispatch: Dispatch) -> EnvelopeResponse:
    """The envelope's answer: the inner request run as the forwarded client, or the envelope's error."""
    outer = current_caller()
    try:
        principal = _principal(request.request_principal)
        host = _client_host(bytes(request.client_host_address))
        header, inner = _inner(bytes(request.request_data))
    except EnvelopeError as e:
        _count(outer, _RESULTS[e.code])
        log.info("envelope refused (%d): %s", e.code, e)
        return EnvelopeResponse(response_data=None, error_code=ErrorCode(e.code))
    caller = forwarded(outer, principal, host)
    auth = caller.authorizer
    refused = authorize_cluster(auth, principal, host, header.api_key) if auth is not None else 0
    if refused:
        if caller.refused is not None:
            caller.refused["cluster_authorization_failed"] += 1
        response = refusal.error_response(header, CLUSTER_AUTHORIZATION_FAILED, inner)
    else:
        with caller.bound():
            try:
                response = dispatch(service, header.api_key, header.api_version, inner, header.client_id)
            except Exception as e:  # as the listener does for a direct request: the inner one fails alone
                log.error("forwarded %s failed: %s: %s", wire.NAMES[header.api_key], type(e).__name__, e)
                response = refusal.error_response(header, E.UNKNOWN_SERVER_ERROR, inner)
    # DescribeQuorum says "not the controller" as NOT_LEADER_OR_FOLLOWER (Kafka's shouldReturnNotController)
    gone = E.NOT_LEADER_OR_FOLLOWER if header.api_key == _DESCRIBE_QUORUM else E.NOT_CONTROLLER
    if gone in _codes(response):
        _count(outer, "not_controller")
        return EnvelopeResponse(response_data=None, error_code=ErrorCode(E.NOT_CONTROLLER))
    _count(outer, "forwarded")
    payload = wire.encode_response(header, response)[4:]  # header and body, without the frame's size
    return EnvelopeResponse(response_data=payload, error_code=ErrorCode(E.NONE))
