"""AlterClientQuotas and DescribeClientQuotas on the controller listener.

Alter: each entry (one entity, its set and remove ops) is one `AdminChange` (set-quota, which may
remove keys too, or remove-quota), valid whole or refused whole; the request's changes go together to
the driver's admin path (see `admin_api`), appended as one batch and carried to ZooKeeper
(`/config/users`, `/config/clients`, `/config/ips` plus a change notification) before the answer.
Refusals are Kafka's INVALID_REQUEST with the reason.

Describe is a broker API in Kafka; it is answered here from the image with Kafka's filter rules
(`ClientQuotasImage.describe`: exact, default and any-name components, strict matching, IP filters
not mixed with user/client-id) so an admin client bootstrapped from the controller can read back what
it wrote.
"""

from __future__ import annotations

from typing import Any

from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module, run_changes
from migrator.controller.managers.change import AdminChange
from migrator.controller.protocol import kafka_errors as E

__all__ = ["handle", "refuse_all"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # ComponentData.MatchType


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    if api_key == 48:
        return _describe(service, version, request)
    return _alter(apply, version, request)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == 48:
        m = kio_module(48, version, "response")
        return build(
            m.DescribeClientQuotasResponse,
            throttle_time=ZERO,
            error_code=error(code),
            error_message=None,
            entries=None,
        )
    return _alter_response(version, [(e.entity, code, None) for e in getattr(request, "entries", ())])


# --- AlterClientQuotas --------------------------------------------------------------------------------


def _change(entry: Any) -> AdminChange:
    entity: dict[str, str | None] = {}
    for e in entry.entity:
        if e.entity_type in entity:
            raise _Refused(E.INVALID_REQUEST, f"Invalid entity type {e.entity_type} appears more than once")
        entity[e.entity_type] = e.entity_name
    if not entity:
        raise _Refused(E.INVALID_REQUEST, "Invalid empty client quota entity")
    sets: dict[str, float] = {}
    removes: list[str] = []
    for op in entry.ops:
        if op.key in sets or op.key in removes:
            raise _Refused(E.INVALID_REQUEST, f"Duplicate quota key {op.key} not updating quota for {entity}")
        if op.remove:
            removes.append(op.key)
        else:
            sets[op.key] = float(op.value)
    if sets:
        return AdminChange(kind="set-quota", quota_entity=entity, quota_values=sets, quota_remove=removes)
    return AdminChange(kind="remove-quota", quota_entity=entity, quota_remove=removes)


def _alter(apply: Any, version: int, request: Any) -> Any:
    validate_only = bool(getattr(request, "validate_only", False))
    results: list[tuple[Any, int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    for entry in request.entries:
        try:
            changes.append((len(results), _change(entry)))
        except _Refused as e:
            results.append((entry.entity, e.code, str(e)))
        else:
            results.append((entry.entity, E.NONE, None))
    ran = run_changes(apply, [c for _, c in changes], validate_only)
    for (i, _), (code, message, _reply) in zip(changes, ran, strict=True):
        if code not in (E.NONE, E.NOT_CONTROLLER, E.UNKNOWN_SERVER_ERROR):
            code = E.INVALID_REQUEST  # every refusal of an entry's ops is Kafka's INVALID_REQUEST
        results[i] = (results[i][0], code, message)
    return _alter_response(version, results)


def _alter_response(version: int, results: list[tuple[Any, int, str | None]]) -> Any:
    m = kio_module(49, version, "response")
    return build(
        m.AlterClientQuotasResponse,
        throttle_time=ZERO,
        entries=tuple(
            build(
                m.EntryData,
                error_code=error(code),
                error_message=message,
                entity=tuple(
                    build(m.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entity
                ),
            )
            for entity, code, message in results
        ),
    )


# --- DescribeClientQuotas -----------------------------------------------------------------------------


def _filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise _Refused(E.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise _Refused(
                E.INVALID_REQUEST, f"Entity type {kind} cannot appear more than once in the filter."
            )
        if kind not in (USER, CLIENT_ID, IP):
            raise _Refused(E.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        match = int(c.match_type)
        if match == EXACT:
            if c.match is None:
                raise _Refused(
                    E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[kind] = c.match
        elif match == DEFAULT:
            if c.match is not None:
                raise _Refused(
                    E.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif match == SPECIFIED:
            if c.match is not None:
                raise _Refused(
                    E.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            typed.add(kind)
        else:
            raise _Refused(E.UNSUPPORTED_VERSION, f"Unknown match type {match}")
    used = set(exact) | typed
    if IP in used and used & {USER, CLIENT_ID}:
        raise _Refused(
            E.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        )
    return exact, typed


def _matches(
    entity: dict[str, str | None], exact: dict[str, str | None], typed: set[str], strict: bool
) -> bool:
    if strict and len(entity) != len(exact) + len(typed):
        return False
    return all(k in entity and entity[k] == v for k, v in exact.items()) and all(k in entity for k in typed)


def _describe(service: Any, version: int, request: Any) -> Any:
    m = kio_module(48, version, "response")
    try:
        exact, typed = _filter(request.components)
    except _Refused as e:
        return build(
            m.DescribeClientQuotasResponse,
            throttle_time=ZERO,
            error_code=error(e.code),
            error_message=str(e),
            entries=None,
        )
    entries = tuple(
        build(
            m.EntryData,
            entity=tuple(build(m.EntityData, entity_type=k, entity_name=v) for k, v in q.entity.items()),
            values=tuple(build(m.ValueData, key=k, value=v) for k, v in sorted(q.values.items())),
        )
        for q in service.image.client_quotas
        if q.values and _matches(q.entity, exact, typed, bool(request.strict))
    )
    return build(
        m.DescribeClientQuotasResponse,
        throttle_time=ZERO,
        error_code=error(E.NONE),
        error_message=None,
        entries=entries,
    )
