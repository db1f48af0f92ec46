"""Build dagster-raystep's sdist and one platform wheel per target, each with the raystep binary.

    python tools/wheels.py --dist dist [--target linux/amd64 ...]

The version is setuptools-scm's, from the git tag (`dagster_integration/pyproject.toml`): the
sdist and a pure wheel are built first (pypa/build, isolated), and the version read off the pure
wheel is stamped into the Go binaries (`raystep version` prints it). Each target's binary is
cross-compiled static (CGO off), so one binary runs on any system of its OS and architecture; it
goes into the wheel as `<name>.data/scripts/raystep`, which pip installs as the environment's
`bin/raystep`. The pure wheel's files are copied as they are; WHEEL gets the platform tag and
RECORD the hashes of what changed. The pure wheel is removed: it would shadow the platform ones
for pip on every system.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO / "dagster_integration"


@dataclass(frozen=True)
class Target:
    """Target is one platform wheel: Go's GOOS/GOARCH and the wheel's platform tag."""

    goos: str
    goarch: str
    platform: str

    @property
    def name(self) -> str:
        return f"{self.goos}/{self.goarch}"


# TARGETS are the wheels `make wheels` builds. Linux binaries are static, so they need no glibc
# (manylinux's oldest baseline) nor musl; Go 1.25 and later run on macOS 12 and later.
TARGETS = {
    t.name: t
    for t in (
        Target(
            "linux",
            "amd64",
            "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
        ),
        Target(
            "linux",
            "arm64",
            "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
        ),
        Target("darwin", "amd64", "macosx_12_0_x86_64"),
        Target("darwin", "arm64", "macosx_12_0_arm64"),
    )
}

# A fixed time for the entries we add, so that a wheel's bytes depend on its contents only.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--target",
        action="append",
        choices=sorted(TARGETS),
        help="GOOS/GOARCH to build (repeatable); default all four",
    )
    args = parser.parse_args()
    dist: Path = args.dist.resolve()
    dist.mkdir(parents=True, exist_ok=True)
    for old in [
        *dist.glob("dagster_raystep-*.whl"),
        *dist.glob("dagster_raystep-*.tar.gz"),
    ]:
        old.unlink()

    pure = build_sdist_and_pure_wheel(dist)
    version = pure.name.split("-")[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.target or list(TARGETS):
            target = TARGETS[name]
            binary = Path(tmp) / f"raystep-{target.goos}-{target.goarch}"
            build_binary(target, version, binary)
            wheel = platform_wheel(pure, target, binary, dist)
            print(wheel)
    pure.unlink()


def build_sdist_and_pure_wheel(dist: Path) -> Path:
    """Build the sdist and, from it, the pure wheel into dist; return the wheel's path."""
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(PACKAGE_DIR)],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        sys.exit(
            f"python -m build {PACKAGE_DIR}: exit {build.returncode}\n{build.stdout}{build.stderr}"
        )
    (wheel,) = dist.glob("dagster_raystep-*-py3-none-any.whl")
    return wheel


def build_binary(target: Target, version: str, out: Path) -> None:
    """Cross-compile raystep for target, stamped with version, into out."""
    env = {
        **os.environ,
        "CGO_ENABLED": "0",
        "GOOS": target.goos,
        "GOARCH": target.goarch,
    }
    subprocess.run(
        [
            os.environ.get("GO", "go"),
            "build",
            "-trimpath",
            "-ldflags",
            f"-s -w -X main.version={version}",
            "-o",
            str(out),
            "./cmd/raystep",
        ],
        cwd=REPO,
        env=env,
        check=True,
    )


def platform_wheel(pure: Path, target: Target, binary: Path, dist: Path) -> Path:
    """Write pure's files plus binary as the wheel's raystep script, tagged for target."""
    name, version = pure.name.split("-")[:2]
    dist_info = f"{name}-{version}.dist-info"
    script = f"{name}-{version}.data/scripts/raystep"
    out = dist / f"{name}-{version}-py3-none-{target.platform}.whl"
    records: list[tuple[str, str, str]] = []
    with (
        zipfile.ZipFile(pure) as src,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            if info.filename == f"{dist_info}/RECORD":
                continue
            data = src.read(info)
            if info.filename == f"{dist_info}/WHEEL":
                data = retag(data, target.platform)
                info = _entry(info.filename, 0o644)
            dst.writestr(info, data)
            records.append(_record(info.filename, data))
        data = binary.read_bytes()
        dst.writestr(_entry(script, 0o755), data)
        records.append(_record(script, data))
        records.append((f"{dist_info}/RECORD", "", ""))
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(records)
        dst.writestr(_entry(f"{dist_info}/RECORD", 0o644), text.getvalue())
    return out


def retag(wheel_file: bytes, platform: str) -> bytes:
    """Return the WHEEL metadata for a platform wheel: not purelib, one tag, py3-none-platform."""
    lines = [
        line
        for line in wheel_file.decode().splitlines()
        if not line.startswith(("Tag:", "Root-Is-Purelib:"))
    ]
    lines += ["Root-Is-Purelib: false", f"Tag: py3-none-{platform}"]
    return ("\n".join(lines) + "\n").encode()


def _entry(filename: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(filename, ZIP_TIME)
    info.external_attr = (
        0o100000 | mode
    ) << 16  # a regular file with mode: pip keeps +x
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _record(filename: str, data: bytes) -> tuple[str, str, str]:
    digest = (
        base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    )
    return filename, f"sha256={digest}", str(len(data))


if __name__ == "__main__":
    main()
