"""`RaystepAssetComponent`: an asset and its checks, each a raystep spec, declared in a `defs.yaml`.

    type: dagster_raystep.RaystepAssetComponent
    attributes:
      spec: train.yaml                 # relative to this defs.yaml's folder
      key: ads_ranking_model
      group_name: ads_ranking
      partitions: {type: daily, start_date: "2026-01-01", timezone: UTC}
      checks:
        - {name: auc_above_threshold, spec: eval.yaml, blocking: true}

The component builds what `raystep_asset` and `raystep_asset_check` build from the same
arguments, so a project can move between Python and YAML without its definitions changing.
`resource`, when given, also defines the `raystep` resource (`RaystepResource`'s fields; `{}` for
its defaults). Components that give the same settings share one resource; a project whose
components give different ones, or that also defines `raystep` in Python, fails to load with
Dagster's error about two resources under one key.
`dg scaffold defs dagster_raystep.RaystepAssetComponent PATH` writes a defs.yaml, a spec and a
Ray driver that reports its materialization through Dagster Pipes.
"""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from dagster.components import scaffold_component
from pydantic import Field

from dagster_raystep.assets import (
    DEFAULT_RESOURCE_KEY,
    raystep_asset,
    raystep_asset_check,
)
from dagster_raystep.resource import RaystepResource


class DailyPartitions(dg.Model):
    """One partition per day."""

    type: Literal["daily"] = "daily"
    start_date: str
    end_date: str | None = None
    timezone: str | None = None
    hour_offset: int = 0
    minute_offset: int = 0


class HourlyPartitions(dg.Model):
    """One partition per hour."""

    type: Literal["hourly"] = "hourly"
    start_date: str
    end_date: str | None = None
    timezone: str | None = None
    minute_offset: int = 0


class WeeklyPartitions(dg.Model):
    """One partition per week."""

    type: Literal["weekly"] = "weekly"
    start_date: str
    end_date: str | None = None
    timezone: str | None = None
    day_offset: int = 0
    hour_offset: int = 0
    minute_offset: int = 0


class StaticPartitions(dg.Model):
    """A fixed list of partition keys."""

    type: Literal["static"] = "static"
    partition_keys: list[str]


Partitions = DailyPartitions | HourlyPartitions | WeeklyPartitions | StaticPartitions


def partitions_def(model: Partitions | None) -> dg.PartitionsDefinition | None:
    """Return the PartitionsDefinition that model describes."""
    if model is None:
        return None
    if isinstance(model, StaticPartitions):
        return dg.StaticPartitionsDefinition(model.partition_keys)
    if isinstance(model, DailyPartitions):
        return dg.DailyPartitionsDefinition(
            start_date=model.start_date,
            end_date=model.end_date,
            timezone=model.timezone,
            hour_offset=model.hour_offset,
            minute_offset=model.minute_offset,
        )
    if isinstance(model, HourlyPartitions):
        return dg.HourlyPartitionsDefinition(
            start_date=model.start_date,
            end_date=model.end_date,
            timezone=model.timezone,
            minute_offset=model.minute_offset,
        )
    return dg.WeeklyPartitionsDefinition(
        start_date=model.start_date,
        end_date=model.end_date,
        timezone=model.timezone,
        day_offset=model.day_offset,
        hour_offset=model.hour_offset,
        minute_offset=model.minute_offset,
    )


class BackfillPolicy(dg.Model):
    """How a backfill runs the asset: one run per partition (multi_run), or one for all."""

    type: Literal["single_run", "multi_run"]
    max_partitions_per_run: int = 1

    def resolve(self) -> dg.BackfillPolicy:
        if self.type == "single_run":
            return dg.BackfillPolicy.single_run()
        return dg.BackfillPolicy.multi_run(self.max_partitions_per_run)


class RaystepCheck(dg.Model):
    """An asset check of the component's asset, run by `raystep run -f spec`."""

    name: str
    spec: str = Field(
        description="The check's raystep spec, relative to the defs.yaml's folder."
    )
    overrides: dict[str, str] = Field(default_factory=dict)
    blocking: bool = False
    description: str | None = None


