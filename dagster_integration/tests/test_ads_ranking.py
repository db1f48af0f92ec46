"""End to end: Dagster materializes the ads_ranking assets through dagster-raystep and the real bin/raystep.

Each step runs `raystep run` with the local backend on the shared Ray head (conftest's ray_head:
the head's own start and end are what the Go tests and test_wheels prove), submits the
example's Ray entrypoint, relays the driver's Pipes messages and stops its job. Every
materialization is a Dagster run of its own, so no two steps share a Ray job. Model and
predictions go to the test's temporary directory.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import ModuleType
from urllib.parse import urlparse

import dagster as dg
import pyarrow.parquet as pq
import pytest
from dagster_raystep import EXIT_CODES, RaystepResource

DAY = "2026-11-30"
"""DAY is the partition the tests materialize: the example's assets are daily-partitioned."""

MODEL_NODE = "ads_ranking_model"
CHECK_NODE = "ads_ranking_model_auc_above_threshold"
PREDICTIONS_NODE = "ads_ranking_predictions"


@pytest.fixture
def raystep(
    raystep_bin: Path,
    raystep_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RaystepResource:
    """The resource on the local backend and the shared head, with the example's outputs in tmp_path.

    Its state dir is tmp_path/state: a step that made a run-scoped cluster would leave a record
    there (cluster_reuse defaults to "step": none).
    """
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return RaystepResource(
        binary=str(raystep_bin),
        backend="local",
        overrides=example_overrides(tmp_path),
        env={**raystep_env, "XDG_STATE_HOME": str(tmp_path / "state")},
    )


def cluster_records(state: Path) -> list[dict]:
    """The local clusters recorded in the state dir state (XDG_STATE_HOME)."""
    clusters = state / "raystep" / "clusters"
    return (
        [json.loads(p.read_text()) for p in sorted(clusters.glob("*.json"))]
        if clusters.is_dir()
        else []
    )


def example_overrides(tmp_path: Path) -> dict[str, str]:
    """Spec overrides that keep the example's outputs in tmp_path and bound its timeouts."""
    return {
        "spec.runtimeEnv.env_vars.ADS_MODEL_DIR": str(tmp_path / "model"),
        "spec.runtimeEnv.env_vars.ADS_PREDICTIONS_DIR": str(tmp_path / "predictions"),
        "spec.timeouts.provision": "3m",
        "spec.timeouts.run": "5m",
    }


def _float(metadata: dict, key: str) -> float:
    value = metadata[key]
    assert isinstance(value, dg.FloatMetadataValue), f"{key}: {value!r}"
    assert value.value is not None
    return value.value


def _int(metadata: dict, key: str) -> int:
    value = metadata[key]
    assert isinstance(value, dg.IntMetadataValue), f"{key}: {value!r}"
    assert value.value is not None
    return value.value


def _text(metadata: dict, key: str) -> str:
    value = metadata[key]
    assert isinstance(value, dg.TextMetadataValue), f"{key}: {value!r}"
    assert value.value
    return value.value


def _assert_raystep_metadata(metadata: dict) -> None:
    """raystep's own keys: where the job ran and how long each phase took."""
    url = metadata["raystep/dashboard_url"]
    assert isinstance(url, dg.UrlMetadataValue), repr(url)
    parsed = urlparse(url.value)
    assert parsed.scheme in ("http", "https") and parsed.hostname, url.value
    _text(metadata, "raystep/ray_job_id")
    _text(metadata, "raystep/submission_id")
    assert _text(metadata, "raystep/backend") == "local"
    durations = {key for key in metadata if key.startswith("raystep/duration_")}
    assert {"raystep/duration_run_s", "raystep/duration_total_s"} <= durations
    for key in durations:
        assert _float(metadata, key) >= 0.0


def _event_log_text(instance: dg.DagsterInstance, run_id: str) -> str:
    """Every event of the run as text: log messages, engine events with errors, step failures."""
    return "\n".join(str(entry) for entry in instance.all_logs(run_id))


def _raystep_warnings(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """raystep's own WARNING (or worse) log events of the run: its notices and phase warnings."""
    return [
        entry.user_message
        for entry in instance.all_logs(run_id)
        if entry.level >= logging.WARNING and entry.user_message.startswith("raystep")
    ]


# SMALL_STEPS is run config that has the daily job's three steps train, check and score a fifth
# to a tenth of the example's rows, on one actor: for tests about where the steps run and which
# cluster they share, not about what they compute. The Ray jobs are the same scripts.
SMALL_STEPS = {
    "ops": {
        op: {"config": {"overrides": {"spec.entrypoint": entrypoint}}}
        for op, entrypoint in {
            "ads_ranking_model": "python train.py --epochs 1 --rows 40000 --workers 1 --seed 7",
            "ads_ranking_model_auc_above_threshold": "python eval.py --rows 20000 --shards 2 --seed 7",
            "ads_ranking_predictions": "python batch_inference.py --rows 20000 --seed 7",
        }.items()
    }
}


def materialize_daily(
    example: ModuleType,
    instance: dg.DagsterInstance,
    raystep: RaystepResource,
    *,
    raise_on_error: bool = True,
    partition_key: str = DAY,
    run_config: dict | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize the example's daily job (model, AUC check, predictions) for one day with raystep."""
    return dg.materialize(
        [
            example.ads_ranking_model,
            example.ads_ranking_model_auc,
            example.ads_ranking_predictions,
        ],
        instance=instance,
        resources={"raystep": raystep},
        raise_on_error=raise_on_error,
        partition_key=partition_key,
        run_config=run_config,
    )


def test_materialize_model_check_and_predictions(
    example: ModuleType, raystep: RaystepResource, tmp_path: Path
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    result = materialize_daily(example, instance, raystep)
    assert result.success

    model = result.asset_materializations_for_node(MODEL_NODE)
    assert len(model) == 1
    assert model[0].partition == DAY
    metadata = dict(model[0].metadata)
    assert _text(metadata, "day") == DAY
    assert 0.0 < _float(metadata, "loss") < 0.69
    assert 0.7 <= _float(metadata, "auc") <= 1.0
    assert _int(metadata, "rows") == 200_000
    assert _int(metadata, "epochs") == 3
    _assert_raystep_metadata(metadata)
    assert model[0].tags.get("dagster/data_version") == _text(metadata, "model_version")
    assert (tmp_path / "model" / DAY / "model.npz").is_file()

    (check,) = result.get_asset_check_evaluations()
    assert _text(dict(check.metadata), "day") == DAY
    assert check.asset_check_key == dg.AssetCheckKey(
        dg.AssetKey(MODEL_NODE), "auc_above_threshold"
    )
    assert check.passed
    assert check.severity == dg.AssetCheckSeverity.ERROR
    assert (
        _float(dict(check.metadata), "auc")
        >= _float(dict(check.metadata), "threshold")
        == 0.7
    )
    assert _float(dict(check.metadata), "log_loss") > 0.0
    auc = _float(dict(check.metadata), "auc")
    assert check.description == f"auc {auc:.3f} >= threshold 0.7"

    (predictions,) = result.asset_materializations_for_node(PREDICTIONS_NODE)
    assert predictions.partition == DAY
    metadata = dict(predictions.metadata)
    assert _text(metadata, "day") == DAY
    assert _int(metadata, "rows") == 200_000
    assert _float(metadata, "rows_per_second") > 0.0
    _assert_raystep_metadata(metadata)
    assert pq.read_table(tmp_path / "predictions" / DAY).num_rows == 200_000

    logs = _event_log_text(instance, result.run_id)
    assert "epoch 3/3" in logs, "the driver's Pipes log messages reach Dagster"
    assert _raystep_warnings(instance, result.run_id) == [], (
        "a default materialization of the example warns about nothing"
    )
    assert cluster_records(tmp_path / "state") == [], (
        "without cluster_reuse the steps make no run-scoped cluster"
    )


def test_failing_train_step_fails_with_raystep_error(
    example: ModuleType, raystep: RaystepResource
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    # The marker is computed by the driver, so it cannot come from the command line Dagster logs.
    entrypoint = 'python -c \'import sys; sys.exit("driver-" + "boom")\''
    result = dg.materialize(
        [example.ads_ranking_model],
        instance=instance,
        resources={"raystep": raystep},
        run_config=dg.RunConfig(
            {MODEL_NODE: {"config": {"overrides": {"spec.entrypoint": entrypoint}}}}
        ),
        raise_on_error=False,
        partition_key=DAY,
    )
    assert not result.success
    assert result.get_asset_materialization_events() == []
    failure = result.failure_data_for_node(MODEL_NODE)
    assert failure is not None and failure.user_failure_data is not None
    description = failure.user_failure_data.description or ""
    assert (
        f"exited with code 1: {EXIT_CODES[1]}. raystep's error: ray job " in description
    )
    assert "driver-boom" in description, "the failure says what the driver said"
    assert "driver-boom" in _event_log_text(instance, result.run_id), (
        "raystep's error reaches the event log"
    )


def test_failing_auc_check_blocks_predictions(
    example: ModuleType, raystep: RaystepResource
) -> None:
    result = dg.materialize(
        [
            example.ads_ranking_model,
            example.ads_ranking_model_auc,
            example.ads_ranking_predictions,
        ],
        resources={"raystep": raystep},
        run_config=dg.RunConfig(
            {
                CHECK_NODE: {
                    "config": {
                        "overrides": {
                            "spec.runtimeEnv.env_vars.ADS_AUC_THRESHOLD": "0.99"
                        }
                    }
                }
            }
        ),
        raise_on_error=False,
        partition_key=DAY,
    )
    assert not result.success
    assert len(result.asset_materializations_for_node(MODEL_NODE)) == 1
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed
    assert _float(dict(check.metadata), "threshold") == 0.99
    assert _float(dict(check.metadata), "auc") < 0.99
    auc = _float(dict(check.metadata), "auc")
    assert check.description == f"auc {auc:.3f} < threshold 0.99"
    assert _text(dict(check.metadata), "summary") == check.description
    assert result.asset_materializations_for_node(PREDICTIONS_NODE) == []
