"""`make wheels`: four platform wheels that bring raystep, and one that works from a fresh virtualenv.

The wheels are built once for the module, the way a release is (`make wheels DIST=...`). Each is
read as an installer reads it (WHEEL, RECORD) and its binary's header says which system it is
for. The host's wheel is then installed with pip into a new virtualenv that has no checkout on
its path: the `raystep` it put in the venv's bin runs, and a small asset, materialized by that
venv's Python with a resource that names no binary, runs through it on a private local head.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import platform
import struct
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# PLATFORMS maps each wheel's platform tag to the (OS, machine) its binary must be built for.
PLATFORMS = {
    "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64": (
        "linux",
        "x86_64",
    ),
    "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64": (
        "linux",
        "aarch64",
    ),
    "macosx_12_0_x86_64": ("darwin", "x86_64"),
    "macosx_12_0_arm64": ("darwin", "arm64"),
}

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}

DRIVER = """\
from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    pipes.report_asset_materialization(metadata={"greeting": "hello from ray"})
"""

SPEC = """\
apiVersion: raystep.dev/v1alpha1
kind: RayStep
metadata: {name: wheel-smoke, owner: tests}
spec:
  kind: batch_inference
  entrypoint: python driver.py
  workingDir: driver
  cluster: {rayVersion: "2.60.0", image: "rayproject/ray:2.60.0"}
  timeouts: {provision: 3m, run: 5m}
"""

# MATERIALIZE runs in the fresh venv: it writes where dagster_raystep and raystep come from and
# the materialization's metadata to its second argument (its stdout has the Ray job's output).
MATERIALIZE = """\
import json
import sys
from pathlib import Path

import dagster as dg
import dagster_raystep
from dagster_raystep import RaystepResource, raystep_asset

resource = RaystepResource(backend="local")
where = {"package": dagster_raystep.__file__, "binary": resource.resolve_binary()}
asset = raystep_asset(name="wheel_smoke", spec=sys.argv[1])
result = dg.materialize([asset], resources={"raystep": resource})
(mat,) = result.asset_materializations_for_node("wheel_smoke")
metadata = {k: str(v.value) for k, v in mat.metadata.items()}
Path(sys.argv[2]).write_text(json.dumps([where, metadata]))
"""


@pytest.fixture(scope="module")
def dist(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory `make wheels` wrote the sdist and the four wheels to."""
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run(
        ["make", "--no-print-directory", "-C", str(repo), "wheels", f"DIST={out}"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, f"make wheels: {result.stdout}{result.stderr}"
    return out


def _wheels(dist: Path) -> dict[str, Path]:
    """The wheels in dist by platform tag, after checking every name has one version."""
    wheels = {}
    for wheel in sorted(dist.glob("*.whl")):
        name, _version, python, abi, plat = wheel.stem.split("-")
        assert (name, python, abi) == ("dagster_raystep", "py3", "none"), wheel.name
        wheels[plat] = wheel
    return wheels


def _version(dist: Path) -> str:
    versions = {p.name.split("-")[1].removesuffix(".tar.gz") for p in dist.iterdir()}
    assert len(versions) == 1, f"one version for the sdist and every wheel: {versions}"
    return versions.pop()


def _binary_platform(data: bytes) -> tuple[str, str]:
    """Return the (OS, machine) an ELF or 64-bit Mach-O executable is for."""
    if data[:4] == b"\x7fELF":
        assert data[4] == 2, "a 64-bit ELF"
        (machine,) = struct.unpack_from("<H", data, 18)
        return "linux", ELF_MACHINES.get(machine, hex(machine))
    (magic, cpu) = struct.unpack_from("<II", data, 0)
    assert magic == 0xFEEDFACF, f"neither ELF nor 64-bit Mach-O: {data[:4]!r}"
    return "darwin", MACHO_CPUS.get(cpu, hex(cpu))


def _read_wheel(
    wheel: Path,
) -> tuple[dict[str, str], dict[str, bytes], zipfile.ZipFile]:
    """Return the wheel's WHEEL fields, its files and the archive, checking RECORD against them."""
    archive = zipfile.ZipFile(wheel)
    files = {info.filename: archive.read(info) for info in archive.infolist()}
    version = wheel.name.split("-")[1]
    dist_info = f"dagster_raystep-{version}.dist-info"
    fields: dict[str, str] = {}
    for line in files[f"{dist_info}/WHEEL"].decode().splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, value)
        if key == "Tag":
            fields["Tags"] = fields.get("Tags", "") + value + " "
    record = list(csv.reader(io.StringIO(files[f"{dist_info}/RECORD"].decode())))
    assert {row[0] for row in record} == set(files), (
        "RECORD lists every file, and only those"
    )
    for path, digest, size in record:
        if path.endswith("/RECORD"):
            assert (digest, size) == ("", "")
            continue
        want = base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(
            b"="
        )
        assert digest == f"sha256={want.decode()}", path
        assert int(size) == len(files[path]), path
    return fields, files, archive


def test_four_platform_wheels_each_with_its_own_binary(dist: Path) -> None:
    wheels = _wheels(dist)
    assert sorted(wheels) == sorted(PLATFORMS)
    version = _version(dist)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert f"dagster_raystep-{version}/dagster_raystep/resource.py" in names
    assert f"dagster_raystep-{version}/PKG-INFO" in names

    for plat, wheel in wheels.items():
        fields, files, archive = _read_wheel(wheel)
        assert fields["Root-Is-Purelib"] == "false", wheel.name
        assert fields["Tags"].split() == [f"py3-none-{plat}"], wheel.name
        script = f"dagster_raystep-{version}.data/scripts/raystep"
        assert script in files, f"{wheel.name} has no raystep: {sorted(files)}"
        mode = archive.getinfo(script).external_attr >> 16
        assert mode & 0o111, f"{wheel.name}: raystep is not executable ({oct(mode)})"
        assert _binary_platform(files[script]) == PLATFORMS[plat], wheel.name
        assert "dagster_raystep/resource.py" in files
        # The version the binary prints is the wheel's: the Go linker stamps it as a string.
        assert version.encode() in files[script], (
            f"{wheel.name}: raystep not stamped {version}"
        )


def _host_platform() -> str:
    machine = {
        "x86_64": "x86_64",
        "amd64": "x86_64",
        "aarch64": "aarch64",
        "arm64": "aarch64",
    }
    arch = machine[platform.machine().lower()]
    (plat,) = [p for p, want in PLATFORMS.items() if want == ("linux", arch)]
    return plat


@pytest.fixture
def fresh_venv(tmp_path: Path, repo: Path) -> Iterator[Path]:
    """A new virtualenv of the base interpreter, outside the checkout; its directory."""
    venv = tmp_path / "venv"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True, timeout=300)
    yield venv


