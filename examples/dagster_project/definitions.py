"""Dagster definitions for the ads_ranking example: train, evaluate and score on Ray with raystep.

Load with `dagster dev -f examples/dagster_project/definitions.py` (or `-m definitions` with
`-d examples/dagster_project`). Each asset and the AUC check run one spec in
examples/ads_ranking/ through `raystep run`, on the embedded local Ray by default.

- `ads_ranking_model`: trains the click model (train.yaml).
- `auc_above_threshold` on `ads_ranking_model`: evaluates it on held-out data (eval.yaml);
  blocking, so a model below the AUC bar never reaches batch inference in the same run.
- `ads_ranking_predictions`: scores a batch with the model (batch_inference.yaml).
- `ads_ranking_daily`: the three of them, for one day, run at 03:00 UTC for the day before.

Model and predictions are daily-partitioned: raystep gives each step its partition key as
RAYSTEP_PARTITION_KEY, and the drivers train, check and score on that day's data into that day's
directory (examples/ads_ranking/ads_data.py), so every day keeps its own model and predictions and
a backfill of N days (from the UI, or `dagster job backfill -j ads_ranking_daily --from D1 --to
D2`) makes N runs, one Ray job per step and day.

The raystep binary is $RAYSTEP_BIN, else the repository's bin/raystep (`make build`).

The steps of one run share one cluster: the resource's `run_cluster` (run_cluster.yaml) replaces
each step's cluster section, so a run provisions one cluster instead of three, and the run-status
sensors (`dagster dev` runs them) remove it when the run ends.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster_raystep import (
    RAYSTEP_BIN_ENV,
    RaystepResource,
    raystep_asset,
    raystep_asset_check,
    raystep_run_cluster_sensors,
)

EXAMPLES = Path(__file__).resolve().parent.parent
SPECS = EXAMPLES / "ads_ranking"
REPO_BINARY = EXAMPLES.parent / "bin" / "raystep"

DAILY = dg.DailyPartitionsDefinition(start_date="2026-01-01", timezone="UTC")
"""DAILY is the day partitions of the model and its predictions, one per UTC day."""

ads_ranking_model = raystep_asset(
    name="ads_ranking_model",
    spec=SPECS / "train.yaml",
    group_name="ads_ranking",
    owners=["team:ads-ranking"],
    description="Click-through model for ad ranking: logistic regression trained data-parallel on Ray.",
    partitions_def=DAILY,
)

ads_ranking_model_auc = raystep_asset_check(
    asset=ads_ranking_model,
    name="auc_above_threshold",
    spec=SPECS / "eval.yaml",
    blocking=True,
    description="Held-out AUC of the model is at least ADS_AUC_THRESHOLD (eval.yaml).",
)

ads_ranking_predictions = raystep_asset(
    name="ads_ranking_predictions",
    spec=SPECS / "batch_inference.yaml",
    deps=[ads_ranking_model],
    group_name="ads_ranking",
    owners=["team:ads-ranking"],
    description="Click probabilities for the day's candidate ads, scored with Ray Data, as Parquet.",
    partitions_def=DAILY,
)

ads_ranking_daily = dg.define_asset_job(
    "ads_ranking_daily",
    selection=dg.AssetSelection.assets(ads_ranking_model, ads_ranking_predictions),
    description="Retrain the ads click model on a day's data, check its AUC, then score the day's ads.",
)

ads_ranking_daily_schedule = dg.build_schedule_from_partitioned_job(
    ads_ranking_daily,
    name="ads_ranking_daily_retrain",
    hour_of_day=3,
    minute_of_hour=0,
    description="At 03:00 UTC, retrain on yesterday: the day that has just ended.",
)


RUN_CLUSTER = SPECS / "run_cluster.yaml"


def raystep_resource() -> RaystepResource:
    """Return the resource the example runs with: $RAYSTEP_BIN or the repository's binary.

    The steps of a run share the cluster of RUN_CLUSTER.
    """
    binary = dg.EnvVar(RAYSTEP_BIN_ENV).get_value() or (
        str(REPO_BINARY) if REPO_BINARY.exists() else None
    )
    return RaystepResource(binary=binary, run_cluster=str(RUN_CLUSTER))


defs = dg.Definitions(
    assets=[ads_ranking_model, ads_ranking_predictions],
    asset_checks=[ads_ranking_model_auc],
    jobs=[ads_ranking_daily],
    schedules=[ads_ranking_daily_schedule],
    sensors=raystep_run_cluster_sensors(
        raystep_resource(), monitored_jobs=[ads_ranking_daily]
    ),
    resources={"raystep": raystep_resource()},
)
