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
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlparse

import dagster as dg
import pyarrow.parquet as pq
import pytest
from dagster_raystep import RaystepResource
from kuberay_sandbox import Sandbox, created, running_sandbox
from rayheads import Head
from test_ads_ranking import (
    DAY,
    MODEL_NODE,
    PREDICTIONS_NODE,
    SMALL_STEPS,
    _event_log_text,
    _float,
    _int,
    _text,
    example_overrides,
    materialize_daily,
)
from test_run_scoped_clusters import fire_success_sensor


@pytest.fixture(scope="module")
def kuberay_sandbox(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, ray_head: Head
) -> Iterator[Sandbox]:
    """A running sandbox, its pods' Ray the shared head, with its API server's audit log."""
    with running_sandbox(
        repo,
        tmp_path_factory.mktemp("kuberay-sandbox"),
        pytest.fail,
        ray_dashboard=ray_head.dashboard,
    ) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def sandbox(kuberay_sandbox: Sandbox) -> dict[str, str]:
    """The environment raystep needs to reach the running sandbox."""
    return kuberay_sandbox.env


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
    # `ls -A` also lists the local heads recorded in this machine's state
    # dir, and other tests (go test's, beside pytest) run local steps
    # meanwhile: an empty state dir of its own keeps their clusters out of
    # this list, which is about the API server's.
    with tempfile.TemporaryDirectory() as state:
        ls = subprocess.run(
            [str(raystep_bin), "ls", "-A", "-o", "json"],
            env={**os.environ, **env, "XDG_STATE_HOME": state},
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
    result = materialize_daily(example, instance, raystep, raise_on_error=False)
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
    assert (tmp_path / "model" / DAY / "model.npz").is_file()

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
    assert pq.read_table(tmp_path / "predictions" / DAY).num_rows == 200_000

    assert "epoch 3/3" in logs, "the driver's Pipes log messages reach Dagster"
    assert _raystep_ls(raystep_bin, sandbox) == [], "every step deleted its RayJob"


def test_daily_job_shares_one_raycluster_per_run(
    example: ModuleType,
    raystep_bin: Path,
    kuberay_sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """The example's resource (run_cluster.yaml): one RayCluster for the run, gone after the sensor.

    The three specs size their clusters differently (2 A100, 1 L4, 1-4 L4); the run cluster file
    replaces all three, so the API server's audit log shows one RayCluster created, by the first
    step, and three RayJobs that borrow it. The run-status sensor, evaluated on the run's success
    event through Dagster's sensor context, deletes it and waits until it is gone.
    """
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    env = kuberay_sandbox.env
    raystep = RaystepResource(
        binary=str(raystep_bin),
        backend="kuberay",
        run_cluster=str(example.RUN_CLUSTER),
        overrides=example_overrides(tmp_path),
        env=env,
    )
    assert raystep.run_cluster == example.raystep_resource().run_cluster
    since = kuberay_sandbox.audit_log.stat().st_size
    instance = dg.DagsterInstance.ephemeral()
    run_ids: list[str] = []
    request.addfinalizer(lambda: [raystep.down_run(r) for r in run_ids])
    result = materialize_daily(
        example, instance, raystep, raise_on_error=False, run_config=SMALL_STEPS
    )
    run_ids.append(result.run_id)
    assert result.success, _event_log_text(instance, result.run_id)
    assert [c.passed for c in result.get_asset_check_evaluations()] == [True]

    (cluster,) = created(kuberay_sandbox.audit_log, "rayclusters", since)
    assert cluster.startswith("run-"), cluster
    assert len(created(kuberay_sandbox.audit_log, "rayjobs", since)) == 3
    for node in (MODEL_NODE, PREDICTIONS_NODE):
        (m,) = result.asset_materializations_for_node(node)
        assert f"/{cluster})" in _text(dict(m.metadata), "raystep/cluster_shape"), node
    listed = _raystep_ls(raystep_bin, env)
    assert [(c["name"], c["clusterKind"]) for c in listed] == [(cluster, "run")], listed

    fire_success_sensor(raystep, instance, result.run_id)
    # raystep down waited until the RayCluster and its pods were gone.
    assert _raystep_ls(raystep_bin, env) == []
    assert created(kuberay_sandbox.audit_log, "rayclusters", since) == [cluster]
