"""CreateAcls, DeleteAcls and DescribeAcls on the controller listener. Each created binding, and each
binding a delete filter matches, is one `AdminChange`; one request's changes go together to the
driver's admin path (see `admin_api`), appended as one batch (Kafka's createAcls/deleteAcls are
atomic); a binding matched by two filters is removed once and reported by both, as in Kafka.
Filters follow Kafka's AclBindingFilter (ANY, MATCH, LITERAL, PREFIXED; null strings match all)."""

from __future__ import annotations

from typing import Any

from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module, run_changes
from migrator.controller.managers.change import AclSpec, AdminChange
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.image import ACL_OPERATIONS, ACL_PERMISSION_TYPES, ACL_RESOURCE_TYPES, PATTERN_TYPES
from migrator.model import Acl

__all__ = ["handle", "matches", "refuse_all"]

INVALID_REQUEST = 42
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
WILDCARD = "*"


def _code(table: dict[int, str], name: str) -> int:
    return next(k for k, v in table.items() if v == name)


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    apply = admin_hook(service)
    if apply is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    if api_key == 29:
        return _describe(service, version, request)
    if api_key == 30:
        return _create(apply, version, request)
    return _delete(service, apply, version, request)


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    if api_key == 29:
        m = kio_module(29, version, "response")
        return build(  # Kafka's getErrorResponse: the error and its message, no resources
            m.DescribeAclsResponse,
            throttle_time=ZERO,
            error_code=error(code),
            error_message=E.MESSAGES.get(code),
            resources=(),
        )
    if api_key == 30:
        return _create_response(version, [(code, None) for _ in getattr(request, "creations", ())])
    return _delete_response(version, [(code, None, []) for _ in getattr(request, "filters", ())])


# --- filters -----------------------------------------------------------------------------------------


def matches(acl: Acl, f: Any, prefix: str = "") -> bool:
    """Kafka's AclBindingFilter.matches over one binding; `prefix` picks the request's field names
    (DeleteAcls says `resource_type_filter`, `principal_filter`, like DescribeAcls)."""
    rtype = int(f.resource_type_filter)
    if rtype != ANY and ACL_RESOURCE_TYPES.get(rtype) != acl.resource_type:
        return False
    name, ptype = f.resource_name_filter, int(getattr(f, "pattern_type_filter", LITERAL))
    if ptype == MATCH:
        if name is not None and not (
            (acl.pattern_type == "LITERAL" and acl.resource_name in (name, WILDCARD))
            or (acl.pattern_type == "PREFIXED" and name.startswith(acl.resource_name))
        ):
            return False
    else:
        if ptype != ANY and PATTERN_TYPES.get(ptype) != acl.pattern_type:
            return False
        if name is not None and name != acl.resource_name:
            return False
    if f.principal_filter is not None and f.principal_filter != acl.principal:
        return False
    if f.host_filter is not None and f.host_filter != acl.host:
        return False
    op, perm = int(f.operation), int(f.permission_type)
    if op != ANY and ACL_OPERATIONS.get(op) != acl.operation:
        return False
    return perm == ANY or ACL_PERMISSION_TYPES.get(perm) == acl.permission_type


def _spec(acl: Acl) -> AclSpec:
    return AclSpec(**acl.model_dump(exclude={"acl_id"}))


# --- CreateAcls ---------------------------------------------------------------------------------------


def _create(apply: Any, version: int, request: Any) -> Any:
    out: list[tuple[int, str | None]] = []
    changes: list[tuple[int, AdminChange]] = []
    for c in request.creations:
        names = (
            ACL_RESOURCE_TYPES.get(int(c.resource_type)),
            PATTERN_TYPES.get(int(getattr(c, "resource_pattern_type", LITERAL))),
            ACL_OPERATIONS.get(int(c.operation)),
            ACL_PERMISSION_TYPES.get(int(c.permission_type)),
        )
        if any(n in (None, "UNKNOWN", "ANY", "MATCH") for n in names):
            out.append((INVALID_REQUEST, "Invalid ACL binding: UNKNOWN, ANY and MATCH are filters only"))
            continue
        rtype, ptype, op, perm = names
        spec = AclSpec(
            resource_type=rtype or "",
            resource_name=c.resource_name,
            pattern_type=ptype or "",
            principal=c.principal,
            host=c.host,
            operation=op or "",
            permission_type=perm or "",
        )
        changes.append((len(out), AdminChange(kind="add-acl", acl=spec)))
        out.append((E.NONE, None))
    for (i, _change), (code, message, _reply) in zip(
        changes, run_changes(apply, [c for _, c in changes], False), strict=True
    ):
        out[i] = (INVALID_REQUEST if code not in (E.NONE, E.NOT_CONTROLLER) else code, message)
    return _create_response(version, out)


