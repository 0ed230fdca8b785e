"""AlterUserScramCredentials and DescribeUserScramCredentials on the controller listener.

Alter is validated as Kafka 3.9's `ScramControlManager.alterCredentials` validates it (a user named
twice in one request, an empty name, an unknown mechanism, iterations outside 4096..16384, a deletion
of a credential that does not exist, each with Kafka's code and message); the client sends the salted
password, from which the controller derives the stored and server keys (RFC 5802) as Kafka's
`ScramFormatter` does. Each surviving deletion or upsertion is one `AdminChange`; the request's go
together to the driver's admin path (see `admin_api`): one batch, durable in the log and carried to
ZooKeeper before the answer.

Describe is a broker API in Kafka (its controller does not list it); it is answered here from the image
so that an admin client bootstrapped from the controller can read back what it wrote, as Metadata is.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module, run_changes
from migrator.controller.managers.change import AdminChange
from migrator.controller.managers.scram import ScramSpec
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.image import SCRAM_MECHANISMS

__all__ = ["handle", "refuse_all", "scram_keys"]

UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
_TWICE = "A user credential cannot be altered twice in the same request"

Outcome = tuple[int, str | None]


def scram_keys(mechanism: str, salted_password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) from SaltedPassword: H(HMAC(sp, "Client Key")), HMAC(sp, "Server Key")."""
    h = _HASH[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    return hashlib.new(h, client_key).digest(), hmac.new(salted_password, b"Server Key", h).digest()


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    if api_key == 50:
        return _describe(service, version, request)
    return _alter(service, apply, version, request)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == 50:
        m = kio_module(50, version, "response")
        return build(
            m.DescribeUserScramCredentialsResponse,
            throttle_time=ZERO,
            error_code=error(code),
            error_message=None,
            results=(),
        )
    users = [x.name for x in (*getattr(request, "deletions", ()), *getattr(request, "upsertions", ()))]
    return _alter_response(version, [(u, code, None) for u in dict.fromkeys(users)])


def _check(name: str, mechanism: int) -> Outcome | None:
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if int(mechanism) not in SCRAM_MECHANISMS:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _alter(service: Any, apply: Any, version: int, request: Any) -> Any:
    image = service.image
    changes: dict[str, AdminChange] = {}
    refused: dict[str, Outcome] = {}

    def admit(name: str, make: Any) -> None:
        if name in refused:
            return
        if changes.pop(name, None) is not None:
            refused[name] = (DUPLICATE_RESOURCE, _TWICE)
            return
        outcome_or_change = make()
        if isinstance(outcome_or_change, AdminChange):
            changes[name] = outcome_or_change
        else:
            refused[name] = outcome_or_change

    def deletion(d: Any) -> AdminChange | Outcome:
        bad = _check(d.name, d.mechanism)
        if bad is not None:
            return bad
        mech = SCRAM_MECHANISMS[int(d.mechanism)]
        if (d.name, mech) not in image.scram_credentials:
            return RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return AdminChange(kind="delete-scram", scram=ScramSpec(user=d.name, mechanism=mech, iterations=0))

    def upsertion(u: Any) -> AdminChange | Outcome:
        bad = _check(u.name, u.mechanism)
        if bad is not None:
            return bad
        if u.iterations < MIN_ITERATIONS:
            return UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if u.iterations > MAX_ITERATIONS:
            return UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        mech = SCRAM_MECHANISMS[int(u.mechanism)]
        stored, server = scram_keys(mech, bytes(u.salted_password))
        spec = ScramSpec(
            user=u.name,
            mechanism=mech,
            iterations=int(u.iterations),
            salt=base64.b64encode(bytes(u.salt)).decode(),
            stored_key=base64.b64encode(stored).decode(),
            server_key=base64.b64encode(server).decode(),
        )
        return AdminChange(kind="upsert-scram", scram=spec)

    for d in request.deletions:
        admit(d.name, lambda d=d: deletion(d))
    for u in request.upsertions:
        admit(u.name, lambda u=u: upsertion(u))
    results: list[tuple[str, int, str | None]] = [
        (name, code, message)
        for name, (code, message, _reply) in zip(
            changes, run_changes(apply, list(changes.values()), False), strict=True
        )
    ]
    results += [(name, code, message) for name, (code, message) in refused.items()]
    return _alter_response(version, results)


def _alter_response(version: int, results: list[tuple[str, int, str | None]]) -> Any:
    m = kio_module(51, version, "response")
    return build(
        m.AlterUserScramCredentialsResponse,
        throttle_time=ZERO,
        results=tuple(
            build(m.AlterUserScramCredentialsResult, user=u, error_code=error(c), error_message=msg)
            for u, c, msg in results
        ),
    )


def _describe(service: Any, version: int, request: Any) -> Any:
    """Kafka's ScramImage.describe: every user when none is named; duplicates and unknowns refused."""
    m = kio_module(50, version, "response")
    creds = service.image.scram_credentials
    if not request.users:
        wanted = {user: False for user, _ in sorted(creds)}
    else:
        wanted = {}
        for u in request.users:
            wanted[u.name] = u.name in wanted
    codes = {v: k for k, v in SCRAM_MECHANISMS.items()}
    results = []
    for user, twice in wanted.items():
        infos = tuple(
            build(m.CredentialInfo, mechanism=codes[mech], iterations=c.iterations)
            for (name, mech), c in sorted(creds.items())
            if name == user and mech in codes
        )
        code, message = E.NONE, None
        if twice:
            code = DUPLICATE_RESOURCE
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
            infos = ()
        elif not infos:
            code = RESOURCE_NOT_FOUND
            message = f"Attempt to describe a user credential that does not exist: {user}"
        results.append(
            build(
                m.DescribeUserScramCredentialsResult,
                user=user,
                error_code=error(code),
                error_message=message,
                credential_infos=infos,
            )
        )
    return build(
        m.DescribeUserScramCredentialsResponse,
        throttle_time=ZERO,
        error_code=error(E.NONE),
        error_message=None,
        results=tuple(results),
    )
