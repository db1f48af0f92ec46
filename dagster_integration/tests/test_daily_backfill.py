"""Backfills of the example's daily partitions through a real Dagster instance and the real raystep.

`dagster job backfill` creates one run per day and submits them to the instance's run queue (the
default QueuedRunCoordinator), as a backfill from the UI does; a `dagster-daemon`, started by the
test on a private DAGSTER_HOME as `dagster dev` starts one, dequeues and launches them. Each
run's raystep step trains that day's model on the shared Ray head (conftest's ray_head), the
three runs at once. `dagster asset
materialize --partition-range` runs an asset with `BackfillPolicy.single_run()` once for the
whole range: one Ray job that gets the range.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import pytest
from test_ads_ranking import _assert_raystep_metadata, _text

DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
MODEL = dg.AssetKey("ads_ranking_model")
RANGED = dg.AssetKey("daily_range")
DAGSTER_BIN = Path(sys.executable).parent
ENDED = {
    dg.DagsterRunStatus.SUCCESS,
    dg.DagsterRunStatus.FAILURE,
    dg.DagsterRunStatus.CANCELED,
}

# INSTANCE is the test's dagster.yaml: the default run queue, every day's run at once (their
# Ray jobs share one head), no telemetry.
INSTANCE = """\
telemetry:
  enabled: false
concurrency:
  runs:
    max_concurrent_runs: 3
"""

# RANGE_DRIVER reports what a single-run backfill's Ray job got: the range and its time window.
RANGE_DRIVER = """\
import os

from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    pipes.report_asset_materialization(
        metadata={
            "arg_range": os.environ["ARG_RANGE"],
            "key_set": str("RAYSTEP_PARTITION_KEY" in os.environ),
            "window": os.environ["RAYSTEP_PARTITION_TIME_WINDOW_START"]
            + ".."
            + os.environ["RAYSTEP_PARTITION_TIME_WINDOW_END"],
        }
    )
"""

RANGE_SPEC = """\
apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: daily-range, owner: tests}
spec:
  kind: batch_inference
  entrypoint: python driver.py
  workingDir: driver
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  runtimeEnv:
    env_vars:
      ARG_RANGE: "${RAYSTEP_PARTITION_KEY_RANGE_START}..${RAYSTEP_PARTITION_KEY_RANGE_END}"
  timeouts: {provision: 3m, run: 5m}
"""

# DEFINITIONS is the code location the tests load: the example's model asset and daily
# partitions, a job of the model alone (its partitions come from the asset) that trains a small
# model on one actor, and a single-run asset on the same partitions. The job runs its one step in
# the run's own process: Dagster's default executor would start a second Python process with
# Dagster in it per day, and this test is about the days (the single-run test keeps the default
# executor). Each Python process with Dagster or Ray costs seconds of CPU, three times over.
DEFINITIONS = """\
import importlib.util

import dagster as dg
from dagster_raystep import RaystepResource, raystep_asset

_spec = importlib.util.spec_from_file_location("ads_ranking_definitions", {example!r})
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

daily_range = raystep_asset(
    name="daily_range",
    spec={range_spec!r},
    partitions_def=example.DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
)

defs = dg.Definitions(
    assets=[example.ads_ranking_model, daily_range],
    jobs=[
        dg.define_asset_job(
            "ads_ranking_model_daily",
            selection=[example.ads_ranking_model],
            executor_def=dg.in_process_executor,
            config={{"ops": {{"ads_ranking_model": {{"config": {{"overrides": {train!r}}}}}}}}},
        )
    ],
    resources={{
        "raystep": RaystepResource(
            binary={binary!r},
            backend="local",
            overrides={overrides!r},
            env={env!r},
        )
    }},
)
"""


@pytest.fixture
def project(
    raystep_bin: Path,
    ray_path: str,
    raystep_env: dict[str, str],
    example_definitions: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Path, dict[str, str]]:
    """The definitions file and the environment (DAGSTER_HOME in tmp_path) for the CLI."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "driver.py").write_text(RANGE_DRIVER)
    range_spec = tmp_path / "range.yaml"
    range_spec.write_text(RANGE_SPEC)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE)
    defs = tmp_path / "defs.py"
    defs.write_text(
        DEFINITIONS.format(
            example=str(example_definitions),
            range_spec=str(range_spec),
            binary=str(raystep_bin),
            # A smaller model than the example's, on one actor: the test is about the days, not
            # the model.
            train={
                "spec.entrypoint": "python train.py --epochs 1 --rows 40000 --workers 1"
            },
            overrides={
                "spec.runtimeEnv.env_vars.ADS_MODEL_DIR": str(tmp_path / "model"),
                "spec.timeouts.provision": "3m",
                "spec.timeouts.run": "5m",
            },
            env={**raystep_env, "XDG_STATE_HOME": str(tmp_path / "state")},
        )
    )
    # The daemon asks the code server to start each run and gives it Dagster's default 60 s
    # to answer; three runs starting at once on a busy 2-core machine (the whole suite beside
    # them) have taken longer. The test bounds the backfill itself (_wait_for_runs).
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PATH": ray_path,
        "DAGSTER_GRPC_TIMEOUT_SECONDS": "300",
    }
    env.pop("RAY_ADDRESS", None)
    return defs, env


