"""The raystep resource: runs `raystep run` as a Dagster Pipes subprocess and returns its results.

raystep itself speaks Pipes: it relays the Ray driver's logs, materializations and asset checks
and adds its own metadata (`raystep/...` keys). This module only builds the command line, starts
it in a Pipes session (Dagster's `open_pipes_session`, with the temp-file context injector that
`PipesSubprocessClient` uses, which also carries a ranged step's partitions, see `partitions`,
and a message reader that costs nothing while the step is quiet, see `messages`) and turns
raystep's exit code, read from the process itself, into a step failure.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from dagster_raystep.messages import MessageFileReader
from dagster_raystep.partitions import PartitionRangeInjector

DISTRIBUTION = "dagster-raystep"
"""DISTRIBUTION is the name this package is installed under."""

RAYSTEP_BIN_ENV = "RAYSTEP_BIN"
"""RAYSTEP_BIN_ENV names the environment variable that points at the raystep binary."""

EXIT_CODES: Mapping[int, str] = {
    1: "the Ray job FAILED or was STOPPED",
    2: "bad usage or an invalid spec; nothing was created",
    3: "infrastructure failure (cluster, dashboard, provisioning or deadline)",
    75: "preempted: the cluster lost a pod to preemption, eviction or node loss while the job ran; worth a retry",
    129: "cancelled by SIGHUP, after teardown",
    130: "cancelled by SIGINT, after teardown",
    143: "cancelled by SIGTERM, after teardown",
}
"""EXIT_CODES explains raystep's non-zero exit codes."""

EXIT_PREEMPTED = 75
"""EXIT_PREEMPTED is the exit code of a step whose cluster was preempted: RaystepResource retries it."""

BACKENDS = ("local", "kuberay")
"""BACKENDS are the values of `raystep run --backend`."""

OverrideValue = str | int | float | bool
"""OverrideValue is a scalar that `--set path=value` accepts."""

AnyContext = (
    dg.AssetExecutionContext | dg.OpExecutionContext | dg.AssetCheckExecutionContext
)
"""AnyContext is the execution context of an asset, op or asset check."""


REASON_LIMIT = 4000
"""REASON_LIMIT bounds how much of raystep's error a RaystepError's description quotes."""


def _shorten(reason: str) -> str:
    """Return reason, or its start and its end when it is longer than REASON_LIMIT.

    A failed Ray job's message ends with up to 20,000 characters of the driver's log; its start
    says what failed and its end, a traceback's last lines, why.
    """
    if len(reason) <= REASON_LIMIT:
        return reason
    head = REASON_LIMIT // 4
    cut = len(reason) - REASON_LIMIT
    return f"{reason[:head]} [… {cut} characters left out …] {reason[-(REASON_LIMIT - head) :]}"


class RaystepError(dg.Failure):
    """RaystepError fails a step whose `raystep run` exited non-zero, carrying the exit code.

    Its description quotes raystep's own error (`reason`, what raystep said when it closed the
    Pipes session) when raystep said one: it is what the run's failure, and an alert on it, show.
    """

    def __init__(
        self, spec: str, exit_code: int | None, reason: str | None = None
    ) -> None:
        meaning = EXIT_CODES.get(exit_code or 0, "unexpected exit code")
        said = (
            f"raystep's error: {_shorten(reason.strip())}"
            if reason and reason.strip()
            else "raystep's error and the Ray job's log are in this step's events and logs."
        )
        super().__init__(
            description=f"raystep run -f {spec} exited with code {exit_code}: {meaning}. {said}",
            metadata={
                "raystep/exit_code": -1 if exit_code is None else exit_code,
                "raystep/spec": dg.MetadataValue.path(spec),
            },
            # An invalid spec fails the same way on every retry.
            allow_retries=exit_code != 2,
        )
        self.exit_code = exit_code


def format_overrides(overrides: Mapping[str, OverrideValue] | None) -> list[str]:
    """Return the `--set path=value` arguments for overrides, in the order given.

    Paths are dotted paths into the spec (`spec.timeouts.run`). Booleans are written as YAML's
    `true` / `false`, other values with `str()`.
    """
    args: list[str] = []
    for path, value in (overrides or {}).items():
        if not path or "=" in path or "" in path.split("."):
            msg = f"invalid raystep override path {path!r}: want a dotted path like spec.timeouts.run"
            raise ValueError(msg)
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        args += ["--set", f"{path}={text}"]
    return args


def bundled_binary() -> Path | None:
    """Return the raystep binary that this installation of dagster-raystep brought, or None.

    A platform wheel carries raystep as a script, which the installer puts in the environment's
    scripts directory (`bin`); the installed distribution's file list says where it went, also for
    a `--user` or `--target` install. A source install (sdist, editable) has none.
    """
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "raystep" and file.parent.name == "bin":
            path = Path(os.fspath(file.locate())).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return path
    return None


class RaystepResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # Dagster's own spelling
    """RaystepResource runs `raystep run -f SPEC` for an asset, asset check or op.

    raystep runs as a Dagster Pipes subprocess, so the Ray driver's logs, materializations and
    asset checks arrive in Dagster as they happen; `run` returns the completed invocation, whose
    `get_results()` an asset returns. A non-zero exit fails the step with a `RaystepError` that
    says what the exit code means. A cancelled run sends raystep SIGINT, so it tears its cluster
    down, and waits `termination_timeout_seconds` for it.
    """

    binary: str | None = Field(
        default=None,
        description=(
            f"Path or name of the raystep binary; default ${RAYSTEP_BIN_ENV} (read as a "
            "dg.EnvVar), else the one a platform wheel of dagster-raystep installed, else "
            "`raystep` on PATH."
        ),
    )
    backend: str | None = Field(
        default=None,
        description="`--backend`: local or kuberay; default RAYSTEP_BACKEND, else local.",
    )
    profile: str | None = Field(
        default=None, description="`--profile`: the platform profile file."
    )
    namespace: str | None = Field(
        default=None, description="`--namespace` for the kuberay backend."
    )
    ui_url: str | None = Field(
        default=None,
        description=(
            "`--ui-url`: where `raystep ui` serves; each step's metadata `raystep/history_url` "
            "links to its page in the UI's History view. Default $RAYSTEP_UI_URL."
        ),
    )
    ray_address: str | None = Field(
        default=None,
        description="RAY_ADDRESS for the local backend: use this running Ray cluster.",
    )
    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="`--set path=value` applied to every run, before the step's own overrides.",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for raystep."
    )
    cwd: str | None = Field(
        default=None, description="Working directory of the raystep process."
    )
    cluster_reuse: str | None = Field(
        default=None,
        description=(
            "`spec.cluster.reuse` for every step: `run` makes the steps of one Dagster run with "
            "identical cluster sections share one cluster, which `raystep_run_cluster_sensors` "
            "remove when the run ends; default `run` when `run_cluster` is set, else the spec's (step)."
        ),
    )
    run_cluster: str | None = Field(
        default=None,
        description=(
            "`--run-cluster`: a YAML file whose one key, `cluster`, is the cluster section every "
            "run-scoped step uses instead of its own, so all the steps of a run share one cluster "
            'even when their specs size theirs differently. Implies `cluster_reuse="run"`.'
        ),
    )
    preemption_retries: int = Field(
        default=2,
        ge=0,
        description=(
            "How many times a step whose cluster was preempted (raystep's exit code 75: a pod "
            "lost to scheduler or Kueue preemption, eviction or node loss) is retried, each on a "
            "new RayJob; every other failure is not retried by the resource."
        ),
    )
    preemption_backoff_seconds: float = Field(
        default=30.0,
        ge=0,
        description="Wait before the first retry of a preempted step; doubled for each retry after it.",
    )
    termination_timeout_seconds: float = Field(
        default=120.0,
        description="How long a cancelled run waits for raystep to tear its cluster down.",
    )

    def resolve_binary(self) -> str:
        """Return the raystep executable to run, or raise a clear error when there is none.

        In order: `binary`, $RAYSTEP_BIN, the wheel's own copy (`bundled_binary`), `raystep` on
        PATH.
        """
        candidate = self.binary or dg.EnvVar(RAYSTEP_BIN_ENV).get_value()
        if not candidate:
            bundled = bundled_binary()
            if bundled is not None:
                return os.fspath(bundled)
            candidate = "raystep"
        if os.sep in candidate:
            if not os.access(candidate, os.X_OK) or not Path(candidate).is_file():
                msg = f"raystep binary {candidate} is missing or not executable (build it with `make build`)"
                raise dg.DagsterInvariantViolationError(msg)
            return candidate
        found = shutil.which(candidate)
        if found is None:
            msg = (
                f"{candidate!r} is not on PATH: install a platform wheel of dagster-raystep "
                f"(it brings raystep), or set the resource's `binary` or ${RAYSTEP_BIN_ENV} to "
                "its path"
            )
            raise dg.DagsterInvariantViolationError(msg)
        return found

    def command(
        self,
        spec: str | os.PathLike[str],
        overrides: Mapping[str, OverrideValue] | None = None,
    ) -> list[str]:
        """Return the `raystep run` command line for spec with the resource's and these overrides."""
        args = [self.resolve_binary(), "run", "-f", os.fspath(spec)]
        if self.backend:
            if self.backend not in BACKENDS:
                msg = f"unknown raystep backend {self.backend!r}: want one of {', '.join(BACKENDS)}"
                raise ValueError(msg)
            args += ["--backend", self.backend]
        if self.namespace:
            args += ["--namespace", self.namespace]
        if self.profile:
            args += ["--profile", self.profile]
        if self.ui_url:
            args += ["--ui-url", self.ui_url]
        if self.run_cluster:
            if self.cluster_reuse not in (None, "run"):
                msg = (
                    f"run_cluster={self.run_cluster!r} is the cluster the steps of a run share, "
                    f"but cluster_reuse={self.cluster_reuse!r}: drop one, or set cluster_reuse='run'"
                )
                raise ValueError(msg)
            args += ["--run-cluster", self.run_cluster]
        reuse_value = self.cluster_reuse or ("run" if self.run_cluster else None)
        reuse = {"spec.cluster.reuse": reuse_value} if reuse_value else {}
        return args + format_overrides({**reuse, **self.overrides, **(overrides or {})})

    def down_run_command(self, run_id: str) -> list[str]:
        """Return the `raystep down --dagster-run-id` command removing run_id's run-scoped clusters."""
        args = [self.resolve_binary(), "down", "--dagster-run-id", run_id]
        if self.namespace:
            args += ["--namespace", self.namespace]
        if self.profile:
            args += ["--profile", self.profile]
        return args

    def down_run(self, run_id: str) -> str:
        """Delete the run-scoped clusters of run_id and return raystep's report of it."""
        env = {**os.environ, **self.environment()}
        if self.backend:
            env["RAYSTEP_BACKEND"] = self.backend
        done = subprocess.run(
            self.down_run_command(run_id),
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            msg = f"raystep down --dagster-run-id {run_id} exited with code {done.returncode}: {done.stderr.strip()}"
            raise dg.Failure(description=msg)
        return done.stdout

    def environment(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the environment raystep gets on top of Dagster's own."""
        merged = {**self.env, **(env or {})}
        if self.ray_address:
            merged["RAY_ADDRESS"] = self.ray_address
        return merged

    def run(
        self,
        context: AnyContext,
        spec: str | os.PathLike[str],
        *,
        overrides: Mapping[str, OverrideValue] | None = None,
        extras: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> dg.PipesClientCompletedInvocation:
        """Run the spec through Pipes and return the completed invocation.

        The Pipes extras tell the Ray driver which asset checks this step runs
        (`asset_checks`: a list of `{"asset_key", "check_name"}`), plus any extras given here.
        """
        op_context = (
            context.op_execution_context
            if isinstance(context, dg.AssetCheckExecutionContext)
            else context
        )
        command = self.command(spec, overrides)
        op_context.log.info(f"raystep: {shlex.join(command)}")
        reader = MessageFileReader()
        with dg.open_pipes_session(
            context=op_context,
            context_injector=PartitionRangeInjector(
                op_context, dg.PipesTempFileContextInjector()
            ),
            message_reader=reader,
            extras={**_check_extras(op_context), **(extras or {})},
        ) as session:
            code = self._wait(
                op_context,
                subprocess.Popen(
                    command,
                    cwd=self.cwd,
                    env={
                        **os.environ,
                        **self.environment(env),
                        **session.get_bootstrap_env_vars(),
                    },
                ),
            )
        # The session is closed: the reader has read raystep's last message, which says why
        # a failed step failed.
        if code == EXIT_PREEMPTED:
            self._retry_preempted(op_context, os.fspath(spec), reader.failure)
        if code != 0:
            raise RaystepError(os.fspath(spec), code, reader.failure)
        return dg.PipesClientCompletedInvocation(session)

    def _retry_preempted(
        self,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        spec: str,
        reason: str | None,
    ) -> None:
        """Ask Dagster to retry a preempted step, within preemption_retries, with backoff."""
        attempt = context.retry_number
        if attempt >= self.preemption_retries:
            context.log.warning(
                f"raystep: {spec} was preempted again; {attempt} retries spent of "
                f"preemption_retries={self.preemption_retries}: failing the step"
            )
            return
        wait = self.preemption_backoff_seconds * 2**attempt
        context.log.warning(
            f"raystep: {spec} was preempted (exit {EXIT_PREEMPTED}); retry {attempt + 1} of "
            f"{self.preemption_retries} on a new RayJob in {wait:g}s"
        )
        raise dg.RetryRequested(
            max_retries=self.preemption_retries, seconds_to_wait=wait
        ) from RaystepError(spec, EXIT_PREEMPTED, reason)

    def _wait(
        self,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        process: subprocess.Popen[bytes],
    ) -> int:
        """Return raystep's exit code; a cancelled run sends it SIGINT first, to tear down."""
        try:
            return process.wait()
        except dg.DagsterExecutionInterruptedError:
            context.log.info(
                "raystep: run cancelled, sending SIGINT to tear the cluster down"
            )
            process.send_signal(signal.SIGINT)
            process.wait(timeout=self.termination_timeout_seconds)
            raise


def _check_extras(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
) -> dict[str, Any]:
    """Return the selected asset checks as Pipes extras (empty when the step runs none)."""
    keys = sorted(
        context.selected_asset_check_keys,
        key=lambda k: (k.asset_key.to_user_string(), k.name),
    )
    if not keys:
        return {}
    return {
        "asset_checks": [
            {"asset_key": k.asset_key.to_escaped_user_string(), "check_name": k.name}
            for k in keys
        ]
    }
