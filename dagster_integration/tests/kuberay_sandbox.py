"""The KubeRay test environment (test/cluster/sandbox), started and stopped from Python.

The sandbox runs a real API server (with an audit log), controller manager, scheduler, kwok nodes
from a platform profile, the real KubeRay operator and a local Ray head. The KubeRay tests start
one per module; scripts/measure_run_reuse.py starts one to count the clusters a run creates.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

# Cold, the sandbox may first build the Kubernetes binaries (test/k8s/build.sh): minutes on 2 cores.
READY_TIMEOUT_S = 1200.0
STOP_TIMEOUT_S = 120.0
SANDBOX_ENV = ("KUBECONFIG", "RAYSTEP_PROFILE")
"""SANDBOX_ENV is what raystep needs of the env file to reach the sandbox."""


@dataclass(frozen=True)
class Sandbox:
    """Sandbox is a running sandbox: raystep's environment for it and its API server's audit log."""

    env: dict[str, str]
    audit_log: Path


def read_env_file(path: Path) -> dict[str, str]:
    """Return the sandbox's `export KEY=value` lines, shell-unquoted."""
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def _ready_line(
    proc: subprocess.Popen[str], log: Path, fail: Callable[[str], NoReturn]
) -> str:
    """Return the first stdout line of the sandbox (its directory), or fail saying why not."""
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
        fail(
            f"sandbox not ready within {READY_TIMEOUT_S:.0f}s; its log:\n{log.read_text()}"
        )
    if not line:
        proc.wait()
        fail(
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


@contextmanager
def running_sandbox(
    repo: Path,
    work: Path,
    fail: Callable[[str], NoReturn],
    ray_dashboard: str = "",
) -> Iterator[Sandbox]:
    """Build and start a sandbox of examples/platform.yaml in work; stop it on every path.

    With ray_dashboard, the sandbox uses that running Ray head instead of starting one.
    """
    binary = work / "sandbox"
    build = subprocess.run(
        ["go", "build", "-o", str(binary), "./test/cluster/sandbox"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        fail(f"go build ./test/cluster/sandbox failed:\n{build.stderr}")
    directory = work / "dir"
    directory.mkdir()
    log = work / "sandbox.log"
    profile = repo / "examples" / "platform.yaml"
    command = [str(binary), "-fast", "-audit", "-profile", str(profile)]
    if ray_dashboard:
        command += ["-ray-dashboard", ray_dashboard]
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [*command, "-dir", str(directory)],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
    try:
        printed = _ready_line(proc, log, fail)
        assert Path(printed) == directory, (
            f"sandbox printed {printed!r}, want {directory}"
        )
        env = read_env_file(directory / "env")
        assert env.get("RAYSTEP_BACKEND") == "kuberay", env
        missing = [
            key for key in (*SANDBOX_ENV, "SANDBOX_AUDIT_LOG") if not env.get(key)
        ]
        assert not missing, f"sandbox env file lacks {missing}: {env}"
        assert "RAYSTEP_DASHBOARD_URL" not in env, (
            f"the sandbox's steps port-forward, no dashboard URL: {env}"
        )
        yield Sandbox(
            env={key: env[key] for key in SANDBOX_ENV},
            audit_log=Path(env["SANDBOX_AUDIT_LOG"]),
        )
    finally:
        _stop(proc)


def created(audit_log: Path, resource: str, since: int = 0) -> list[str]:
    """Return the names of the `resource` objects the API server created, in order.

    Only creates that succeeded count (a step that lost the race to create a run-scoped cluster
    gets 409 and attaches). `since` is a byte offset into the log: count only what came after it.
    """
    names = []
    with audit_log.open("rb") as f:
        f.seek(since)
        for line in f:
            event = json.loads(line)
            ref = event.get("objectRef", {})
            code = event.get("responseStatus", {}).get("code", 0)
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == "create"
                and ref.get("resource") == resource
                and 200 <= code < 300
            ):
                names.append(ref.get("name", ""))
    return names
