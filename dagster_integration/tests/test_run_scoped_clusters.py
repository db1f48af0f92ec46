"""The example's daily job with `cluster_reuse="run"` on the local backend: one private head.

Its three steps (model, AUC check, predictions) share one detached private head, recorded in the
test's state dir; the run-status sensor, evaluated through Dagster's sensor testing API on the
run's success event, stops it. Without reuse (the default, "step") the steps make no run-scoped
cluster: test_ads_ranking's materialization checks that, on the shared head (a step's own
private head, started and stopped with it, is what test_wheels and the Go end-to-end tests
prove).
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import dagster as dg
import pytest
from dagster_raystep import RaystepResource, raystep_run_cluster_sensors
from test_ads_ranking import (
    SMALL_STEPS,
    cluster_records,
    example_overrides,
    materialize_daily,
)


def test_daily_job_shares_one_head_per_run(
    example: ModuleType,
    raystep_bin: Path,
    ray_path: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    state = tmp_path / "state"
    raystep = RaystepResource(
        binary=str(raystep_bin),
        backend="local",
        cluster_reuse="run",
        overrides=example_overrides(tmp_path),
        env={"PATH": ray_path, "XDG_STATE_HOME": str(state)},
    )
    instance = dg.DagsterInstance.ephemeral()
    run_ids: list[str] = []
    request.addfinalizer(lambda: [raystep.down_run(r) for r in run_ids])
    started = time.monotonic()
    result = materialize_daily(example, instance, raystep, run_config=SMALL_STEPS)
    wall = time.monotonic() - started
    run_ids.append(result.run_id)
    print(
        f"reuse=run local: wall {wall:.1f}s, heads left: {len(cluster_records(state))}"
    )
    assert result.success
    assert len(result.get_asset_check_evaluations()) == 1
    records = cluster_records(state)
    assert [r["owner"] for r in records] == [f"dagster-run:{result.run_id}"], records
    assert records[0]["name"].startswith("run-")

    fire_success_sensor(raystep, instance, result.run_id)
    assert cluster_records(state) == [], "the sensor stopped the run's head"


def fire_success_sensor(
    raystep: RaystepResource, instance: dg.DagsterInstance, run_id: str
) -> None:
    """Evaluate the run-success sensor of raystep on run_id's success event, as the daemon does."""
    run = instance.get_run_by_id(run_id)
    assert run is not None
    (success,) = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.RUN_SUCCESS
    ).records
    sensor = next(
        s
        for s in raystep_run_cluster_sensors(raystep)
        if s.name == "raystep_run_cluster_success"
    )
    sensor(
        dg.build_run_status_sensor_context(
            sensor_name=sensor.name,
            dagster_instance=instance,
            dagster_run=run,
            dagster_event=success.event_log_entry.dagster_event,
        )
    )
