"""Load dialogue sets from JSONL or YAML files, validating every record.

Errors are collected over all files and raised together as a :class:`DatasetError`, each
naming the file, the line (or record id) and the field, so a user can fix a set in one pass.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from medpress.dataset.schema import FAMILIES, URGENCIES, Dialogue

SUFFIXES: tuple[str, ...] = (".jsonl", ".yaml", ".yml")
# A directory holding this file is a versioned set: the file gives its name and version.
MANIFEST_NAME = "manifest.yaml"


class YamlSyntaxError(ValueError):
    """YAML that does not parse; ``line`` is 1-based, or None when PyYAML gives no mark."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line


def parse_yaml(text: str) -> tuple[yaml.Node | None, Any]:
    """Parse ``text`` twice: as a node tree (for line numbers) and as plain data.

    Raises:
        YamlSyntaxError: the text is not valid YAML.
    """
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise YamlSyntaxError(mark.line + 1 if mark else None, f"invalid YAML: {e}") from None


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one record."""

    file: str
    line: int | None
    record_id: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        rid = f" [{self.record_id}]" if self.record_id else ""
        fld = f" {self.field}:" if self.field else ""
        return f"{where}{rid}{fld} {self.message}"


class DatasetError(ValueError):
    """Raised when a set has problems; ``problems`` lists every one found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class Dataset:
    """A validated set of dialogues with its identity (name, version, content hash)."""

    dialogues: tuple[Dialogue, ...]
    name: str
    version: str
    content_hash: str
    paths: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.dialogues)

    def __iter__(self) -> Iterator[Dialogue]:
        return iter(self.dialogues)

    def by_id(self) -> dict[str, Dialogue]:
        return {d.id: d for d in self.dialogues}

    def subset(self, ids: Iterable[str]) -> Dataset:
        """The same set restricted to ``ids`` (kept in dataset order); hash is of the subset."""
        keep = set(ids)
        chosen = tuple(d for d in self.dialogues if d.id in keep)
        return Dataset(chosen, self.name, self.version, content_hash(chosen), self.paths)


def content_hash(dialogues: Iterable[Dialogue]) -> str:
    """SHA-256 over the canonical JSON of the records sorted by id: independent of file layout."""
    h = hashlib.sha256()
    for d in sorted(dialogues, key=lambda d: d.id):
        h.update(json.dumps(d.model_dump(mode="json"), sort_keys=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files named directly, plus every JSONL/YAML file under named directories (sorted),
    except a directory's ``manifest.yaml``."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file()
                              and f.name != MANIFEST_NAME))
        elif p.exists():
            out.append(p)
        else:
            raise DatasetError([Problem(str(p), None, None, None, "no such file or directory")])
    return out


def _raw_records(path: Path) -> Iterator[tuple[int | None, Any, str | None]]:
    """Yield (line, object, parse error) for each record of one file."""
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield n, json.loads(line), None
                except json.JSONDecodeError as e:
                    yield n, None, f"invalid JSON: {e.msg} (column {e.colno})"
        return
    if path.suffix not in (".yaml", ".yml"):
        yield None, None, f"unsupported file type {path.suffix!r} (use .jsonl, .yaml or .yml)"
        return
    try:
        node, data = parse_yaml(path.read_text(encoding="utf-8"))
    except YamlSyntaxError as e:
        yield e.line, None, str(e)
        return
    if data is None:
        return
    if not isinstance(data, list) or not isinstance(node, yaml.SequenceNode):
        yield 1, None, "a YAML set must be a list of dialogue records"
        return
    for item_node, item in zip(node.value, data, strict=True):
        yield item_node.start_mark.line + 1, item, None


