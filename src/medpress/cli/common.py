"""Shared CLI plumbing: one console, clean errors instead of stack traces, run-dir naming."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from medpress.dataset import DatasetError
from medpress.store import StoreError

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # whole lines: greppable
P = ParamSpec("P")
R = TypeVar("R")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def at_least(option: str, value: float, minimum: float) -> None:
    """Refuse ``value`` below ``minimum`` for ``option``, before any work is done.

    Why: ``--concurrency 0`` would wait forever for a request slot, ``--max-tokens 0`` asks
    for nothing; catching them here costs nothing, finding them later costs a run.

    Raises:
        ValueError: ``--concurrency must be at least 1, not 0``.
    """
    if value < minimum:
        shown = int(minimum) if float(minimum).is_integer() else minimum
        raise ValueError(f"{option} must be at least {shown}, not {value}")


def interrupted(n: int, what: str = "turns", again: str = "the same command") -> typer.Exit:
    """The message and exit status (130, as for SIGINT) of a run stopped with Ctrl-C.

    Everything finished was committed as it came, so ``again`` (the same command, with
    ``--run-dir`` where the directory was a default) resumes; ``n`` is how many ``what`` the
    store now holds.
    """
    err_console.print(escape(f"interrupted; {n} {what} stored; run {again} to resume"),
                      highlight=False)
    return typer.Exit(130)


def clean_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn expected user errors into a one-line message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DatasetError as e:
            for p in e.problems:
                err_console.print(f"[red]✗[/] {escape(str(p))}", highlight=False)
            raise fail(f"{len(e.problems)} problem(s) in the dataset") from None
        except (StoreError, ValueError, FileNotFoundError) as e:
            raise fail(str(e)) from None

    return wrapper


def safe_name(spec: str) -> str:
    """A directory name from a model spec that cannot escape its parent (no '/', no '..')."""
    name = _UNSAFE_CHARS.sub("_", spec).strip("._-")
    name = re.sub(r"\.{2,}", "_", name)
    return name or "model"


def short_spec(spec: str) -> str:
    """A model spec for display: ``llamacpp/`` models by their file name, not the full path."""
    kind, sep, rest = spec.partition("/")
    return f"{kind}/{Path(rest).name}" if kind == "llamacpp" and sep and rest else spec


def default_run_dir(spec: str, root: Path = Path("runs")) -> Path:
    """``runs/<spec>-<time>``, the spec made safe (`safe_name`) and shortened (`short_spec`)."""
    return root / f"{safe_name(short_spec(spec))}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def split_list(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []
