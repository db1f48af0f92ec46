"""Factories for assets and asset checks computed by a raystep job spec."""

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from dagster_raystep.resource import OverrideValue, RaystepResource

DEFAULT_RESOURCE_KEY = "raystep"
"""DEFAULT_RESOURCE_KEY is the resource key the factories expect a RaystepResource under.

Their assets and checks take the resource as a typed parameter of that name, so Dagster checks
its type when the definitions load.
"""

_KINDS = {"ray", "raystep"}

SUMMARY_KEY = "summary"
"""SUMMARY_KEY is the text metadata entry of a driver's check result that becomes its description.

Pipes carries no description for an asset check: a driver that reports
`{"summary": "auc 0.886 < threshold 0.99"}` gets that sentence shown as the evaluation's
description, above its metadata.
"""

AssetRef = (
    str | Sequence[str] | dg.AssetKey | dg.AssetsDefinition | dg.AssetSpec | dg.AssetDep
)
"""AssetRef names an upstream asset: a key, its parts, its definition, spec or dependency."""


class RaystepRunConfig(dg.Config):
    """RaystepRunConfig lets a launch (UI launchpad, schedule, test) add `--set` overrides."""

    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="`--set path=value` for this run, e.g. {'spec.timeouts.run': '30m'}.",
    )


def raystep_asset(
    *,
    name: str,
    spec: str | os.PathLike[str],
    key_prefix: str | Sequence[str] | None = None,
    deps: Iterable[AssetRef] | None = None,
    overrides: Mapping[str, OverrideValue] | None = None,
    check_specs: Sequence[dg.AssetCheckSpec] | None = None,
    description: str | None = None,
    group_name: str | None = None,
    owners: Sequence[str] | None = None,
    tags: Mapping[str, str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
    backfill_policy: dg.BackfillPolicy | None = None,
    retry_policy: dg.RetryPolicy | None = None,
) -> dg.AssetsDefinition:
    """Return an asset that is materialized by `raystep run -f spec`.

    The Ray driver reports the materialization (and the results of `check_specs`, if it runs
    them) through Dagster Pipes; raystep adds its own `raystep/...` metadata. `overrides`
    become `--set` arguments, after the resource's and before the run config's.

    With `partitions_def`, the Ray job gets the run's partitions as RAYSTEP_PARTITION_KEY (one
    partition), RAYSTEP_PARTITION_KEY_RANGE_START/_END and, for time partitions,
    RAYSTEP_PARTITION_TIME_WINDOW_START/_END; a spec may use them as `${NAME}`. A backfill makes
    one run (one Ray job) per partition, unless `backfill_policy` is
    `dg.BackfillPolicy.single_run()`: then one Ray job gets the whole range.
    """
    spec_path = os.fspath(spec)

    @dg.asset(
        name=name,
        key_prefix=key_prefix,
        deps=deps,
        check_specs=check_specs,
        description=description
        or f"Materialized on Ray by `raystep run -f {spec_path}`.",
        group_name=group_name,
        owners=owners,
        tags=tags,
        kinds=_KINDS,
        metadata={"raystep/spec": dg.MetadataValue.path(spec_path), **(metadata or {})},
        partitions_def=partitions_def,
        backfill_policy=backfill_policy,
        retry_policy=retry_policy,
    )
    def _asset(
        context: dg.AssetExecutionContext,
        config: RaystepRunConfig,
        raystep: RaystepResource,
    ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult]:
        invocation = raystep.run(
            context, spec_path, overrides={**(overrides or {}), **config.overrides}
        )
        for result in invocation.get_results():
            if isinstance(result, dg.AssetCheckResult):
                result = _described(result)
            yield result

    return _asset


def raystep_asset_check(
    *,
    asset: str | Sequence[str] | dg.AssetKey | dg.AssetsDefinition,
    name: str,
    spec: str | os.PathLike[str],
    overrides: Mapping[str, OverrideValue] | None = None,
    blocking: bool = False,
    description: str | None = None,
    additional_deps: Iterable[AssetRef] | None = None,
    retry_policy: dg.RetryPolicy | None = None,
) -> dg.AssetChecksDefinition:
    """Return an asset check evaluated by `raystep run -f spec`.

    The Ray driver reports the check with `report_asset_check(check_name=name,
    asset_key=...)`; it learns the asset key from the Pipes extras' `asset_checks`. A text
    metadata entry `summary` (the verdict in one sentence) becomes the result's description. With
    `blocking=True` a failed ERROR-severity check stops downstream assets in the same run.
    """
    spec_path = os.fspath(spec)

    @dg.asset_check(
        asset=asset,
        name=name,
        description=description or f"Evaluated on Ray by `raystep run -f {spec_path}`.",
        blocking=blocking,
        additional_deps=additional_deps,
        retry_policy=retry_policy,
        metadata={"raystep/spec": dg.MetadataValue.path(spec_path)},
    )
    def _check(
        context: dg.AssetCheckExecutionContext,
        config: RaystepRunConfig,
        raystep: RaystepResource,
    ) -> dg.AssetCheckResult:
        invocation = raystep.run(
            context, spec_path, overrides={**(overrides or {}), **config.overrides}
        )
        return _described(invocation.get_asset_check_result())

    return _check


def _described(result: dg.AssetCheckResult) -> dg.AssetCheckResult:
    """Return result with its `summary` text metadata as the description, unless it has one."""
    summary = result.metadata.get(SUMMARY_KEY)
    if result.description is not None or not isinstance(summary, dg.TextMetadataValue):
        return result
    return result._replace(description=summary.value)
