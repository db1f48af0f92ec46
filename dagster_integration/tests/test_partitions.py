"""A daily-partitioned asset from `raystep_asset`, materialized for one day on the shared Ray head.

The spec uses `${RAYSTEP_PARTITION_KEY}` in its entrypoint and in an env var; the Ray driver
opens Dagster Pipes and reports what it got (its argument, the env vars raystep set, the
partition key in the Pipes context) as the materialization's metadata.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster_raystep import RaystepResource, raystep_asset

DRIVER = """\
import os
import sys

from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    pipes.report_asset_materialization(
        metadata={
            "arg": sys.argv[1],
            "day": os.environ["DAY"],
            "key": os.environ["RAYSTEP_PARTITION_KEY"],
            "range": os.environ["RAYSTEP_PARTITION_KEY_RANGE_START"]
            + ".."
            + os.environ["RAYSTEP_PARTITION_KEY_RANGE_END"],
            "window": os.environ["RAYSTEP_PARTITION_TIME_WINDOW_START"]
            + ".."
            + os.environ["RAYSTEP_PARTITION_TIME_WINDOW_END"],
            "context_key": pipes.partition_key,
        }
    )
"""

SPEC = """\
apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: daily-partition, owner: tests}
spec:
  kind: train
  entrypoint: python driver.py ${RAYSTEP_PARTITION_KEY}
  workingDir: driver
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
    env_vars: {DAY: "day-${RAYSTEP_PARTITION_KEY}"}
  timeouts: {provision: 3m, run: 5m}
"""


def test_daily_partition_reaches_the_ray_job(
    raystep_bin: Path,
    raystep_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "driver.py").write_text(DRIVER)
    spec = tmp_path / "daily.yaml"
    spec.write_text(SPEC)
    asset = raystep_asset(
        name="daily_partitioned",
        spec=spec,
        partitions_def=dg.DailyPartitionsDefinition(start_date="2024-03-01"),
    )
    result = dg.materialize(
        [asset],
        partition_key="2024-03-05",
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "raystep": RaystepResource(
                binary=str(raystep_bin),
                backend="local",
                env={**raystep_env, "XDG_STATE_HOME": str(tmp_path / "state")},
            )
        },
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("daily_partitioned")
    assert mat.partition == "2024-03-05"
    got = {
        k: v.value
        for k, v in mat.metadata.items()
        if k in {"arg", "day", "key", "range", "window", "context_key"}
    }
    assert got == {
        "arg": "2024-03-05",
        "day": "day-2024-03-05",
        "key": "2024-03-05",
        "range": "2024-03-05..2024-03-05",
        "window": "2024-03-05T00:00:00Z..2024-03-06T00:00:00Z",
        "context_key": "2024-03-05",
    }