class RaystepScaffolder(dg.Scaffolder[Any]):
    """Writes a defs.yaml with one asset, its spec (step.yaml) and its Ray driver (main.py)."""

    def scaffold(self, request: dg.ScaffoldRequest[Any]) -> None:
        name = request.target_path.name.replace("-", "_")
        scaffold_component(
            request,
            {"spec": "step.yaml", "key": name, "overrides": {}, "resource": {}},
        )
        owner = (
            re.sub(r"[^a-z0-9-]+", "-", getpass.getuser().lower()).strip("-") or "me"
        )
        spec_name = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "step"
        (request.target_path / "step.yaml").write_text(
            STARTER_SPEC.format(spec_name=spec_name, owner=owner)
        )
        (request.target_path / "main.py").write_text(STARTER_DRIVER)


STARTER_SPEC = """\
apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {{name: {spec_name}, owner: {owner}}}
spec:
  kind: batch_inference
  entrypoint: python main.py
  workingDir: .
  cluster:
    rayVersion: "2.60.0"
    image: rayproject/ray:2.60.0
  timeouts: {{provision: 10m, run: 1h}}
"""

STARTER_DRIVER = """\
import ray
from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    ray.init()
    total = sum(ray.get([ray.remote(lambda i: i * i).remote(i) for i in range(100)]))
    pipes.log.info(f"sum of squares: {total}")
    pipes.report_asset_materialization(metadata={"sum_of_squares": total})
"""


@dg.scaffold_with(RaystepScaffolder)
class RaystepAssetComponent(dg.Component, dg.Model, dg.Resolvable):
    """An asset materialized by `raystep run -f spec`, with the checks that other specs run."""

    spec: str = Field(
        description="The asset's raystep spec, relative to the defs.yaml's folder."
    )
    key: str = Field(
        description='The asset key, "/" between its parts: "ads/ranking_model".'
    )
    deps: list[str] = Field(default_factory=list, description="Upstream asset keys.")
    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="`--set path=value` for every run of the asset.",
    )
    description: str | None = None
    group_name: str | None = None
    owners: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    partitions: Partitions | None = None
    backfill_policy: BackfillPolicy | None = None
    checks: list[RaystepCheck] = Field(default_factory=list)
    resource: dict[str, Any] | None = Field(
        default=None,
        description="RaystepResource's fields: defines the `raystep` resource as well.",
    )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """Return the asset, its checks and, with `resource`, the raystep resource."""
        folder = Path(context.path)
        *prefix, name = dg.AssetKey.from_user_string(self.key).path
        asset = raystep_asset(
            spec=_spec(folder, self.spec, "spec"),
            name=name,
            key_prefix=prefix or None,
            deps=[dg.AssetKey.from_user_string(d) for d in self.deps] or None,
            overrides=self.overrides or None,
            description=self.description,
            group_name=self.group_name,
            owners=self.owners or None,
            tags=self.tags or None,
            partitions_def=partitions_def(self.partitions),
            backfill_policy=self.backfill_policy.resolve()
            if self.backfill_policy
            else None,
        )
        checks = [
            raystep_asset_check(
                asset=asset,
                name=check.name,
                spec=_spec(folder, check.spec, f"checks[{i}].spec"),
                overrides=check.overrides or None,
                blocking=check.blocking,
                description=check.description,
            )
            for i, check in enumerate(self.checks)
        ]
        resources = (
            {}
            if self.resource is None
            else {DEFAULT_RESOURCE_KEY: _resource(self.resource)}
        )
        return dg.Definitions(assets=[asset], asset_checks=checks, resources=resources)


_resources: dict[str, RaystepResource] = {}


def _resource(settings: dict[str, Any]) -> RaystepResource:
    """Return the RaystepResource of settings: one object for equal settings.

    Dagster merges the components' definitions and refuses two different objects under one
    resource key, so components that give the same settings share one resource.
    """
    key = json.dumps(settings, sort_keys=True)
    if key not in _resources:
        _resources[key] = RaystepResource(**settings)
    return _resources[key]


def _spec(folder: Path, spec: str, field: str) -> Path:
    """Return spec resolved against folder; a clear error names the field if it is no file."""
    path = (folder / spec).resolve()
    if not path.is_file():
        msg = f"{folder / 'defs.yaml'}: {field}: {spec!r} is not a file ({path})"
        raise dg.DagsterInvalidDefinitionError(msg)
    return path
