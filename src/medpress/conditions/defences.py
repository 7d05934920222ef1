"""Conditions defined in YAML files: the shipped defences and a user's own (``--conditions-file``).

A file holds ``version`` and ``conditions``; each condition has ``system`` (a paragraph or a
list of them) and an optional ``base``, a condition defined before it (shipped, in an earlier
file, or earlier in this one) whose text comes first: ``persona_rbed`` is ``persona`` then the
RBED text. A paragraph ``"@name"`` stands for the paragraphs that condition ``name`` of the
same file added to its base, so a defence is written once and put on several bases. A
defence's effect is reported against its base, paired by dialogue. Each condition keeps its own
file's version and text hash, so adding a file never changes the shipped ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from medpress.conditions.conditions import Condition, ConditionSet, load_conditions

DEFENCES_FILE: Path = Path(__file__).parent / "data" / "defences.yaml"
_NAME = r"^[a-z0-9][a-z0-9_-]*$"


class ConditionsFileError(ValueError):
    """A conditions file that cannot be used; the message names file, line and field."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: list[str] = Field(min_length=1)
    base: str | None = None

    @field_validator("system", mode="before")
    @classmethod
    def _paragraphs(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("system")
    @classmethod
    def _not_blank(cls, v: list[str]) -> list[str]:
        if any(not p.strip() for p in v):
            raise ValueError("a paragraph is empty")
        return v


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = Field(min_length=1)
    conditions: dict[str, _Spec] = Field(min_length=1)

    @field_validator("version", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) else v


@dataclass(frozen=True)
class Defended:
    """A condition from a file, and the condition its effect is measured against (or None)."""

    condition: Condition
    base: str | None
    source: str


def _line(node: Any, *keys: str) -> int:
    """The 1-based line of ``keys`` under the mapping ``node`` (the deepest found)."""
    import yaml

    line = node.start_mark.line + 1 if node is not None else 1
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            break
        found = next(((k, v) for k, v in node.value if k.value == key), None)
        if found is None:
            break
        node, line = found[1], found[0].start_mark.line + 1  # the key's line
    return line


def read_conditions_file(path: Path, known: dict[str, Condition]) -> list[Defended]:
    """The conditions of one file, each resolved against ``known`` and those before it.

    Raises:
        ConditionsFileError: a missing file, invalid YAML, a field that fails validation, a
            name that is already defined, or a ``base`` that is not; as ``path:line: field:
            message``, every problem of the file at once.
    """
    from medpress.dataset.loader import YamlSyntaxError, parse_yaml

    if not path.is_file():
        raise ConditionsFileError(f"{path}: no such conditions file")
    try:
        node, raw = parse_yaml(path.read_text(encoding="utf-8"))
    except YamlSyntaxError as e:
        raise ConditionsFileError(f"{path}:{e.line or 1}: {e}") from None
    try:
        spec = _File.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = [str(x) for x in err["loc"]]
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"{path}:{_line(node, *loc)}: {'.'.join(loc) or 'file'}: {msg}")
        raise ConditionsFileError("\n".join(lines)) from None
    import re

    out: list[Defended] = []
    problems = []
    seen = dict(known)
    own: dict[str, list[str]] = {}  # the paragraphs each condition of this file added
    for name, c in spec.conditions.items():
        where = f"{path}:{_line(node, 'conditions', name)}: conditions.{name}"
        refs = [p[1:] for p in c.system if p.startswith("@")]
        if bad := [r for r in refs if r not in own]:
            problems.append(f"{path}:{_line(node, 'conditions', name, 'system')}: conditions."
                            f"{name}.system: '@{bad[0]}' names no earlier condition of this "
                            "file")
            continue
        paragraphs = [q for p in c.system for q in (own[p[1:]] if p.startswith("@") else [p])]
        if not re.match(_NAME, name):
            problems.append(f"{where}: a name is lower case letters, digits, - and _")
        elif name in seen:
            problems.append(f"{where}: {name!r} is already defined (a shipped condition or an "
                            "earlier one); choose another name")
        elif c.base is not None and c.base not in seen:
            problems.append(f"{path}:{_line(node, 'conditions', name, 'base')}: conditions."
                            f"{name}.base: unknown condition {c.base!r}; known: "
                            f"{', '.join(seen)}")
        else:
            text = "\n\n".join([*([seen[c.base].system] if c.base else []), *paragraphs])
            cond = Condition(name, text, spec.version)
            seen[name], own[name] = cond, paragraphs
            out.append(Defended(cond, c.base, str(path)))
    if problems:
        raise ConditionsFileError("\n".join(problems))
    return out


@cache
def shipped_defences() -> tuple[Defended, ...]:
    """The defences that ship with the package (``data/defences.yaml``)."""
    return tuple(read_conditions_file(DEFENCES_FILE, dict(load_conditions().conditions)))


def condition_set(files: Sequence[Path] = ()) -> tuple[ConditionSet, dict[str, str]]:
    """The shipped conditions, the shipped defences and those of ``files`` (in order), and
    each defended condition's base (name -> base name).

    Raises:
        ConditionsFileError: see :func:`read_conditions_file`.
    """
    shipped = load_conditions()
    conds = dict(shipped.conditions)
    bases: dict[str, str] = {}
    defended = list(shipped_defences())
    for d in defended:
        conds[d.condition.name] = d.condition
    for path in files:
        for d in read_conditions_file(Path(path), conds):
            conds[d.condition.name] = d.condition
            defended.append(d)
    for d in defended:
        if d.base is not None:
            bases[d.condition.name] = d.base
    return replace(shipped, conditions=conds), bases
