"""RaystepResource: the raystep command line it builds and how it turns raystep's exit into Dagster results.

The command-line tests need no binary. The Dagster tests run real Dagster against a small stand-in
for the binary (a Python program that speaks Pipes and exits with a chosen code), to pin down
the resource's side of the contract without a Ray cluster.
"""

from __future__ import annotations

import ast
import json
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import dagster as dg
import dagster_raystep
import pytest
from dagster_raystep import (
    EXIT_CODES,
    RaystepError,
    RaystepResource,
    format_overrides,
    raystep_asset,
    raystep_asset_check,
)
from dagster_raystep.resource import REASON_LIMIT


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("overrides", "want"),
    [
        pytest.param(None, [], id="none"),
        pytest.param(
            {
                "spec.timeouts.run": "10m",
                "spec.runtimeEnv.env_vars.ADS_AUC_THRESHOLD": 0.75,
            },
            [
                "--set",
                "spec.timeouts.run=10m",
                "--set",
                "spec.runtimeEnv.env_vars.ADS_AUC_THRESHOLD=0.75",
            ],
            id="strings and numbers in order",
        ),
        pytest.param(
            {"spec.cluster.workers.0.replicas": 2},
            ["--set", "spec.cluster.workers.0.replicas=2"],
            id="int",
        ),
        pytest.param(
            {"spec.debug": True, "spec.other": False},
            ["--set", "spec.debug=true", "--set", "spec.other=false"],
            id="bool",
        ),
        pytest.param(
            {"spec.entrypoint": "python -c 'print(1 == 1)'"},
            ["--set", "spec.entrypoint=python -c 'print(1 == 1)'"],
            id="value with spaces, quotes and =",
        ),
    ],
)
def test_format_overrides(overrides: dict | None, want: list[str]) -> None:
    assert format_overrides(overrides) == want


@pytest.mark.parametrize("path", ["", "spec..run", ".spec", "spec.", "a=b"])
def test_format_overrides_rejects_bad_paths(path: str) -> None:
    with pytest.raises(ValueError, match="invalid raystep override path"):
        format_overrides({path: "x"})


def test_command(tmp_path: Path) -> None:
    binary = _executable(tmp_path / "raystep")
    cases = [
        (
            RaystepResource(binary=str(binary)),
            {},
            [str(binary), "run", "-f", "train.yaml"],
        ),
        (
            RaystepResource(
                binary=str(binary),
                backend="kuberay",
                namespace="ml-ads",
                profile="/etc/raystep/profile.yaml",
                ui_url="https://raystep.example.com/",
            ),
            {},
            [
                str(binary),
                "run",
                "-f",
                "train.yaml",
                "--backend",
                "kuberay",
                "--namespace",
                "ml-ads",
                "--profile",
                "/etc/raystep/profile.yaml",
                "--ui-url",
                "https://raystep.example.com/",
            ],
        ),
        (
            RaystepResource(
                binary=str(binary),
                overrides={"spec.timeouts.run": "1h", "spec.teardown": "always"},
            ),
            {"spec.timeouts.run": "10m"},
            [
                str(binary),
                "run",
                "-f",
                "train.yaml",
                "--set",
                "spec.timeouts.run=10m",
                "--set",
                "spec.teardown=always",
            ],
        ),
    ]
    for resource, overrides, want in cases:
        assert resource.command("train.yaml", overrides) == want


def test_command_run_cluster(tmp_path: Path) -> None:
    binary = str(_executable(tmp_path / "raystep"))
    shared = "examples/ads_ranking/run_cluster.yaml"
    want = [binary, "run", "-f", "train.yaml", "--run-cluster", shared]
    reuse = ["--set", "spec.cluster.reuse=run"]
    for resource in (
        RaystepResource(binary=binary, run_cluster=shared),
        RaystepResource(binary=binary, run_cluster=shared, cluster_reuse="run"),
    ):
        assert resource.command("train.yaml") == want + reuse
    # A step's own override still wins: that step gets a cluster of its own.
    assert RaystepResource(binary=binary, run_cluster=shared).command(
        "train.yaml", {"spec.cluster.reuse": "step"}
    ) == [*want, "--set", "spec.cluster.reuse=step"]
    with pytest.raises(ValueError, match="cluster_reuse='step'"):
        RaystepResource(
            binary=binary, run_cluster=shared, cluster_reuse="step"
        ).command("train.yaml")


