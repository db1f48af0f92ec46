"""The message reader of `RaystepResource`: Pipes messages from a file raystep appends to.

raystep writes each Pipes message as one JSON line to the file the bootstrap names. A step can
run for hours and send a message an hour, so the reader must cost nothing while the file is
quiet: it waits longer the longer nothing comes (from `FIRST_WAIT`, doubling, up to
`LONGEST_WAIT`) and wakes at once when the session closes, to read what is left. A line is
handled only once it is whole: a read that ends inside a line keeps the start for the next read.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

FIRST_WAIT = 0.01
"""FIRST_WAIT is how long the reader waits after it found the file quiet for the first time."""

LONGEST_WAIT = 0.25
"""LONGEST_WAIT bounds the wait between two reads: how late a message can be shown."""

_FILE_PATH_KEY = "path"  # PipesDefaultMessageWriter.FILE_PATH_KEY


def waits() -> Iterator[float]:
    """Yield the waits between reads of a quiet file: doubling from FIRST_WAIT to LONGEST_WAIT."""
    wait = FIRST_WAIT
    while True:
        yield wait
        wait = min(wait * 2, LONGEST_WAIT)


class MessageFileReader(dg.PipesMessageReader):
    """Read Pipes messages from a temporary file, with a reader thread that sleeps while it is quiet.

    `failure` is the message of the exception raystep's "closed" message carried: why the step
    failed, in raystep's words; None until such a message came.
    """

    def __init__(self) -> None:
        self.failure: str | None = None

    @property
    def expected_writer_count(self) -> int:
        """One writer: raystep. Dagster reads this for every session.

        Dagster's own definition is marked preview, so reading it warned on every step's process
        that this was "not considered ready for production use", although no raystep user chose it.
        """
        return 1

    @contextmanager
    def read_messages(
        self, handler: dg.PipesMessageHandler
    ) -> Iterator[dg.PipesParams]:
        """Make the file, follow it in a thread for the session, and read what is left at its close."""
        with tempfile.TemporaryDirectory(prefix="raystep-pipes-") as tmp:
            path = os.path.join(tmp, "messages")
            with open(path, "x", encoding="utf-8"):
                pass
            closed = threading.Event()
            thread = threading.Thread(
                target=self._follow, args=(path, handler, closed), daemon=True
            )
            thread.start()
            try:
                yield {_FILE_PATH_KEY: path}
            finally:
                closed.set()
                thread.join()

    def _follow(
        self, path: str, handler: dg.PipesMessageHandler, closed: threading.Event
    ) -> None:
        try:
            with open(path, "rb") as f:
                pending = b""
                pause = waits()
                while True:
                    # Read before looking at closed: what was written before the close counts.
                    last = closed.is_set()
                    chunk = f.read()
                    if chunk:
                        *lines, pending = (pending + chunk).split(b"\n")
                        for line in lines:
                            if line.strip():
                                self._handle(handler, json.loads(line))
                        pause = waits()
                    elif last:
                        if pending.strip():  # a last line without its newline
                            self._handle(handler, json.loads(pending))
                        return
                    else:
                        closed.wait(next(pause))
        except Exception:  # noqa: BLE001  (Dagster shows it with the step; the thread ends)
            handler.report_pipes_framework_exception(
                "raystep message reader", sys.exc_info()
            )

    def _handle(self, handler: dg.PipesMessageHandler, message: Any) -> None:
        """Hand message to Dagster, noting the exception a "closed" message carries (failure)."""
        if isinstance(message, dict) and message.get("method") == "closed":
            params = message.get("params")
            exception = params.get("exception") if isinstance(params, dict) else None
            if isinstance(exception, dict) and exception.get("message"):
                self.failure = str(exception["message"])
        handler.handle_message(message)

    def no_messages_debug_text(self) -> str:
        """Say where the messages were expected."""
        return "Attempted to read messages from the temporary file raystep appends them to."