def _dagster(env: dict[str, str], cwd: Path, *args: str) -> str:
    """Run the dagster CLI of this virtualenv; return its output, failing with it on an error."""
    result = subprocess.run(
        [str(DAGSTER_BIN / "dagster"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, (
        f"dagster {' '.join(args)}: exit {result.returncode}\n{output}"
    )
    return output


@pytest.fixture
def instance(project: tuple[Path, dict[str, str]]) -> Iterator[dg.DagsterInstance]:
    """The project's Dagster instance, its storage created before any dagster process starts.

    Two processes that find no storage both create it, and one of them then fails on the
    other's half-written schema.
    """
    _, env = project
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        yield instance


@pytest.fixture
def daemon(
    project: tuple[Path, dict[str, str]], instance: dg.DagsterInstance, tmp_path: Path
) -> Iterator[subprocess.Popen]:
    """`dagster-daemon run` on the project, in a process group of its own, stopped at the end.

    The daemon launches each run in a process of its code server, in the daemon's group, so
    teardown signals the whole group: SIGTERM first (raystep then stops its Ray head itself),
    SIGKILL for what is left after a grace period.
    """
    defs, env = project
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen(
        [str(DAGSTER_BIN / "dagster-daemon"), "run", "-f", str(defs)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        _stop_group(proc, grace=60)
        log.close()


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM proc's process group, wait up to grace seconds for all of it, then SIGKILL it."""
    group = proc.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, so that the group can empty
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _wait_for_runs(
    instance: dg.DagsterInstance,
    backfill_id: str,
    count: int,
    daemon: subprocess.Popen,
    log: Path,
    timeout: float,
) -> Sequence[dg.DagsterRun]:
    """Wait until the backfill's count runs have all ended; return them.

    It fails at once, with the daemon's log, if the daemon exits; and at timeout with the runs'
    statuses.
    """
    deadline = time.monotonic() + timeout
    while True:
        runs = instance.get_runs(
            filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id})
        )
        if len(runs) == count and all(r.status in ENDED for r in runs):
            return runs
        if daemon.poll() is not None:
            pytest.fail(
                f"dagster-daemon exited {daemon.returncode}:\n{log.read_text()}"
            )
        if time.monotonic() > deadline:
            statuses = [(r.tags.get("dagster/partition"), r.status.value) for r in runs]
            pytest.fail(
                f"backfill {backfill_id}: after {timeout:.0f}s the runs are {statuses}\n"
                f"{log.read_text()}"
            )
        time.sleep(1)


def _materializations(
    instance: dg.DagsterInstance, key: dg.AssetKey
) -> list[dg.AssetMaterialization]:
    """Every materialization of key in the instance, oldest first."""
    records = instance.fetch_materializations(key, limit=100, ascending=True).records
    mats = [record.asset_materialization for record in records]
    assert all(mats), records
    return [mat for mat in mats if mat is not None]


def test_three_day_backfill_makes_three_runs_and_three_models(
    project: tuple[Path, dict[str, str]],
    instance: dg.DagsterInstance,
    daemon: subprocess.Popen,
    tmp_path: Path,
) -> None:
    defs, env = project
    out = _dagster(
        env,
        tmp_path,
        "job",
        "backfill",
        "-f",
        str(defs),
        "-j",
        "ads_ranking_model_daily",
        "--partitions",
        ",".join(DAYS),
        "--noprompt",
    )
    found = re.search(r"Launched backfill job `([^`]+)`", out)
    assert found, out
    runs = _wait_for_runs(
        instance,
        found.group(1),
        len(DAYS),
        daemon,
        tmp_path / "daemon.log",
        timeout=900,
    )
    failed = [r for r in runs if r.status != dg.DagsterRunStatus.SUCCESS]
    assert not failed, "\n".join(
        str(e) for r in failed for e in instance.all_logs(r.run_id)
    )
    assert sorted(r.tags["dagster/partition"] for r in runs) == DAYS

    by_day = {}
    for mat in _materializations(instance, MODEL):
        metadata = dict(mat.metadata)
        assert _text(metadata, "day") == mat.partition, (
            "the driver trained on its run's day"
        )
        _assert_raystep_metadata(metadata)
        by_day[mat.partition] = metadata
    assert sorted(by_day) == DAYS, "one materialization per day"
    jobs = {_text(m, "raystep/submission_id") for m in by_day.values()}
    assert len(jobs) == len(DAYS), f"each day is its own Ray job: {jobs}"
    versions = {_text(m, "model_version") for m in by_day.values()}
    assert len(versions) == len(DAYS), (
        f"each day's data gives its own model: {versions}"
    )
    seeds = {m["seed"].value for m in by_day.values()}
    assert len(seeds) == len(DAYS), seeds
    for day in DAYS:
        assert (tmp_path / "model" / day / "model.npz").is_file(), day


def test_single_run_backfill_gives_one_ray_job_the_whole_range(
    project: tuple[Path, dict[str, str]], instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    defs, env = project
    _dagster(
        env,
        tmp_path,
        "asset",
        "materialize",
        "-f",
        str(defs),
        "--select",
        "daily_range",
        "--partition-range",
        f"{DAYS[0]}...{DAYS[-1]}",
    )
    (run,) = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags.get("dagster/asset_partition_range_start") == DAYS[0]
    assert run.tags.get("dagster/asset_partition_range_end") == DAYS[-1]
    mats = _materializations(instance, RANGED)
    assert sorted(m.partition or "" for m in mats) == DAYS, "every day of the range"
    jobs = set()
    for mat in mats:
        metadata = dict(mat.metadata)
        assert _text(metadata, "arg_range") == f"{DAYS[0]}..{DAYS[-1]}"
        assert _text(metadata, "key_set") == "False", "no single key for a range"
        assert _text(metadata, "window") == f"{DAYS[0]}T00:00:00Z..2026-11-04T00:00:00Z"
        jobs.add(_text(metadata, "raystep/submission_id"))
    assert len(jobs) == 1, f"one Ray job for the range: {jobs}"
