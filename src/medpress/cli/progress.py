"""Rich progress for generation and judging: one bar per condition, with tokens/s."""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from medpress.backends import ChatResult
from medpress.cli.common import console


class TurnProgress:
    """Context manager; ``hook`` is passed to the runner as ``on_result``."""

    def __init__(self, totals: Mapping[str, int], done: Mapping[str, int], verb: str = "") -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("turns"), TextColumn("[cyan]{task.fields[tps]:>7.1f} tok/s"),
            TextColumn("[red]{task.fields[err]} err"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.tasks: dict[str, TaskID] = {
            name: self.progress.add_task(f"{verb}{name}", total=total,
                                         completed=done.get(name, 0), tps=0.0, err=0)
            for name, total in totals.items()
        }
        self._tokens = 0
        self._errors: dict[str, int] = dict.fromkeys(totals, 0)
        self._start = time.perf_counter()

    def hook(self, name: str, res: ChatResult) -> None:
        self._tokens += res.completion_tokens or 0
        if not res.ok:
            self._errors[name] += 1
        tps = self._tokens / max(1e-9, time.perf_counter() - self._start)
        self.progress.update(self.tasks[name], advance=1, tps=tps, err=self._errors[name])

    def __enter__(self) -> TurnProgress:
        self.progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()
