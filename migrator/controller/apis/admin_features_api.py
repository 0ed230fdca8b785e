"""UpdateFeatures (v0-1) on the controller listener, validated as Kafka 3.9's FeatureControlManager.

Each feature is checked on its own (results sorted by name, as Kafka's TreeMap): an unknown upgrade
type, a negative level, a level this controller or a registered broker does not support, a downgrade
without a downgrade type or an upgrade with one each get INVALID_UPDATE_VERSION with Kafka's
message. `metadata.version` is never changed while the ZooKeeper migration is in progress (Kafka's
"Unable to modify metadata.version while a ZK migration is in progress."). The accepted ones become
`FeatureLevelRecord`s appended as one batch (level 0 removes a feature), unless validateOnly (v1).

This controller supports what Kafka 3.9's does in production: metadata.version 1-21 and
kraft.version 0-1; any other feature only at level 0.
"""

from __future__ import annotations

from typing import Any

from migrator.controller import core
from migrator.controller.apis.admin_api import ZERO, admin_hook, build, error, kio_module
from migrator.controller.protocol import kafka_errors as E
from migrator.kraft.records import MetadataRecord, record

__all__ = ["SUPPORTED_FEATURES", "api_versions_features", "handle", "refuse_all"]

METADATA_VERSION = "metadata.version"
#: QuorumFeatures.defaultFeatureMap(false) of Kafka 3.9: feature -> (min, max) level
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {METADATA_VERSION: (1, 21), "kraft.version": (0, 1)}
UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3
_MIGRATING = (1, 2)  # ZkMigrationState MIGRATION, PRE_MIGRATION: inProgress()

Result = tuple[str, int, str | None]


def handle(service: Any, api_key: int, version: int, request: Any) -> Any:
    if admin_hook(service) is None:
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    validate_only = bool(getattr(request, "validate_only", False))
    updates: dict[str, tuple[int, int]] = {}
    for u in request.feature_updates:
        if version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = int(u.upgrade_type) if int(u.upgrade_type) in (1, 2, 3) else UNKNOWN
        updates[u.feature] = (int(u.max_version_level), kind)

    def decide() -> core.Decision:
        records: list[MetadataRecord] = []
        results = [
            (name, *_update(service, name, level, kind, records))
            for name, (level, kind) in sorted(updates.items())
        ]
        return core.Decision([] if validate_only else records, results)

    results = service._decide("UpdateFeatures", decide, None)  # noqa: SLF001 - the one append path
    if results is None:  # fenced meanwhile
        return refuse_all(api_key, version, request, E.NOT_CONTROLLER)
    return _response(version, results, E.NONE)


def api_versions_features(service: Any, answer: Any) -> Any:
    """ApiVersions' feature fields as Kafka's controller fills them (ApiVersionManager): the features
    it supports (those with a minimum of 0 left out, as v0-3 require), the image's finalized levels
    (level 0 left out) with the offset of the image as their epoch, and ZkMigrationReady. What
    DescribeFeatures reads."""
    with service.lock:
        result = service.builder.result
        levels = sorted((n, v) for n, v in result.feature_levels.items() if v != 0)
        epoch = int(result.last_offset)
    answer.supported_features = [(n, lo, hi) for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items()) if lo > 0]
    answer.finalized_features = levels
    answer.finalized_features_epoch = epoch
    answer.zk_migration_ready = bool(service.core.config.zk_migration)
    return answer


def refuse_all(api_key: int, version: int, request: Any, code: int) -> Any:
    """Kafka's getErrorResponse: the error at the top, no per-feature results."""
    return _response(version, [], code, E.MESSAGES.get(code))


def _invalid(name: str, level: int, why: str) -> tuple[int, str]:
    return E.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {name}. {why}"


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _not_supported(level: int, what: str, rng: tuple[int, int]) -> str | None:
    lo, hi = rng
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_text(lo, hi)}"


def _update(
    service: Any, name: str, level: int, kind: int, records: list[MetadataRecord]
) -> tuple[int, str | None]:
    result = service.builder.result
    levels: dict[str, int] = result.feature_levels
    if kind == UNKNOWN:
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    current = levels.get(name, 0)
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    node = service.core.config.node_id
    why = _not_supported(level, f"Local controller {node}", SUPPORTED_FEATURES.get(name, (0, 0)))
    if why is None:
        for bid, broker in sorted(service.image.brokers.items()):
            rng = broker.features.get(name)
            why = _not_supported(
                level, f"broker{bid}", (rng.min_version, rng.max_version) if rng is not None else (0, 0)
            )
            if why is not None:
                break
    if why is not None:
        return _invalid(name, level, why)
    if level < current and kind == UPGRADE:
        return _invalid(
            name,
            level,
            "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
            "unsafe downgrade.",
        )
    if level > current and kind != UPGRADE:
        return _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        return _metadata_version(level, result.migration_state)
    records.append(record("FeatureLevelRecord", 0, Name=name, FeatureLevel=level))
    return E.NONE, None


def _metadata_version(level: int, migration_state: int | None) -> tuple[int, str | None]:
    """updateMetadataVersion's refusals; during a migration every change is refused."""

    def invalid(why: str) -> tuple[int, str]:
        return E.INVALID_UPDATE_VERSION, f"Invalid metadata.version {level}. {why}"

    if not 1 <= level <= SUPPORTED_FEATURES[METADATA_VERSION][1]:
        return invalid("Unknown metadata.version.")
    if migration_state in _MIGRATING:
        return invalid("Unable to modify metadata.version while a ZK migration is in progress.")
    # zk2kraft's controller serves only the migration: after it, Kafka's own controllers take over
    return invalid(
        "zk2kraft does not change metadata.version; Kafka's own controllers do after the migration."
    )


def _response(version: int, results: list[Result], code: int, message: str | None = None) -> Any:
    m = kio_module(57, version, "response")
    return build(
        m.UpdateFeaturesResponse,
        throttle_time=ZERO,
        error_code=error(code),
        error_message=message,
        results=tuple(
            build(m.UpdatableFeatureResult, feature=n, error_code=error(c), error_message=msg)
            for n, c, msg in results
        ),
    )
