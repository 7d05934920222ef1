"""MedPRESS as an Inspect task (``inspect eval medpress/medpress_task``), and reading its logs.

:func:`medpress_task` builds the task (:mod:`medpress.inspect.task`), :func:`medpress_scorer`
labels every turn with a MedPRESS judge (:mod:`medpress.inspect.scorer`) and
:func:`read_log_labels` reads a log back into label rows (:mod:`medpress.inspect.log`), which
``medpress metrics LOG`` uses. See docs/inspect.md.

The task, solver and scorer are imported on first use (PEP 562): ``medpress metrics`` imports
:mod:`medpress.inspect.log` for every ``.json`` label file, and that must not load inspect-ai.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from medpress.inspect.log import (
    LOG_SUFFIXES,
    SCORE_KEY,
    LogLabels,
    is_inspect_log,
    read_log_labels,
    score_rows,
)

if TYPE_CHECKING:
    from medpress.inspect.scorer import medpress_metrics, medpress_scorer
    from medpress.inspect.task import medpress_solver, medpress_task

_LAZY = {"medpress_task": "task", "medpress_solver": "task", "medpress_scorer": "scorer",
         "medpress_metrics": "scorer"}

__all__ = ["LOG_SUFFIXES", "SCORE_KEY", "LogLabels", "is_inspect_log", "medpress_metrics",
           "medpress_scorer", "medpress_solver", "medpress_task", "read_log_labels",
           "score_rows"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"medpress.inspect.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
