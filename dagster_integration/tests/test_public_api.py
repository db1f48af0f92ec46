"""raystep's Python uses Dagster's public API only.

Dagster's private modules (``dagster._core`` and every other ``dagster._*``)
change between releases without notice; an upgrade of Dagster must not
break dagster-raystep, its example or its tests in ways nobody was told of.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("dagster_integration", "examples", "tools", "test")
PUBLIC_PACKAGES = (
    "dagster",
    "dagster_pipes",
    "dagster_shared",
    "dagster_dg_cli",
    "dagster_dg_core",
)


def private_imports(path: Path) -> list[str]:
    """The private Dagster modules path imports, as 'line: module'."""
    found = []
    for node in ast.walk(
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    ):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module] + [
                f"{node.module}.{alias.name}" for alias in node.names
            ]
        else:
            continue
        for module in modules:
            top, _, rest = module.partition(".")
            if top in PUBLIC_PACKAGES and any(
                part.startswith("_") for part in rest.split(".") if part
            ):
                found.append(f"{node.lineno}: {module}")
    return found


def python_files() -> list[Path]:
    files = []
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            if not any(
                part.startswith(".") or part in {"build", "dist", "node_modules"}
                for part in path.relative_to(ROOT).parts
            ):
                files.append(path)
    return files


def test_no_private_dagster_imports() -> None:
    files = python_files()
    assert any(f.name == "resource.py" for f in files), (
        "the walk found no dagster_raystep source"
    )
    offenders = {
        str(f.relative_to(ROOT)): imports
        for f in files
        if (imports := private_imports(f))
    }
    assert not offenders, f"private Dagster modules imported: {offenders}"


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import dagster as dg\n"
        "from dagster import asset\n"
        "from dagster._core.pipes.utils import PipesFileMessageReader\n"
        "import dagster_pipes._internal\n"
        "from dagster_pipes import PipesContext\n",
        encoding="utf-8",
    )
    assert private_imports(sample) == [
        "3: dagster._core.pipes.utils",
        "3: dagster._core.pipes.utils.PipesFileMessageReader",
        "4: dagster_pipes._internal",
    ]
