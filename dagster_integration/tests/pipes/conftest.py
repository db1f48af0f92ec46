"""Fixtures for the Go Pipes library tests: the Go binaries, built once."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _binary(tmp_path_factory: pytest.TempPathFactory, name: str, package: str) -> Path:
    built = REPO / "bin" / name
    if built.exists():
        return built
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"bin/{name} is missing and go is not on PATH: run `make build`")
    out = tmp_path_factory.mktemp("bin") / name
    subprocess.run([go, "build", "-o", str(out), package], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="session")
def conformance_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/pipes-conformance, or a fresh build when bin/ has none."""
    return _binary(
        tmp_path_factory,
        "pipes-conformance",
        "./dagster_integration/pipes/cmd/pipes-conformance",
    )


@pytest.fixture(scope="session")
def example_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small Go example program, always built for the test session."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH")
    out = tmp_path_factory.mktemp("bin") / "pipes-example"
    subprocess.run(
        [go, "build", "-o", str(out), "./dagster_integration/pipes/cmd/pipes-example"],
        cwd=REPO,
        check=True,
    )
    return out
