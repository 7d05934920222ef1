"""The hard judge-validation set shipped with the dialogues (SPEC section 4).

Rows live in ``data/judge_validation/*.jsonl`` in the labels-file format ``judge-check
--labels`` reads (``id``, ``dialogue_id``, ``turn``, ``reply``, ``label``), plus ``kind`` (see
``kinds.yaml`` beside them), ``failure_mode`` and, for a row moved out of the references
because it was mislabelled there, ``origin: reference``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from medpress.dataset.loader import DatasetError, Problem

JUDGE_VALIDATION_DIR: Path = Path(__file__).parent / "data" / "judge_validation"
KINDS_FILE: Path = JUDGE_VALIDATION_DIR / "kinds.yaml"
Required = Literal["all", "urgent", "optional"]


@dataclass(frozen=True)
class HardKind:
    """One kind of hard case: its fixed label, word band and which cards must have one."""

    name: str
    label: str
    words: tuple[int, int]
    required: Required
    about: str


@dataclass(frozen=True)
class Placement:
    """Per dialogue: at least ``min_mid`` rows at turns ``mid`` and ``min_last`` at the last."""

    mid: tuple[int, int]
    min_mid: int
    min_last: int


@cache
def load_kinds(path: Path = KINDS_FILE) -> tuple[dict[str, HardKind], Placement]:
    raw = yaml.safe_load(path.read_text())
    kinds = {k: HardKind(k, str(v["label"]), (int(v["words"][0]), int(v["words"][1])),
                         v["required"], " ".join(str(v["about"]).split()))
             for k, v in raw["kinds"].items()}
    p = raw["placement"]
    return kinds, Placement((int(p["mid"][0]), int(p["mid"][1])), int(p["min_mid"]),
                            int(p["min_last"]))


class HardRow(BaseModel):
    """One labelled reply of the hard set; ``file``/``line`` say where it was read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: StrictStr = Field(min_length=1)
    dialogue_id: StrictStr = Field(min_length=1)
    turn: StrictInt = Field(ge=1)
    kind: StrictStr = Field(min_length=1)
    label: Literal["SAFE", "UNSAFE", "AMBIGUOUS"]
    failure_mode: StrictStr | None = None
    reply: StrictStr = Field(min_length=1)
    origin: Literal["reference"] | None = None
    file: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def words(self) -> int:
        return len(self.reply.split())


@dataclass(frozen=True)
class HardSet:
    rows: tuple[HardRow, ...]
    content_hash: str
    paths: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)


def load_hard_set(paths: Sequence[Path] | None = None) -> HardSet:
    """Read hard-set rows from files or directories (default: the shipped set's).

    Raises:
        DatasetError: listing every problem, each with file, line and field: bad JSON, a
            missing or unknown field, a wrong type, a duplicate id.
    """
    files = _files(paths or [JUDGE_VALIDATION_DIR])
    rows: list[HardRow] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    h = hashlib.sha256()
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            h.update(line.encode() + b"\n")
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(Problem(str(path), n, None, None, f"invalid JSON: {e.msg}"))
                continue
            if not isinstance(obj, dict):
                problems.append(Problem(str(path), n, None, None, "row must be an object"))
                continue
            rid = obj.get("id") if isinstance(obj.get("id"), str) else None
            try:
                row = HardRow.model_validate({**obj, "file": str(path), "line": n})
            except ValidationError as e:
                for err in e.errors():
                    fld = ".".join(str(x) for x in err["loc"])
                    msg = ("missing required field" if err["type"] == "missing" else
                           "unknown field" if err["type"] == "extra_forbidden" else err["msg"])
                    problems.append(Problem(str(path), n, rid, fld, msg))
                continue
            if row.id in seen:
                problems.append(Problem(str(path), n, row.id, "id",
                                        f"duplicate id (first at {seen[row.id]})"))
                continue
            seen[row.id] = row.where
            rows.append(row)
    if problems:
        raise DatasetError(problems)
    return HardSet(tuple(rows), h.hexdigest(), tuple(map(str, files)))


@cache
def load_shipped_hard_set() -> HardSet:
    return load_hard_set()


def _files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(p.glob("*.jsonl")))
        elif p.is_file():
            out.append(p)
        else:
            raise DatasetError([Problem(str(p), None, None, None, "no such file or directory")])
    return out
