"""Ray heads for the tests: the session's shared head, or one of this pytest session's own.

Under `make test`, test/suite starts one plain Ray head for the whole run and describes it in
the file $RAYSTEP_TEST_HEAD names (`key=value` lines: dashboard, gcs, temp-dir, written once
the head is ready); every Go package and these tests use it. Without it (pytest alone), or
when that head is gone, the session starts a head of its own, once. Tests whose subject is a
head's own lifecycle (the wheel's private head, run-scoped heads) start theirs through raystep.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SESSION_HEAD_ENV = "RAYSTEP_TEST_HEAD"
"""SESSION_HEAD_ENV names the file describing the session's plain head (test/suite)."""


@dataclass(frozen=True)
class Head:
    """A running Ray head: its dashboard URL (RAY_ADDRESS for raystep) and GCS address."""

    dashboard: str
    gcs: str


def session_head(timeout: float = 600.0) -> Head | None:
    """The session's shared head, or None (with the reason on stderr) when there is none to use.

    test/suite writes the file once its head is ready, which may be after pytest starts.
    """
    path = os.environ.get(SESSION_HEAD_ENV)
    if not path:
        return None
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print(f"{SESSION_HEAD_ENV}={path} was not written within {timeout:.0f}s")
            return None
        time.sleep(0.1)
    fields = dict(
        line.split("=", 1)
        for line in Path(path).read_text().splitlines()
        if "=" in line
    )
    if "error" in fields:
        print(
            f"the session head ({SESSION_HEAD_ENV}={path}) is unusable: {fields['error']}"
        )
        return None
    head = Head(fields["dashboard"], fields["gcs"])
    if not _answers(head.dashboard, 30.0):
        print(f"the session head at {head.dashboard} does not answer")
        return None
    return head


def _answers(url: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/version", timeout=5) as resp:
                return bool(resp.status == 200)
        except OSError:
            time.sleep(0.5)
    return False


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


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


@contextmanager
def private_head(ray_path: str) -> Iterator[Head]:
    """A head of this session's own on 127.0.0.1 with free ports, stopped on exit."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rs-test-", dir="/tmp"))
    # A free port for every listener but the dashboard agent's HTTP server, which picks its own:
    # it binds last, and a reserved port taken meanwhile leaves the head without a job agent
    # (as raystep's heads do: see rayhead's startArgs). The dashboard's metrics server takes its
    # port from the environment, not a flag; its default is a fixed one every head wants.
    ports = _free_ports(9)
    gcs, dashboard = ports[0], ports[1]
    env = {
        **os.environ,
        "PATH": ray_path,
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "DASHBOARD_METRIC_PORT": str(ports[8]),
    }
    env.pop("RAY_ADDRESS", None)
    ray = (
        os.environ.get("RAYSTEP_RAY_BIN") or shutil.which("ray", path=ray_path) or "ray"
    )
    log = temp_dir / "head.log"
    with log.open("wb") as out:
        head = subprocess.Popen(
            [
                ray,
                "start",
                "--head",
                "--block",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=8",
                f"--temp-dir={temp_dir}",
                f"--port={gcs}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dashboard}",
                f"--node-manager-port={ports[2]}",
                f"--object-manager-port={ports[3]}",
                f"--ray-client-server-port={ports[4]}",
                "--dashboard-agent-listen-port=0",
                f"--dashboard-agent-grpc-port={ports[5]}",
                f"--metrics-export-port={ports[6]}",
                f"--runtime-env-agent-port={ports[7]}",
                "--disable-usage-stats",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{dashboard}"
        deadline = time.monotonic() + 240
        while not _answers(url, 1.0):
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"ray head at {url} did not start (exit {head.returncode}):\n"
                    + log.read_text()[-4000:]
                )
        yield Head(url, f"127.0.0.1:{gcs}")
    finally:
        _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