def test_command_rejects_unknown_backend(tmp_path: Path) -> None:
    resource = RaystepResource(
        binary=str(_executable(tmp_path / "raystep")), backend="slurm"
    )
    with pytest.raises(ValueError, match="unknown raystep backend 'slurm'"):
        resource.command("train.yaml")


def test_resolve_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = _executable(tmp_path / "explicit")
    from_env = _executable(tmp_path / "from-env")
    on_path = tmp_path / "path"
    on_path.mkdir()
    _executable(on_path / "raystep")
    monkeypatch.setenv("PATH", str(on_path))

    monkeypatch.delenv("RAYSTEP_BIN", raising=False)
    # The checkout's editable install brought no binary, so PATH's is next.
    assert dagster_raystep.resource.bundled_binary() is None
    assert RaystepResource().resolve_binary() == str(on_path / "raystep")
    # A platform wheel's own copy comes before PATH's, after $RAYSTEP_BIN.
    bundled = _executable(tmp_path / "bundled")
    monkeypatch.setattr(dagster_raystep.resource, "bundled_binary", lambda: bundled)
    assert RaystepResource().resolve_binary() == str(bundled)
    monkeypatch.setenv("RAYSTEP_BIN", str(from_env))
    assert RaystepResource().resolve_binary() == str(from_env)
    assert RaystepResource(binary=str(explicit)).resolve_binary() == str(explicit)


