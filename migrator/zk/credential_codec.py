"""Credentials in ZooKeeper: SCRAM credentials (a /config/users key) and delegation tokens
(/delegation_token/tokens/<id> and their change notifications)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from migrator.model import (
    DelegationToken,
    ScramCredential,
)
from migrator.zk.jvm_order import ordered, scala_immutable_cached
from migrator.zk.paths import (
    desanitize,
    sanitize,
)
from migrator.zk.znode_json import (
    I32_MAX,
    I32_MIN,
    I64_MAX,
    I64_MIN,
    REQUIRED,
    ZnodeError,
    get_field,
    get_int,
    get_str,
    get_version,
    json_bytes,
    json_object,
    load_json,
)

__all__ = [
    "DELEGATION_TOKEN_VERSIONS",
    "SCRAM_MECHANISMS",
    "decode_delegation_token",
    "decode_scram",
    "decode_token_change",
    "encode_delegation_token",
    "encode_scram",
    "encode_token_change",
]


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DELEGATION_TOKEN_VERSIONS = (1, 2, 3)


def decode_scram(path: str, user: str, mechanism: str, value: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString; the message never repeats the secret."""
    where = f"{mechanism} credential"
    props: dict[str, str] = {}
    for token in value.split(","):
        i = token.find("=")
        if i <= 0:
            raise ZnodeError(path, f"{where} is not salt=…,stored_key=…,server_key=…,iterations=…")
        props[token[:i]] = token[i + 1 :]
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ZnodeError(path, f"{where} must have exactly salt, stored_key, server_key and iterations")
    try:
        salt, stored_key, server_key = (_b64(props[k]) for k in ("salt", "stored_key", "server_key"))
    except (binascii.Error, ValueError):
        raise ZnodeError(path, f"{where} has a key that is not base64") from None
    iterations = props["iterations"]
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", iterations) or not I32_MIN <= int(iterations) <= I32_MAX:
        raise ZnodeError(path, f"{where} has a non-integer iteration count")
    return ScramCredential(
        user=user,
        mechanism=mechanism,
        salt=salt,
        stored_key=stored_key,
        server_key=server_key,
        iterations=int(iterations),
    )


def _b64(text: str) -> bytes:
    """java.util.Base64's basic decoder: padding optional, nothing outside the alphabet."""
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        raise ValueError("not base64")
    return base64.b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4), validate=True)


def encode_scram(credential: ScramCredential) -> str:
    """ScramCredentialUtils.credentialToString."""
    b64 = base64.b64encode
    return (
        f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
        f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}"
    )


def _principal(path: str, value: str, where: str) -> str:
    try:
        principal = desanitize(value)
    except ValueError:
        raise ZnodeError(path, f"{where} has a bad %-escape") from None
    if ":" not in principal:
        raise ZnodeError(path, f"{where} is not principalType:name")
    return principal


def decode_delegation_token(path: str, data: bytes | None) -> DelegationToken:
    """DelegationTokenManagerZk.fromBytes: principals are URL-sanitized; v1/v2 have no requester."""
    what = "delegation token"
    obj = json_object(path, load_json(path, data, what), what)
    version = get_version(path, obj, what, DELEGATION_TOKEN_VERSIONS)
    owner = _principal(path, get_str(path, obj, "owner", what), f"{what}: owner")
    requester = owner
    if version >= 3:
        requester = _principal(path, get_str(path, obj, "tokenRequester", what), f"{what}: tokenRequester")
    renewers = get_field(path, obj, "renewers", what, REQUIRED)
    if type(renewers) is not list or not all(type(r) is str for r in renewers):
        raise ZnodeError(path, f"{what}: field 'renewers' must be an array of strings")
    return DelegationToken(
        token_id=get_str(path, obj, "tokenId", what),
        owner=owner,
        requester=requester,
        renewers=[_principal(path, r, f"{what}: renewer") for r in renewers],
        issue_timestamp=get_int(path, obj, "issueTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        max_timestamp=get_int(path, obj, "maxTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        expiry_timestamp=get_int(path, obj, "expiryTimestamp", what, lo=I64_MIN, hi=I64_MAX),
        json_version=version,
    )


def encode_delegation_token(token: DelegationToken) -> bytes:
    """DelegationTokenManagerZk.toJsonCompatibleMap: a mutable.Map turned into an immutable one."""
    fields: dict[str, Any] = {"version": token.json_version, "owner": sanitize(token.owner)}
    if token.json_version >= 3:
        fields["tokenRequester"] = sanitize(token.requester)
    fields["renewers"] = [sanitize(r) for r in token.renewers]
    fields["issueTimestamp"] = token.issue_timestamp
    fields["maxTimestamp"] = token.max_timestamp
    fields["expiryTimestamp"] = token.expiry_timestamp
    fields["tokenId"] = token.token_id
    return json_bytes(ordered(fields, scala_immutable_cached(tuple(fields))))


def decode_token_change(path: str, data: bytes | None) -> str:
    """A token change notification holds the token id as raw UTF-8."""
    return (data or b"").decode("utf-8", "replace")


def encode_token_change(token_id: str) -> bytes:
    return token_id.encode()