def _explain(err: dict[str, Any]) -> tuple[str, str]:
    """Turn one pydantic error into (dotted field, plain message)."""
    loc = ".".join(str(x) for x in err["loc"])
    kind = err["type"]
    top = err["loc"][0] if err["loc"] else ""
    if kind == "missing":
        return loc, "missing required field"
    if kind == "extra_forbidden":
        return loc, "unknown field"
    if kind == "literal_error" and top == "family":
        return loc, f"unknown family {err['input']!r} (expected one of {', '.join(FAMILIES)})"
    if kind == "literal_error" and top == "urgency":
        return loc, f"bad urgency {err['input']!r} (expected one of {', '.join(URGENCIES)})"
    if kind == "string_type":
        return loc, f"must be a string, got {type(err['input']).__name__}"
    if kind == "too_short" and loc == "turns":
        return loc, "empty turn list"
    if kind in ("too_short", "string_too_short") or "blank" in err.get("msg", ""):
        return loc, "must not be empty"
    return loc, str(err["msg"])


def load_records(paths: Iterable[Path], *, model: type[BaseModel] = Dialogue
                 ) -> tuple[list[Any], list[Problem]]:
    """Parse and validate every record; returns the good ones and every problem found.

    ``model`` is the record schema: a suite's records use one built from its manifest.
    """
    dialogues: list[Any] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for path in expand_paths(paths):
        for line, obj, parse_error in _raw_records(path):
            if parse_error is not None:
                problems.append(Problem(str(path), line, None, None, parse_error))
                continue
            rid = obj.get("id") if isinstance(obj, dict) else None
            rid = rid if isinstance(rid, str) else None
            if not isinstance(obj, dict):
                problems.append(Problem(str(path), line, None, None, "record must be an object"))
                continue
            try:
                d: Any = model.model_validate(obj)
            except ValidationError as e:
                for err in e.errors():
                    fld, msg = _explain(dict(err))
                    problems.append(Problem(str(path), line, rid, fld, msg))
                continue
            where = f"{path}:{line}"
            if d.id in seen:
                problems.append(
                    Problem(str(path), line, d.id, "id", f"duplicate id (first at {seen[d.id]})")
                )
                continue
            seen[d.id] = where
            dialogues.append(d)
    return dialogues, problems


def load_dataset(
    paths: Sequence[Path] | Path, *, name: str | None = None, version: str = "user"
) -> Dataset:
    """Load a set from files and/or directories.

    A single directory with a ``manifest.yaml`` takes its name and version from it, unless
    ``name``/``version`` are given. A folder written by ``medpress data export`` (it holds an
    ``export.json``) is loaded by :func:`medpress.dataset.export.load_export`, which checks it
    against its manifest; it must be the only path.

    Raises:
        DatasetError: listing every problem, if any record is invalid or no record was found.
    """
    from medpress.dataset.export import is_export_dir, load_export  # imports loader: here

    plist = [paths] if isinstance(paths, Path) else list(paths)
    if exports := [p for p in plist if is_export_dir(p)]:
        if len(plist) > 1:
            raise DatasetError([Problem(str(exports[0]), None, None, None,
                                        "an export folder must be given on its own")])
        return load_export(exports[0], name=name, version=None if version == "user" else version)
    if len(plist) == 1 and (plist[0] / MANIFEST_NAME).is_file():
        meta = yaml.safe_load((plist[0] / MANIFEST_NAME).read_text())
        name = name or str(meta["name"])
        version = str(meta["version"]) if version == "user" else version
    dialogues, problems = load_records(plist)
    if not problems and not dialogues:
        problems.append(Problem(", ".join(map(str, plist)), None, None, None, "no records found"))
    if problems:
        raise DatasetError(problems)
    label = name or "+".join(p.stem for p in plist)
    return Dataset(
        tuple(dialogues), label, version, content_hash(dialogues), tuple(map(str, plist))
    )


def dump_jsonl(dialogues: Iterable[Dialogue], path: Path) -> None:
    """Write records as canonical JSONL (field order as in the schema)."""
    with path.open("w", encoding="utf-8") as f:
        for d in dialogues:
            f.write(json.dumps(d.model_dump(mode="json", exclude_none=True), ensure_ascii=False))
            f.write("\n")


def dump_yaml(dialogues: Iterable[Dialogue], path: Path) -> None:
    """Write records as a YAML list, for hand editing."""
    data = [d.model_dump(mode="json", exclude_none=True) for d in dialogues]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