def test_wheel_installs_raystep_into_a_fresh_venv_and_materializes(
    dist: Path,
    fresh_venv: Path,
    repo: Path,
    ray_path: str,
    tmp_path: Path,
) -> None:
    wheel = _wheels(dist)[_host_platform()]
    version = _version(dist)
    # Dagster at the versions the tests pin; everything else as pip resolves it.
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(
        "".join(
            line + "\n"
            for line in (repo / "requirements.txt").read_text().splitlines()
            if line.startswith("dagster")
        )
    )
    pip = subprocess.run(
        [
            str(fresh_venv / "bin" / "pip"),
            "install",
            "--quiet",
            "-c",
            str(constraints),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr

    raystep = fresh_venv / "bin" / "raystep"
    out = subprocess.run(
        [str(raystep), "version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith(f"raystep {version} ("), out.stdout

    # PATH has Ray (the head and the driver's Python) but no raystep: the resource can only find
    # the wheel's. The venv's own bin is not on PATH, as for a Dagster started by its full path.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"RAYSTEP_BIN", "RAY_ADDRESS", "PYTHONPATH"}
    }
    env["PATH"] = ray_path
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    for directory in env["PATH"].split(os.pathsep):
        assert not (Path(directory) / "raystep").exists(), (
            f"raystep on PATH in {directory}"
        )
    work = tmp_path / "work"
    (work / "driver").mkdir(parents=True)
    (work / "driver" / "driver.py").write_text(DRIVER)
    (work / "spec.yaml").write_text(SPEC)
    (work / "materialize.py").write_text(MATERIALIZE)
    run = subprocess.run(
        [
            str(fresh_venv / "bin" / "python"),
            "materialize.py",
            "spec.yaml",
            "result.json",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    where, metadata = json.loads((work / "result.json").read_text())
    assert Path(where["package"]).is_relative_to(fresh_venv), where
    assert where["binary"] == str(raystep.resolve()), where
    assert metadata["greeting"] == "hello from ray"
    assert metadata["raystep/backend"] == "local"
