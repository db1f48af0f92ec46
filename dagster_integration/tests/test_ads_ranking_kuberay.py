"""End to end on Kubernetes: the ads_ranking example materializes through `raystep run --backend kuberay`.

A module-scoped sandbox (test/cluster/sandbox) runs a real API server, controller manager,
scheduler, kwok nodes from examples/platform.yaml, the real KubeRay operator and a local Ray head.
Each step creates a RayJob that the operator brings up on kwok's fake pods; the Ray job itself runs
on the sandbox's Ray head, which raystep reaches through a real port-forward to the head pod (kwok
serves it and sends port 8265 to that head; the env file sets no dashboard URL), so the example's
scripts behave as on the local backend. Afterwards no RayJob may be left.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlparse

import dagster as dg
import pyarrow.parquet as pq
import pytest
from dagster_raystep import RaystepResource
from test_ads_ranking import (
    MODEL_NODE,
    PREDICTIONS_NODE,
    _event_log_text,
    _float,
    _int,
    _text,
    example_overrides,
)

# Cold, the sandbox may first build the Kubernetes binaries (test/k8s/build.sh): minutes on 2 cores.
READY_TIMEOUT_S = 1200.0
STOP_TIMEOUT_S = 120.0
SANDBOX_ENV = ("KUBECONFIG", "RAYSTEP_PROFILE")


def _read_env_file(path: Path) -> dict[str, str]:
    """The sandbox's `export KEY=value` lines, shell-unquoted."""
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def _ready_line(proc: subprocess.Popen[str], log: Path) -> str:
    """The first stdout line of the sandbox (its directory), or a failure that says why not."""
    lines: queue.Queue[str | None] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        line = lines.get(timeout=READY_TIMEOUT_S)
    except queue.Empty:
        pytest.fail(
            f"sandbox not ready within {READY_TIMEOUT_S:.0f}s; its log:\n{log.read_text()}"
        )
    if not line:
        proc.wait()
        pytest.fail(
            f"sandbox exited with code {proc.returncode} before it was ready; its log:\n{log.read_text()}"
        )
    return line.strip()


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGINT the sandbox's process group and wait; SIGKILL the group if it does not stop in time."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(
            proc.pid, signal.SIGKILL
        )  # stragglers of the group, or the sandbox itself
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def sandbox(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """A running sandbox; yields the environment its env file exports."""
    work = tmp_path_factory.mktemp("kuberay-sandbox")
    binary = work / "sandbox"
    build = subprocess.run(
        ["go", "build", "-o", str(binary), "./test/cluster/sandbox"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        pytest.fail(f"go build ./test/cluster/sandbox failed:\n{build.stderr}")
    directory = work / "dir"
    directory.mkdir()
    log = work / "sandbox.log"
    command = [
        str(binary),
        "-fast",
        "-profile",
        str(repo / "examples" / "platform.yaml"),
        "-dir",
        str(directory),
    ]
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        printed = _ready_line(proc, log)
        assert Path(printed) == directory, (
            f"sandbox printed {printed!r}, want {directory}"
        )
        env = _read_env_file(directory / "env")
        assert env.get("RAYSTEP_BACKEND") == "kuberay", env
        missing = [key for key in SANDBOX_ENV if not env.get(key)]
        assert not missing, f"sandbox env file lacks {missing}: {env}"
        assert "RAYSTEP_DASHBOARD_URL" not in env, (
            f"the sandbox's steps port-forward, no dashboard URL: {env}"
        )
        yield {key: env[key] for key in SANDBOX_ENV}
    finally:
        _stop(proc)


@pytest.fixture
def raystep(
    raystep_bin: Path,
    sandbox: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RaystepResource:
    """The resource on the kuberay backend in the sandbox, with the example's outputs in tmp_path."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return RaystepResource(
        binary=str(raystep_bin),
        backend="kuberay",
        overrides=example_overrides(tmp_path),
        env=sandbox,
    )


def _assert_kuberay_metadata(metadata: dict) -> None:
    """raystep's own keys for a step that ran as a RayJob, reached by port-forward.

    The dashboard URL a person sees is the head service's, not the forward's local port.
    """
    assert _text(metadata, "raystep/backend") == "kuberay"
    url = metadata["raystep/dashboard_url"]
    assert isinstance(url, dg.UrlMetadataValue), repr(url)
    parsed = urlparse(url.value)
    assert parsed.port == 8265, url.value
    assert (parsed.hostname or "").endswith(".ml-ads.svc.cluster.local"), url.value
    assert "-head-svc." in (parsed.hostname or ""), url.value
    _text(metadata, "raystep/cluster")
    _text(metadata, "raystep/ray_job_id")
    _text(metadata, "raystep/submission_id")
    assert _text(metadata, "raystep/status") == "SUCCEEDED"
    for key in ("raystep/duration_run_s", "raystep/duration_total_s"):
        assert _float(metadata, key) >= 0.0


def _raystep_ls(raystep_bin: Path, env: dict[str, str]) -> list:
    ls = subprocess.run(
        [str(raystep_bin), "ls", "-A", "-o", "json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ls.returncode == 0, f"raystep ls exited with {ls.returncode}: {ls.stderr}"
    return json.loads(ls.stdout)


def test_materialize_model_check_and_predictions_on_kuberay(
    example: ModuleType,
    raystep: RaystepResource,
    raystep_bin: Path,
    sandbox: dict[str, str],
    tmp_path: Path,
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    started = time.monotonic()
    result = dg.materialize(
        [
            example.ads_ranking_model,
            example.ads_ranking_model_auc,
            example.ads_ranking_predictions,
        ],
        instance=instance,
        resources={"raystep": raystep},
        raise_on_error=False,
    )
    logs = _event_log_text(instance, result.run_id)
    assert result.success, (
        f"run failed after {time.monotonic() - started:.0f}s:\n{logs}"
    )

    (model,) = result.asset_materializations_for_node(MODEL_NODE)
    metadata = dict(model.metadata)
    assert 0.0 < _float(metadata, "loss") < 0.69
    assert 0.7 <= _float(metadata, "auc") <= 1.0
    assert _int(metadata, "rows") == 200_000
    _assert_kuberay_metadata(metadata)
    assert (tmp_path / "model" / "model.npz").is_file()

    (check,) = result.get_asset_check_evaluations()
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

    (predictions,) = result.asset_materializations_for_node(PREDICTIONS_NODE)
    metadata = dict(predictions.metadata)
    assert _int(metadata, "rows") == 200_000
    _assert_kuberay_metadata(metadata)
    assert pq.read_table(tmp_path / "predictions").num_rows == 200_000

    assert "epoch 3/3" in logs, "the driver's Pipes log messages reach Dagster"
    assert _raystep_ls(raystep_bin, sandbox) == [], "every step deleted its RayJob"
