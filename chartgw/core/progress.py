"""Progress people can see, for the commands that run for minutes (demo seeding, backfills, imports, index builds).

A command opens a `Progress` and runs each step inside `step()`. The code doing the work does not know who is
watching: the crawl runner and the index announce what a step has to do (`expect`) and what it did (`advance`)
to the step in progress in their context, and do nothing when there is none (a server, a test, cron's crawl).

On a terminal each step is a bar drawn by rich (done of total, the rate, the time so far); off a terminal (cron
mail, a log file, systemd's journal) each step is one line when it ends: how many, how many failed, how long,
at what rate. The times are measured (a monotonic clock), never taken from the work's own clock (a crawl may
run "as if" at another time).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "Step", "advance", "expect"]


class Step:
    """One step of a command: what it has to do (None until announced) and what it did."""

    def __init__(self, name: str, unit: str | None, total: int | None, clock: Callable[[], float],
                 show: Callable[[Step], None]) -> None:
        self.name, self.total = name, total
        self.unit = unit or "done"
        self._unit_named = unit is not None
        self.done = self.failed = 0
        self.started = clock()
        self._clock, self._show = clock, show

    def expect(self, count: int, unit: str) -> None:
        """`count` more `unit` to do (a crawl's targets, an index's snapshots). The first unit announced names the
        step's count, unless its owner named one."""
        self.total = (self.total or 0) + count
        if not self._unit_named:
            self.unit, self._unit_named = unit, True
        self._show(self)

    def advance(self, count: int = 1, *, failed: bool = False) -> None:
        self.done += count
        self.failed += count if failed else 0
        self._show(self)

    def seconds(self) -> float:
        return self._clock() - self.started

    def summary(self, stopped: bool = False) -> str:
        """The step as one line: `korea-chart: 19 crawls, 1 failed, in 1.8 s (10.6/s)`."""
        seconds = self.seconds()
        counted = f"{self.done} of {self.total}" if self.total is not None and self.total != self.done else f"{self.done}"
        failed = f", {self.failed} failed" if self.failed else ""
        rate = f" ({self.done / seconds:.1f}/s)" if self.done and seconds > 0 else ""
        return f"{self.name}: {'stopped after ' if stopped else ''}{counted} {self.unit}{failed} in {seconds:.1f} s{rate}"


_STEP: ContextVar[Step | None] = ContextVar("chartgw_progress_step", default=None)


def expect(count: int, unit: str) -> None:
    """Announce `count` more `unit` to do to the step in progress in this context, if any."""
    step = _STEP.get()
    if step is not None:
        step.expect(count, unit)


def advance(count: int = 1, *, failed: bool = False) -> None:
    """Count `count` done (`failed` ones too) in the step in progress in this context, if any."""
    step = _STEP.get()
    if step is not None:
        step.advance(count, failed=failed)


class Progress:
    """The steps of one command (`label`), shown on `stream` (stderr): bars on a terminal, lines off one."""

    def __init__(self, label: str, stream: TextIO | None = None, *, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.clock = clock
        self._bars: Any = None
        self._tasks: dict[int, Any] = {}

    def __enter__(self) -> Progress:
        if self.terminal:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bars

            self._bars = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TextColumn("{task.fields[unit]}"), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                              console=Console(file=self.stream), redirect_stdout=False, redirect_stderr=False)
            self._bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None,
                 ) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    @contextmanager
    def step(self, name: str, unit: str | None = None, total: int | None = None) -> Iterator[Step]:
        """A step: the crawl runner and the index report into it while it runs (see `expect`, `advance`)."""
        step = Step(name, unit, total, self.clock, self._show)
        if self._bars is not None:
            self._tasks[id(step)] = self._bars.add_task(f"{self.label} {name}", total=total, unit=step.unit, rate="")
        token = _STEP.set(step)
        stopped = True
        try:
            yield step
            stopped = False
        finally:
            _STEP.reset(token)
            self._end(step, stopped)

    def _show(self, step: Step) -> None:
        if self._bars is None:
            return
        seconds = step.seconds()
        rate = f"{step.done / seconds:.1f}/s" if step.done and seconds > 0 else ""
        failed = f", {step.failed} failed" if step.failed else ""
        self._bars.update(self._tasks[id(step)], total=step.total, completed=step.done, unit=step.unit + failed,
                          rate=rate)

    def _end(self, step: Step, stopped: bool) -> None:
        if self._bars is None:
            print(f"{self.label} {step.summary(stopped)}", file=self.stream, flush=True)
            return
        if not stopped and (step.total is None or step.total < step.done):
            step.total = step.done  # a step nobody announced ends full
        self._show(step)
        if stopped:
            self._bars.update(self._tasks[id(step)], description=f"{self.label} {step.name} (stopped)")
        del self._tasks[id(step)]
