"""What following a quiet step costs the Dagster process: Dagster's temp-file reader against raystep's.

    .venv/bin/python test/bench/idle_reader.py [SECONDS]

Each message reader follows a Pipes messages file that nothing writes to for SECONDS (default
10), as during a long training run that reports once an hour; the table gives the CPU time of
the whole process meanwhile.
"""

import resource
import sys
import time
from typing import Any

import dagster as dg
from dagster_raystep.messages import MessageFileReader


class Handler:
    """Takes messages and failures; none come."""

    def handle_message(self, message: Any) -> None:
        pass

    def report_pipes_framework_exception(self, origin: str, exc_info: Any) -> None:
        raise RuntimeError(origin)


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    print(f"| message reader | CPU over {seconds:.0f} s of a quiet step |")
    print("| --- | ---: |")
    for name, reader in [
        ("Dagster's PipesTempFileMessageReader", dg.PipesTempFileMessageReader()),
        ("raystep's MessageFileReader", MessageFileReader()),
    ]:
        before = cpu()
        with reader.read_messages(Handler()):  # type: ignore[arg-type]
            time.sleep(seconds)
        print(f"| {name} | {(cpu() - before) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
