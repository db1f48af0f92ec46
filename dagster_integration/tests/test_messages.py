"""The resource's message reader: every message once, in order, whole, the last one too."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

from dagster_raystep.messages import FIRST_WAIT, LONGEST_WAIT, MessageFileReader, waits


class Handler:
    """Records what the reader hands it, as a PipesMessageHandler would receive it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.got = threading.Condition()
        self.failures: list[str] = []

    def handle_message(self, message: dict[str, Any]) -> None:
        with self.got:
            self.messages.append(message)
            self.got.notify_all()

    def report_pipes_framework_exception(self, origin: str, exc_info: Any) -> None:
        self.failures.append(f"{origin}: {exc_info[1]}")

    def wait_for(self, n: int) -> None:
        with self.got:
            assert self.got.wait_for(lambda: len(self.messages) >= n, timeout=60), (
                self.messages
            )


def message(i: int) -> dict[str, Any]:
    return {
        "__dagster_pipes_version": "0.1",
        "method": "log",
        "params": {"message": f"m{i}", "level": "INFO"},
    }


def test_every_message_once_in_order_whole() -> None:
    """Lines written in pieces are handled whole; a line is never split or handled twice."""
    handler = Handler()
    reader = MessageFileReader()
    lines = [json.dumps(message(i)).encode() + b"\n" for i in range(50)]
    with reader.read_messages(handler) as params:  # type: ignore[arg-type]
        path = Path(params["path"])
        with path.open("ab", buffering=0) as f:
            for i, line in enumerate(lines[:25]):
                cut = len(line) // 2
                f.write(line[:cut])
                if (
                    i % 5 == 0
                ):  # the reader sees half a line, and must wait for the rest
                    handler.wait_for(i)
                f.write(line[cut:])
            handler.wait_for(25)  # read while the session is open
            f.write(b"".join(lines[25:]))
            f.write(
                json.dumps(message(50)).encode()
            )  # the last line, without its newline
    assert handler.messages == [message(i) for i in range(51)]
    assert handler.failures == []


def test_a_broken_message_is_reported() -> None:
    """A line that is no JSON is told to Dagster as a framework error, not lost silently."""
    handler = Handler()
    with MessageFileReader().read_messages(handler) as params:  # type: ignore[arg-type]
        Path(params["path"]).write_text("not json\n")
    assert len(handler.failures) == 1
    assert handler.failures[0].startswith("raystep message reader: Expecting value")


def test_waits_double_up_to_the_longest() -> None:
    it = waits()
    got = [next(it) for _ in range(12)]
    assert got[0] == FIRST_WAIT
    assert all(b == min(a * 2, LONGEST_WAIT) for a, b in itertools.pairwise(got))
    assert got[-1] == LONGEST_WAIT


def test_the_failure_a_closed_message_carries_is_kept() -> None:
    """failure is the exception message of raystep's "closed" message, None without one."""
    handler = Handler()
    reader = MessageFileReader()
    closed = {
        "__dagster_pipes_version": "0.1",
        "method": "closed",
        "params": {"exception": {"message": "provision: quota", "name": "InfraError"}},
    }
    with reader.read_messages(handler) as params:  # type: ignore[arg-type]
        Path(params["path"]).write_text(json.dumps(closed) + "\n")
    assert reader.failure == "provision: quota"
    assert handler.messages == [closed]

    quiet = MessageFileReader()
    with quiet.read_messages(Handler()) as params:  # type: ignore[arg-type]
        Path(params["path"]).write_text(
            json.dumps({**closed, "params": {}}) + "\n" + json.dumps(message(1)) + "\n"
        )
    assert quiet.failure is None
