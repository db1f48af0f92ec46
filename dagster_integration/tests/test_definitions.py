"""The example Dagster project loads, validates and wires the ads_ranking assets, check and schedule."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import dagster as dg

MODEL = dg.AssetKey("ads_ranking_model")
PREDICTIONS = dg.AssetKey("ads_ranking_predictions")
AUC_CHECK = dg.AssetCheckKey(MODEL, "auc_above_threshold")


def test_definitions_load(example: ModuleType) -> None:
    defs: dg.Definitions = example.defs
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()

    assert set(graph.get_all_asset_keys()) == {MODEL, PREDICTIONS}
    assert graph.asset_check_keys == {AUC_CHECK}
    assert graph.get(PREDICTIONS).parent_keys == {MODEL}
    assert graph.get_check_spec(AUC_CHECK).blocking


def test_specs_exist(example: ModuleType) -> None:
    defs: dg.Definitions = example.defs
    for spec in defs.resolve_all_asset_specs():
        path = Path(spec.metadata["raystep/spec"].value)
        assert path.is_file(), f"{spec.key.to_user_string()}: {path}"


def test_daily_schedule_runs_the_assets_and_check(example: ModuleType) -> None:
    defs: dg.Definitions = example.defs
    schedule = defs.resolve_schedule_def("ads_ranking_daily_retrain")
    assert schedule.cron_schedule == "0 3 * * *"
    assert schedule.execution_timezone == "UTC"

    job = defs.resolve_job_def(schedule.job_name)
    steps = {node.name for node in job.graph.node_defs}
    assert steps == {
        "ads_ranking_model",
        "ads_ranking_model_auc_above_threshold",
        "ads_ranking_predictions",
    }
    graph = defs.resolve_asset_graph()
    assert example.ads_ranking_daily.selection.resolve_checks(graph) == {AUC_CHECK}
    for key in (MODEL, PREDICTIONS):
        assert graph.get(key).partitions_def == example.DAILY, key.to_user_string()


def test_daily_schedule_tick_runs_the_day_that_ended(example: ModuleType) -> None:
    defs: dg.Definitions = example.defs
    schedule = defs.resolve_schedule_def("ads_ranking_daily_retrain")
    tick = datetime(2026, 11, 15, 3, 0, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=tick
        )
        requests = list(schedule.evaluate_tick(context).run_requests or [])
    assert [r.partition_key for r in requests] == ["2026-11-14"]


def test_dagster_cli_validates_the_project(
    repo: Path, example_definitions: Path
) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-f",
            str(example_definitions),
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All code locations passed validation" in result.stdout + result.stderr
