"""Reporting for the ads_ranking Ray entrypoints: Dagster Pipes when launched by Dagster, plain text otherwise.

Under raystep the Pipes bootstrap reaches the Ray driver through the job's runtime_env and the
messages travel on the driver's stdout, inside the Ray job log. Each message is written as one
line with a single write followed by a flush, so a log reader never sees half a message.
Run by hand (`python train.py`) there is no bootstrap: the same calls print readable lines.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TextIO

from dagster_pipes import (
    PipesContext,
    PipesDefaultMessageWriter,
    PipesEnvVarParamsLoader,
    PipesMessage,
    PipesMessageWriterChannel,
    PipesParams,
    open_dagster_pipes,
)


class _LineChannel(PipesMessageWriterChannel):
    """_LineChannel writes each Pipes message as one line in a single write, then flushes."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write_message(self, message: PipesMessage) -> None:
        line = json.dumps(message, allow_nan=False) + "\n"
        with self._lock:
            self._stream.write(line)
            self._stream.flush()


class _LineWriter(PipesDefaultMessageWriter):
    """_LineWriter is Dagster's default message writer with whole-line writes on stdout/stderr."""

    @contextmanager
    def open(self, params: PipesParams) -> Iterator[PipesMessageWriterChannel]:
        stream = params.get(self.STDIO_KEY)
        if stream in (self.STDOUT, self.STDERR):
            yield _LineChannel(sys.stdout if stream == self.STDOUT else sys.stderr)
            return
        with super().open(params) as channel:
            yield channel


def metadata_value(value: Any) -> dict[str, Any]:
    """Return value as an explicitly typed Pipes metadata value (floats stay floats)."""
    if isinstance(value, bool):
        return {"raw_value": value, "type": "bool"}
    if isinstance(value, int):
        return {"raw_value": value, "type": "int"}
    if isinstance(value, float):
        if not math.isfinite(value):
            return {"raw_value": str(value), "type": "text"}
        return {"raw_value": value, "type": "float"}
    if isinstance(value, Path):
        return {"raw_value": str(value), "type": "path"}
    if isinstance(value, (dict, list)):
        return {"raw_value": value, "type": "json"}
    return {"raw_value": str(value), "type": "text"}


class Report:
    """Report sends a step's logs, materialization and asset checks to Dagster, or prints them.

    Use it as a context manager around the whole entrypoint: under Pipes an exception inside the
    block is reported to Dagster when the channel closes.
    """

    def __init__(self, step: str) -> None:
        self.step = step
        self._pipes: PipesContext | None = None

    def __enter__(self) -> Self:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
        if PipesEnvVarParamsLoader().is_dagster_pipes_process():
            self._pipes = open_dagster_pipes(message_writer=_LineWriter())
            self._pipes.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pipes is not None:
            self._pipes.__exit__(exc_type, exc, tb)

    @property
    def under_dagster(self) -> bool:
        """Whether the step was launched by Dagster (a Pipes bootstrap was found)."""
        return self._pipes is not None

    @property
    def extras(self) -> Mapping[str, Any]:
        """The extras Dagster passed to the step (empty when standalone)."""
        return self._pipes.extras if self._pipes is not None else {}

    def asset_key(self, default: str) -> str:
        """Return the single asset key this step materializes, or default when there is none."""
        if self._pipes is not None:
            # PipesContext.asset_keys raises when the step has none: read the data.
            keys = self._pipes._data.get("asset_keys") or []
            if len(keys) == 1:
                return keys[0]
        return default

    def log(self, message: str) -> None:
        """Log an INFO line to Dagster, or print it."""
        if self._pipes is not None:
            self._pipes.log.info(message)
        else:
            print(f"[{self.step}] {message}")

    def materialize(
        self,
        asset_key: str,
        metadata: Mapping[str, Any],
        data_version: str | None = None,
    ) -> None:
        """Report the asset's materialization with typed metadata, or print it."""
        typed = {name: metadata_value(v) for name, v in metadata.items()}
        if self._pipes is not None:
            self._pipes.report_asset_materialization(
                metadata=typed, data_version=data_version, asset_key=asset_key
            )
            return
        print(f"[{self.step}] materialized {asset_key} (data version {data_version}):")
        _print_metadata(metadata)

    def check(
        self, asset_key: str, name: str, passed: bool, metadata: Mapping[str, Any]
    ) -> None:
        """Report an ERROR-severity asset check result, or print it."""
        typed = {key: metadata_value(v) for key, v in metadata.items()}
        if self._pipes is not None:
            self._pipes.report_asset_check(
                check_name=name,
                passed=passed,
                severity="ERROR",
                metadata=typed,
                asset_key=asset_key,
            )
            return
        print(
            f"[{self.step}] check {asset_key}:{name} {'PASSED' if passed else 'FAILED'}:"
        )
        _print_metadata(metadata)


def _print_metadata(metadata: Mapping[str, Any]) -> None:
    width = max((len(name) for name in metadata), default=0)
    for name, value in metadata.items():
        shown = f"{value:.6g}" if isinstance(value, float) else value
        print(f"  {name:<{width}}  {shown}")
