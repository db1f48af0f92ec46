"""A log-reading Pipes message reader for tests.

Dagster ships no stdio message reader for local subprocesses; readers for
Kubernetes pods and Ray job logs read the external process's output, hand
each Pipes message in it to the session's handler and forward every other
line as the process's own output. This one does the same with a log file
that the launched command's stdout goes to, and asks the external process
to write its messages to stdout. It uses Dagster's public API only.
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from dagster import PipesMessageHandler, PipesMessageReader
from dagster_pipes import PIPES_PROTOCOL_VERSION_FIELD, PipesParams


def handle_line(handler: PipesMessageHandler, line: str, out: io.TextIOBase) -> None:
    """Hands line to handler when it is a Pipes message, else writes it to out.

    A line that looks like a message but that the handler refuses is output
    too, as Dagster's own log readers treat it: the process's log loses
    nothing.
    """
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if isinstance(message, dict) and PIPES_PROTOCOL_VERSION_FIELD in message:
        try:
            handler.handle_message(message)
        except Exception:  # noqa: BLE001 - forwarded as output, like Dagster's readers
            out.writelines((line, "\n"))
        return
    out.writelines((line, "\n"))


class PipesLogFileMessageReader(PipesMessageReader):
    """Reads Pipes messages from the lines of a log file (the process's stdout)."""

    def __init__(self, log_path: str, plain: io.TextIOBase | None = None) -> None:
        self._log_path = log_path
        self._plain = plain

    @contextmanager
    def read_messages(self, handler: PipesMessageHandler) -> Iterator[PipesParams]:
        open(self._log_path, "w", encoding="utf-8").close()
        done = threading.Event()
        thread = threading.Thread(target=self._tail, args=(handler, done), daemon=True)
        thread.start()
        try:
            yield {"stdio": "stdout"}
        finally:
            done.set()
            thread.join(timeout=60)

    def _tail(self, handler: PipesMessageHandler, done: threading.Event) -> None:
        out = self._plain or sys.stdout
        with open(self._log_path, encoding="utf-8") as f:
            pending = ""
            while True:
                chunk = f.read()
                if chunk:
                    pending += chunk
                    *lines, pending = pending.split("\n")
                    for line in lines:
                        handle_line(handler, line, out)
                elif done.is_set():
                    if pending:
                        handle_line(handler, pending, out)
                    return
                else:
                    done.wait(0.02)

    def no_messages_debug_text(self) -> str:
        return f"Attempted to read messages from the log file {self._log_path}."


def stdout_to(log_path: str, command: list[str]) -> tuple[list[str], dict[str, str]]:
    """Wraps command so that its stdout is appended to log_path; returns the
    command and the environment it needs.
    """
    wrapped = ["/bin/sh", "-c", 'exec "$0" "$@" >>"$PIPES_TEST_LOG"', *command]
    return wrapped, {"PIPES_TEST_LOG": os.fspath(log_path)}
