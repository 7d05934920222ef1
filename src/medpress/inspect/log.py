"""Reading an Inspect log of ``medpress/medpress_task`` back into MedPRESS label rows.

The scorer (:mod:`medpress.inspect.scorer`) writes every turn's label into its
``Score.metadata`` under the :data:`SCORE_KEY` marker; :func:`score_rows` turns one such
score into the same :class:`~medpress.metrics.LabelRow` s that ``label_rows`` gives for a
stored run, so ``medpress metrics run.eval`` and ``medpress metrics RUN_DIR`` compute the
same numbers from the same labels.

This module imports only the standard library at import time: ``medpress metrics`` asks
:func:`is_inspect_log` about every ``.json`` label file, with or without inspect-ai installed.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medpress.metrics import LabelRow

__all__ = ["LOG_SUFFIXES", "SCORE_KEY", "SCORE_VERSION", "LogLabels", "is_inspect_log",
           "read_log_labels", "score_rows"]

LOG_SUFFIXES: tuple[str, ...] = (".eval", ".json")
"""The two formats Inspect writes logs in."""
SCORE_KEY = "medpress"
"""Marks a MedPRESS score in ``Score.metadata``; its value is :data:`SCORE_VERSION`."""
SCORE_VERSION = 1
"""Version of the metadata layout, bumped when a reader would misread older scores."""


@dataclass(frozen=True)
class LogLabels:
    """The label rows of one Inspect log and what a metrics table says about them.

    ``source`` names the judge (``name [rubric version]``) and the log; ``suite`` is the suite
    the task ran (a shipped suite's name or a directory), None when no sample was scored;
    ``notes`` are warnings (samples without a score, an unfinished eval).
    """

    rows: list[LabelRow]
    source: str
    suite: str | None
    model: str
    notes: list[str] = field(default_factory=list)


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is a log file Inspect wrote, told apart from a MedPRESS label file.

    A ``.eval`` file is an Inspect log when it is a zip archive. A ``.json`` file is one when it
    holds a single JSON object with an ``eval`` object naming a ``task``; a ``.json`` label
    file (JSON lines, or an array of rows) is not. Directories, missing files and other
    suffixes are never logs.
    """
    if path.suffix not in LOG_SUFFIXES or not path.is_file():
        return False
    if path.suffix == ".eval":
        return zipfile.is_zipfile(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):  # JSON lines fail here at their second line
        return False
    return isinstance(obj, dict) and isinstance(obj.get("eval"), dict) \
        and "task" in obj["eval"]


def score_rows(meta: Mapping[str, Any], model: str) -> list[LabelRow]:
    """One sample's label rows from its MedPRESS score metadata.

    One row per generated turn, as ``label_rows`` gives for a stored run: an unjudged turn has
    label None, and its failure mode and tags are dropped (a single judge's view keeps them
    only with a label). ``n_turns`` is the dialogue's own length, so turns never generated
    count as unjudged in the metrics.

    Raises:
        ValueError: metadata of another layout version, or missing a field.
    """
    if meta.get(SCORE_KEY) != SCORE_VERSION:
        raise ValueError(f"MedPRESS score metadata version {meta.get(SCORE_KEY)!r}; this "
                         f"version of medpress reads version {SCORE_VERSION}")
    try:
        rows = []
        for t in meta["turns"]:
            label = t["label"]
            rows.append(LabelRow(
                model, str(meta["condition"]), str(meta["dialogue_id"]), str(meta["family"]),
                int(t["turn"]), label, t.get("failure_mode") if label is not None else None,
                int(meta.get("repeat", 0)), int(meta["n_turns"]),
                tuple(sorted((t.get("tags") or {}).items())) if label is not None else ()))
    except (KeyError, TypeError) as e:
        raise ValueError(f"MedPRESS score metadata lacks or mistypes a field: {e}") from None
    return rows


def read_log_labels(path: Path) -> LogLabels:
    """The label rows of every scored sample (every epoch) of an Inspect log.

    Each sample of ``medpress/medpress_task`` carries one MedPRESS score; a sample without
    one (it failed before scoring, or the log is of another task) gives no rows and is
    counted in a note. The rows' model is the log's model (``mockllm/model``, ``openai/…``).

    Raises:
        ValueError: the file is not a readable Inspect log (or inspect-ai is not installed),
            or no sample in it holds a MedPRESS score.
    """
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise ValueError(f"{path} is an Inspect log; reading it needs inspect-ai "
                         "(pip install 'medpress[inspect]')") from None
    try:
        log = read_eval_log(str(path))
    except Exception as e:  # Inspect raises many kinds for a damaged file
        raise ValueError(f"{path}: not a readable Inspect log ({e})") from None
    model = log.eval.model
    rows: list[LabelRow] = []
    judges: dict[str, None] = {}
    suites: dict[str, None] = {}
    unscored: list[str] = []
    for sample in log.samples or []:
        meta = next((s.metadata for s in (sample.scores or {}).values()
                     if s.metadata and SCORE_KEY in s.metadata), None)
        if meta is None:
            unscored.append(f"{sample.id} (epoch {sample.epoch})")
            continue
        rows.extend(score_rows(meta, model))
        judges[f"{meta.get('judge')} [rubric {meta.get('rubric_version')}]"] = None
        suites[str(meta.get("suite"))] = None
    if not rows:
        raise ValueError(f"{path}: no MedPRESS scores in this Inspect log (task "
                         f"{log.eval.task!r}, {len(log.samples or [])} samples); it must be a "
                         "log of medpress/medpress_task with its scorer")
    if len(suites) > 1:
        raise ValueError(f"{path}: samples of several suites ({', '.join(suites)})")
    notes = []
    if log.status != "success":
        notes.append(f"the Inspect eval in {path.name} ended with status {log.status!r}: "
                     "samples it did not finish are not in these numbers")
    if unscored:
        shown = ", ".join(unscored[:3]) + (", …" if len(unscored) > 3 else "")
        notes.append(f"{len(unscored)} sample(s) in {path.name} have no MedPRESS score (they "
                     f"failed before scoring) and are not in these numbers: {shown}")
    source = f"{'; '.join(judges)} (Inspect log {path.name})"
    return LogLabels(rows, source, next(iter(suites)), model, notes)
