"""The ads_ranking Ray entrypoints on a real Ray head, launched as Ray jobs with a Dagster Pipes bootstrap.

This is what raystep does for them, done by hand with Ray's own job client: the working
directory is uploaded, the bootstrap travels in runtime_env.env_vars with messages on stdout, and
the Pipes messages are read back out of the job's log. No raystep binary is involved. The head is
the shared one (conftest's ray_head).
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ray.job_submission import JobStatus, JobSubmissionClient
from rayheads import Head

PIPES_VERSION_KEY = "__dagster_pipes_version"


def _encode(value: dict[str, Any]) -> str:
    return base64.b64encode(zlib.compress(json.dumps(value).encode())).decode()


def _bootstrap(asset_keys: list[str], extras: dict[str, Any]) -> dict[str, str]:
    context = {
        "asset_keys": asset_keys,
        "code_version_by_asset_key": None,
        "provenance_by_asset_key": None,
        "partition_key": None,
        "partition_key_range": None,
        "partition_time_window": None,
        "run_id": "test-run",
        "job_name": "ads_ranking_daily",
        "retry_number": 0,
        "extras": extras,
    }
    return {
        "DAGSTER_PIPES_CONTEXT": _encode({"data": context}),
        "DAGSTER_PIPES_MESSAGES": _encode({"stdio": "stdout"}),
    }


def _submit(url: str, repo: Path, entrypoint: str, env_vars: dict[str, str]) -> str:
    """Submit entrypoint as a Ray job with the example's working directory; return its id."""
    return JobSubmissionClient(url).submit_job(
        entrypoint=entrypoint,
        runtime_env={
            "working_dir": str(repo / "examples" / "ads_ranking"),
            "env_vars": env_vars,
        },
        entrypoint_num_cpus=1,
    )


def _wait(url: str, job_id: str) -> list[dict[str, Any]]:
    """Wait for a job to succeed and return the Pipes messages in its log."""
    client = JobSubmissionClient(url)
    deadline = time.monotonic() + 240
    while (status := client.get_job_status(job_id)) not in {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.STOPPED,
    }:
        if time.monotonic() > deadline:
            client.stop_job(job_id)
            pytest.fail(
                f"{job_id} did not finish in 240s:\n{client.get_job_logs(job_id)[-4000:]}"
            )
        time.sleep(0.5)
    logs = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, logs[-4000:]
    return [
        json.loads(line)
        for line in logs.splitlines()
        if line.startswith("{") and PIPES_VERSION_KEY in line
    ]


def _one(messages: list[dict[str, Any]], method: str) -> dict[str, Any]:
    found = [m["params"] for m in messages if m["method"] == method]
    assert len(found) == 1, f"{method}: {found}"
    return found[0]


def _typed(metadata: dict[str, Any], key: str, kind: str) -> Any:
    value = metadata[key]
    assert value["type"] == kind, f"{key}: {value}"
    if kind == "float":
        assert isinstance(value["raw_value"], float), f"{key}: {value}"
    return value["raw_value"]


def test_train_eval_batch_inference_on_ray(
    ray_head: Head, repo: Path, tmp_path: Path
) -> None:
    url = ray_head.dashboard
    dirs = {
        "ADS_MODEL_DIR": str(tmp_path / "model"),
        "ADS_PREDICTIONS_DIR": str(tmp_path / "predictions"),
    }

    train = _wait(
        url,
        _submit(
            url,
            repo,
            "python train.py --epochs 3 --seed 7",
            {**dirs, **_bootstrap(["ads_ranking_model"], {})},
        ),
    )
    assert [m["method"] for m in (train[0], train[-1])] == ["opened", "closed"]
    assert train[-1]["params"] == {}
    model = _one(train, "report_asset_materialization")
    assert model["asset_key"] == "ads_ranking_model"
    assert 0.0 < _typed(model["metadata"], "loss", "float") < 0.69
    assert 0.7 <= _typed(model["metadata"], "auc", "float") <= 1.0
    assert _typed(model["metadata"], "rows", "int") == 200_000
    assert _typed(model["metadata"], "epochs", "int") == 3
    assert model["data_version"] == _typed(model["metadata"], "model_version", "text")
    assert any(
        "epoch 3/3" in m["params"]["message"] for m in train if m["method"] == "log"
    )

    # With the model there, the rest does not depend on each other: the
    # jobs run side by side, as a day's eval and predictions would. (A model
    # below the bar failing the check, not the job, is proven through Dagster
    # and raystep by test_ads_ranking's test_failing_auc_check_blocks_predictions.)
    checks = {
        "asset_checks": [
            {"asset_key": "ads_ranking_model", "check_name": "auc_above_threshold"}
        ]
    }
    again_id = _submit(
        url,
        repo,
        "python train.py --epochs 3 --seed 7 --workers 1",
        {
            **dirs,
            "ADS_MODEL_DIR": str(tmp_path / "model-again"),
            **_bootstrap(["ads_ranking_model"], {}),
        },
    )
    eval_id = _submit(
        url,
        repo,
        "python eval.py --seed 7",
        {**dirs, "ADS_AUC_THRESHOLD": "0.70", **_bootstrap([], checks)},
    )
    batch_id = _submit(
        url,
        repo,
        "python batch_inference.py --seed 7 --rows 200000",
        {**dirs, **_bootstrap(["ads_ranking_predictions"], {})},
    )

    # Same seed, same model: the data and the gradient reduction do not depend on scheduling.
    again = _wait(url, again_id)
    assert (
        _one(again, "report_asset_materialization")["data_version"]
        == model["data_version"]
    )

    check = _one(_wait(url, eval_id), "report_asset_check")
    assert (
        check["asset_key"],
        check["check_name"],
        check["passed"],
        check["severity"],
    ) == (
        "ads_ranking_model",
        "auc_above_threshold",
        True,
        "ERROR",
    )
    assert (
        _typed(check["metadata"], "auc", "float")
        >= _typed(check["metadata"], "threshold", "float")
        == 0.7
    )
    assert _typed(check["metadata"], "log_loss", "float") > 0.0

    predictions = _one(_wait(url, batch_id), "report_asset_materialization")
    assert predictions["asset_key"] == "ads_ranking_predictions"
    assert _typed(predictions["metadata"], "rows", "int") == 200_000
    assert _typed(predictions["metadata"], "rows_per_second", "float") > 0.0
    table = pq.read_table(tmp_path / "predictions")
    assert sorted(table.column("id").to_pylist()) == list(range(200_000))
    assert set(table.column("model_version").to_pylist()) == {model["data_version"]}


def test_driver_error_closes_pipes_with_the_exception(
    ray_head: Head, repo: Path, tmp_path: Path
) -> None:
    env = {"ADS_MODEL_DIR": str(tmp_path / "missing-model")}
    client = JobSubmissionClient(ray_head.dashboard)
    job_id = client.submit_job(
        entrypoint="python eval.py --seed 7",
        runtime_env={
            "working_dir": str(repo / "examples" / "ads_ranking"),
            "env_vars": {**env, **_bootstrap([], {})},
        },
        entrypoint_num_cpus=1,
    )
    deadline = time.monotonic() + 120
    while (status := client.get_job_status(job_id)) not in {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.STOPPED,
    }:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert status == JobStatus.FAILED
    closed = [
        json.loads(line)
        for line in client.get_job_logs(job_id).splitlines()
        if '"method": "closed"' in line
    ]
    assert len(closed) == 1
    exception = closed[0]["params"]["exception"]
    assert exception["name"] == "FileNotFoundError"
    assert "run train.py first" in exception["message"]