def _create_response(version: int, results: list[tuple[int, str | None]]) -> Any:
    m = kio_module(30, version, "response")
    return build(
        m.CreateAclsResponse,
        throttle_time=ZERO,
        results=tuple(
            build(m.AclCreationResult, error_code=error(c), error_message=msg) for c, msg in results
        ),
    )


# --- DeleteAcls ---------------------------------------------------------------------------------------


def _delete(service: Any, apply: Any, version: int, request: Any) -> Any:
    per_filter: list[list[Acl]] = []
    changes: list[AdminChange] = []
    for f in request.filters:
        found: list[Acl] = []
        seen: set[tuple[str, ...]] = set()
        for acl in service.image.acls:
            if matches(acl, f) and acl.key() not in seen:
                seen.add(acl.key())
                found.append(acl)
                changes.append(AdminChange(kind="remove-acl", acl=_spec(acl)))
        per_filter.append(found)
    ran = iter(run_changes(apply, changes, False))
    out: list[tuple[int, str | None, list[tuple[int, str | None, Acl]]]] = []
    for found in per_filter:
        done = [(code, message, acl) for acl, (code, message, _reply) in zip(found, ran, strict=False)]
        out.append((E.NONE, None, done))
    return _delete_response(version, out)


def _delete_response(
    version: int, results: list[tuple[int, str | None, list[tuple[int, str | None, Acl]]]]
) -> Any:
    m = kio_module(31, version, "response")
    return build(
        m.DeleteAclsResponse,
        throttle_time=ZERO,
        filter_results=tuple(
            build(
                m.DeleteAclsFilterResult,
                error_code=error(code),
                error_message=message,
                matching_acls=tuple(
                    build(
                        m.DeleteAclsMatchingAcl,
                        error_code=error(c),
                        error_message=msg,
                        resource_type=_code(ACL_RESOURCE_TYPES, a.resource_type),
                        resource_name=a.resource_name,
                        pattern_type=_code(PATTERN_TYPES, a.pattern_type),
                        principal=a.principal,
                        host=a.host,
                        operation=_code(ACL_OPERATIONS, a.operation),
                        permission_type=_code(ACL_PERMISSION_TYPES, a.permission_type),
                    )
                    for c, msg, a in done
                ),
            )
            for code, message, done in results
        ),
    )


# --- DescribeAcls -------------------------------------------------------------------------------------


def _describe(service: Any, version: int, request: Any) -> Any:
    m = kio_module(29, version, "response")
    groups: dict[tuple[str, str, str], list[Acl]] = {}
    for acl in service.image.acls:
        if matches(acl, request):
            groups.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    resources = tuple(
        build(
            m.DescribeAclsResource,
            resource_type=_code(ACL_RESOURCE_TYPES, rt),
            resource_name=rn,
            pattern_type=_code(PATTERN_TYPES, pt),
            acls=tuple(
                build(
                    m.AclDescription,
                    principal=a.principal,
                    host=a.host,
                    operation=_code(ACL_OPERATIONS, a.operation),
                    permission_type=_code(ACL_PERMISSION_TYPES, a.permission_type),
                )
                for a in acls
            ),
        )
        for (rt, rn, pt), acls in sorted(groups.items())
    )
    return build(
        m.DescribeAclsResponse,
        throttle_time=ZERO,
        error_code=error(E.NONE),
        error_message=None,
        resources=resources,
    )
