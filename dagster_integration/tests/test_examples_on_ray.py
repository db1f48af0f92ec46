"""The ads_ranking Ray entrypoints on a real Ray head, launched as Ray jobs with a Dagster Pipes bootstrap.

This is what raystep does for them, done by hand with Ray's own job client: the working
directory is uploaded, the bootstrap travels in runtime_env.env_vars with messages on stdout, and
the Pipes messages are read back out of the job's log. No raystep binary is involved.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

PIPES_VERSION_KEY = "__dagster_pipes_version"


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait_for_dashboard(url: str, head: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if head.poll() is not None:
            pytest.fail(
                f"ray start exited with {head.returncode}:\n{log.read_text()[-4000:]}"
            )
        try:
            with urllib.request.urlopen(f"{url}/api/version", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(
        f"Ray dashboard at {url} did not answer within 90s:\n{log.read_text()[-4000:]}"
    )


def _stop(head: subprocess.Popen[bytes]) -> None:
    """Stop the head's whole process group: SIGTERM, then SIGKILL (gcs_server can outlive SIGTERM)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(head.pid, 0)
            except ProcessLookupError:
                head.wait()
                return
            head.poll()
            time.sleep(0.2)
    head.wait(timeout=5)


@pytest.fixture(scope="module")
def ray_head(ray_path: str) -> Iterator[str]:
    """A private Ray head on 127.0.0.1 with free ports; yields its dashboard URL."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rs-test-", dir="/tmp"))
    (
        gcs,
        dashboard,
        node_manager,
        object_manager,
        client,
        agent,
        metrics,
        runtime_env,
        agent_grpc,
    ) = _free_ports(9)
    env = {
        **os.environ,
        "PATH": ray_path,
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    env.pop("RAY_ADDRESS", None)
    log = temp_dir / "head.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [
                shutil.which("ray", path=ray_path) or "ray",
                "start",
                "--head",
                "--block",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=2",
                f"--temp-dir={temp_dir}",
                f"--port={gcs}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dashboard}",
                f"--node-manager-port={node_manager}",
                f"--object-manager-port={object_manager}",
                f"--ray-client-server-port={client}",
                f"--dashboard-agent-listen-port={agent}",
                f"--dashboard-agent-grpc-port={agent_grpc}",
                f"--metrics-export-port={metrics}",
                f"--runtime-env-agent-port={runtime_env}",
                "--disable-usage-stats",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{dashboard}"
        _wait_for_dashboard(url, head, log)
        yield url
    finally:
        _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)


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


def _run_job(
    url: str, repo: Path, entrypoint: str, env_vars: dict[str, str]
) -> tuple[str, list[dict[str, Any]]]:
    """Submit entrypoint, wait for it to end and return (status, Pipes messages in its log)."""
    client = JobSubmissionClient(url)
    job_id = client.submit_job(
        entrypoint=entrypoint,
        runtime_env={
            "working_dir": str(repo / "examples" / "ads_ranking"),
            "env_vars": env_vars,
        },
        entrypoint_num_cpus=1,
    )
    deadline = time.monotonic() + 240
    while (status := client.get_job_status(job_id)) not in {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.STOPPED,
    }:
        if time.monotonic() > deadline:
            client.stop_job(job_id)
            pytest.fail(
                f"{entrypoint} did not finish in 240s:\n{client.get_job_logs(job_id)[-4000:]}"
            )
        time.sleep(0.5)
    logs = client.get_job_logs(job_id)
    messages = []
    for line in logs.splitlines():
        if line.startswith("{") and PIPES_VERSION_KEY in line:
            messages.append(json.loads(line))
    assert status == JobStatus.SUCCEEDED, logs[-4000:]
    return str(status), messages


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
    ray_head: str, repo: Path, tmp_path: Path
) -> None:
    dirs = {
        "ADS_MODEL_DIR": str(tmp_path / "model"),
        "ADS_PREDICTIONS_DIR": str(tmp_path / "predictions"),
    }

    _, train = _run_job(
        ray_head,
        repo,
        "python train.py --epochs 3 --seed 7",
        {**dirs, **_bootstrap(["ads_ranking_model"], {})},
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

    # Same seed, same model: the data and the gradient reduction do not depend on scheduling.
    _, again = _run_job(
        ray_head,
        repo,
        "python train.py --epochs 3 --seed 7 --workers 1",
        {**dirs, **_bootstrap(["ads_ranking_model"], {})},
    )
    assert (
        _one(again, "report_asset_materialization")["data_version"]
        == model["data_version"]
    )

    checks = {
        "asset_checks": [
            {"asset_key": "ads_ranking_model", "check_name": "auc_above_threshold"}
        ]
    }
    _, evaluation = _run_job(
        ray_head,
        repo,
        "python eval.py --seed 7",
        {**dirs, "ADS_AUC_THRESHOLD": "0.70", **_bootstrap([], checks)},
    )
    check = _one(evaluation, "report_asset_check")
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

    _, batch = _run_job(
        ray_head,
        repo,
        "python batch_inference.py --seed 7 --rows 200000",
        {**dirs, **_bootstrap(["ads_ranking_predictions"], {})},
    )
    predictions = _one(batch, "report_asset_materialization")
    assert predictions["asset_key"] == "ads_ranking_predictions"
    assert _typed(predictions["metadata"], "rows", "int") == 200_000
    assert _typed(predictions["metadata"], "rows_per_second", "float") > 0.0
    table = pq.read_table(tmp_path / "predictions")
    assert sorted(table.column("id").to_pylist()) == list(range(200_000))
    assert set(table.column("model_version").to_pylist()) == {model["data_version"]}

    # A model below the bar fails the check, not the job.
    _, strict = _run_job(
        ray_head,
        repo,
        "python eval.py --seed 7",
        {**dirs, "ADS_AUC_THRESHOLD": "0.99", **_bootstrap([], checks)},
    )
    check = _one(strict, "report_asset_check")
    assert check["passed"] is False
    assert _typed(check["metadata"], "threshold", "float") == 0.99
    auc = _typed(check["metadata"], "auc", "float")
    assert _typed(check["metadata"], "summary", "text") == (
        f"auc {auc:.3f} < threshold 0.99"
    )


def test_driver_error_closes_pipes_with_the_exception(
    ray_head: str, repo: Path, tmp_path: Path
) -> None:
    env = {"ADS_MODEL_DIR": str(tmp_path / "missing-model")}
    client = JobSubmissionClient(ray_head)
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