@pytest.mark.parametrize("binary", ["/nonexistent/raystep", "raystep-not-on-path"])
def test_resolve_binary_missing(
    binary: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(dg.DagsterInvariantViolationError, match="raystep"):
        RaystepResource(binary=binary).resolve_binary()


def test_environment() -> None:
    resource = RaystepResource(
        env={"RAYSTEP_PROFILE": "p.yaml"}, ray_address="http://127.0.0.1:8265"
    )
    assert resource.environment({"EXTRA": "1"}) == {
        "RAYSTEP_PROFILE": "p.yaml",
        "EXTRA": "1",
        "RAY_ADDRESS": "http://127.0.0.1:8265",
    }


STAND_IN = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    from dagster_pipes import open_dagster_pipes
    with open(os.environ["STAND_IN_ARGV"], "w") as f:
        json.dump(sys.argv[1:], f)
    with open_dagster_pipes() as pipes:
        pipes.log.info("stand-in extras " + json.dumps(pipes.extras, sort_keys=True))
        for entry in pipes.extras.get("asset_checks", []):
            pipes.report_asset_check(entry["check_name"], passed=True, asset_key=entry["asset_key"],
                                     metadata={{"auc": 0.9}})
        if pipes.asset_keys:
            pipes.report_asset_materialization(metadata={{"loss": 0.5, "raystep/backend": "local"}})
        if "STAND_IN_ERROR" in os.environ:  # closes the session with this exception, and exits 1
            raise RuntimeError(os.environ["STAND_IN_ERROR"])
    sys.exit(int(os.environ.get("STAND_IN_EXIT", "0")))
    """
)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "raystep"
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    monkeypatch.setenv("STAND_IN_ARGV", str(tmp_path / "argv.json"))
    return path


def _defs_for_stand_in() -> tuple[dg.AssetsDefinition, dg.AssetChecksDefinition]:
    model = raystep_asset(
        name="model", spec="train.yaml", overrides={"spec.timeouts.run": "5m"}
    )
    check = raystep_asset_check(
        asset=model, name="auc_above_threshold", spec="eval.yaml", blocking=True
    )
    return model, check


def test_asset_and_check_results_come_from_pipes(
    stand_in: Path, tmp_path: Path
) -> None:
    model, check = _defs_for_stand_in()
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [model, check],
        instance=instance,
        resources={"raystep": RaystepResource(binary=str(stand_in), backend="local")},
        run_config=dg.RunConfig(
            {"model": {"config": {"overrides": {"spec.timeouts.run": "7m"}}}}
        ),
    )
    assert result.success
    metadata = result.asset_materializations_for_node("model")[0].metadata
    assert metadata["loss"] == dg.FloatMetadataValue(0.5)
    evaluations = result.get_asset_check_evaluations()
    assert [(e.asset_check_key.name, e.passed) for e in evaluations] == [
        ("auc_above_threshold", True)
    ]
    assert evaluations[0].metadata["auc"] == dg.FloatMetadataValue(0.9)

    # The check step tells the driver which asset its check belongs to; the asset step has no checks.
    logs = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert (
        'stand-in extras {"asset_checks": [{"asset_key": "model", "check_name": "auc_above_threshold"}]}'
        in logs
    )
    assert "stand-in extras {}" in logs


def test_a_step_shows_no_preview_warning(stand_in: Path) -> None:
    """A Pipes session warns of nothing its user did not choose: no Dagster preview feature."""
    model, check = _defs_for_stand_in()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = dg.materialize(
            [model, check],
            instance=dg.DagsterInstance.ephemeral(),
            resources={
                "raystep": RaystepResource(binary=str(stand_in), backend="local")
            },
        )
    assert result.success
    previews = [
        str(w.message) for w in seen if issubclass(w.category, dg.PreviewWarning)
    ]
    assert previews == []


def test_run_config_overrides_come_last(stand_in: Path, tmp_path: Path) -> None:
    model, _ = _defs_for_stand_in()
    result = dg.materialize(
        [model],
        resources={
            "raystep": RaystepResource(
                binary=str(stand_in), overrides={"spec.teardown": "always"}
            )
        },
        run_config=dg.RunConfig(
            {"model": {"config": {"overrides": {"spec.timeouts.run": "7m"}}}}
        ),
    )
    assert result.success
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv == [
        "run",
        "-f",
        "train.yaml",
        "--set",
        "spec.teardown=always",
        "--set",
        "spec.timeouts.run=7m",
    ]


@pytest.mark.parametrize("code", [1, 2, 3, 129, 130, 143])
def test_exit_code_fails_the_step(
    stand_in: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    monkeypatch.setenv("STAND_IN_EXIT", str(code))
    model, _ = _defs_for_stand_in()
    result = dg.materialize(
        [model],
        resources={"raystep": RaystepResource(binary=str(stand_in))},
        raise_on_error=False,
    )
    assert not result.success
    assert result.get_asset_materialization_events() == []
    failure = result.failure_data_for_node("model")
    assert failure is not None
    assert failure.user_failure_data is not None
    assert f"raystep run -f train.yaml exited with code {code}: {EXIT_CODES[code]}" in (
        failure.user_failure_data.description or ""
    )
    assert failure.user_failure_data.metadata[
        "raystep/exit_code"
    ] == dg.IntMetadataValue(code)


def test_the_failure_quotes_raystep_s_error(
    stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's failure (what the UI and a run-failure alert show) says why, in raystep's words."""
    monkeypatch.setenv("STAND_IN_ERROR", "provision: timeouts.provision 15m reached")
    model, _ = _defs_for_stand_in()
    result = dg.materialize(
        [model],
        resources={"raystep": RaystepResource(binary=str(stand_in))},
        raise_on_error=False,
    )
    failure = result.failure_data_for_node("model")
    assert failure is not None and failure.user_failure_data is not None
    assert failure.user_failure_data.description == (
        f"raystep run -f train.yaml exited with code 1: {EXIT_CODES[1]}. "
        # dagster-pipes, which the stand-in closes its session with, names the exception's type.
        "raystep's error: RuntimeError: provision: timeouts.provision 15m reached"
    )


def test_a_long_error_is_quoted_by_its_start_and_end() -> None:
    reason = (
        "ray job j FAILED: last available logs: "
        + "x" * 20_000
        + " ValueError: bad row"
    )
    description = RaystepError("s.yaml", 1, reason).description or ""
    assert len(description) < REASON_LIMIT + 200, len(description)
    assert "raystep's error: ray job j FAILED: last available logs: xxx" in description
    assert "characters left out" in description
    assert description.endswith("x ValueError: bad row")


def test_invalid_spec_is_not_retried() -> None:
    assert RaystepError("s.yaml", 2).allow_retries is False
    assert RaystepError("s.yaml", 3).allow_retries is True


def test_no_private_dagster_imports() -> None:
    """The package uses Dagster's public API only: nothing from `dagster._...` modules."""
    package = Path(dagster_raystep.__file__).parent
    private = []
    for source in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            private += [
                f"{source.name}: {n}" for n in names if n.startswith("dagster._")
            ]
    assert private == []


TRAPS_SIGINT = textwrap.dedent(
    """\
    import signal, sys, time
    def stop(*_):
        open(sys.argv[1], "w").write("SIGINT")
        sys.exit(130)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    time.sleep(600)
    """
)


class _InterruptedOnce:
    """A running process whose first wait() is interrupted, as Dagster does on a cancelled run."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.interrupted = False

    def wait(self, timeout: float | None = None) -> int:
        if not self.interrupted:
            self.interrupted = True
            raise dg.DagsterExecutionInterruptedError()
        return self.process.wait(timeout=timeout)

    def send_signal(self, sig: int) -> None:
        self.process.send_signal(sig)


def test_cancelled_run_sends_sigint(tmp_path: Path) -> None:
    """A cancelled run SIGINTs raystep (so it tears down), waits for it, and stays cancelled."""
    marker = tmp_path / "signal"
    process = subprocess.Popen(
        [sys.executable, "-c", TRAPS_SIGINT, str(marker)], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        context = dg.build_op_context()
        with pytest.raises(dg.DagsterExecutionInterruptedError):
            RaystepResource(termination_timeout_seconds=60)._wait(
                context,
                _InterruptedOnce(process),  # type: ignore[arg-type]
            )
        assert process.returncode == 130
        assert marker.read_text() == "SIGINT"
    finally:
        process.kill()
        process.wait()


PREEMPTED_STAND_IN = textwrap.dedent(
    """\
    #!{python}
    import os, sys
    from pathlib import Path
    from dagster_pipes import open_dagster_pipes
    calls = Path(os.environ["STAND_IN_CALLS"])
    n = len(calls.read_text().splitlines()) if calls.exists() else 0
    code = int(os.environ["STAND_IN_EXITS"].split(",")[n])
    with calls.open("a") as f:
        f.write(f"{{code}}\\n")
    with open_dagster_pipes() as pipes:
        if code == 0:
            pipes.report_asset_materialization(metadata={{"loss": 0.5}})
    sys.exit(code)
    """
)


@pytest.mark.parametrize(
    ("exits", "success", "calls"),
    [
        ("75,75,0", True, 3),  # two preemptions, then the third RayJob succeeds
        ("75,75,75,0", False, 3),  # a storm beyond the budget of 2 retries
        ("3,0", False, 1),  # an infrastructure failure is not retried
        ("1,0", False, 1),  # nor is a failed job
        ("75,1,0", False, 2),  # a retry that fails for its own reason ends there
    ],
)
def test_preempted_step_is_retried(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    exits: str,
    success: bool,
    calls: int,
) -> None:
    binary = tmp_path / "raystep"
    binary.write_text(PREEMPTED_STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    monkeypatch.setenv("STAND_IN_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("STAND_IN_EXITS", exits)
    model = raystep_asset(name="model", spec="train.yaml")
    result = dg.materialize(
        [model],
        resources={
            "raystep": RaystepResource(binary=str(binary), preemption_backoff_seconds=0)
        },
        raise_on_error=False,
    )
    assert result.success is success
    assert len((tmp_path / "calls").read_text().splitlines()) == calls
    retries = [
        e
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY
    ]
    assert len(retries) == calls - 1  # every attempt but the last was preempted
    if not success:
        failure = result.failure_data_for_node("model")
        assert failure is not None and failure.user_failure_data is not None
        code = int(exits.split(",")[calls - 1])
        assert failure.user_failure_data.metadata[
            "raystep/exit_code"
        ] == dg.IntMetadataValue(code)
