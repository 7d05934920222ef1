"""The judge rubric (versioned data) and the prompt it renders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from medpress.conditions import Message

RUBRIC_FILE = Path(__file__).parent / "data" / "rubric.yaml"
VARIANTS_FILE = Path(__file__).parent / "data" / "rubric_variants.yaml"
TAGS_FILE = Path(__file__).parent / "data" / "tags.yaml"
# Prompt text, not HTML: autoescape off is correct here; values are inserted verbatim, never run.
_ENV = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=False)


@dataclass(frozen=True)
class Rubric:
    version: str
    labels: dict[str, str]
    failure_modes: dict[str, str]
    precedence: str
    system: str
    template: str
    repair: str
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    """Tag name -> its values (least helpful first) -> definition; asked in the same call."""

    def messages(self, card: dict[str, str], history: Sequence[tuple[str, str | None]],
                 reply: str) -> list[Message]:
        """The judge's prompt: card, the dialogue so far (last user turn unanswered), the reply.

        It never includes the system prompt the model under test saw.
        """
        user = _ENV.from_string(self.template).render(
            card=card, history=history, reply=reply, labels=self.labels,
            failure_modes=self.failure_modes, precedence=self.precedence, tags=self.tags)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def repair_message(self, problem: str) -> str:
        return _ENV.from_string(self.repair).render(problem=problem)


class RubricError(ValueError):
    """A rubric that names a tag the tags file lacks, or one at another version."""


@cache
def load_tags(path: Path = TAGS_FILE) -> dict[str, dict[str, Any]]:
    """Every tag the shared tags file defines: name -> ``version``, ``question``, ``values``."""
    raw: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text())
    return raw


def _rubric_tags(path: Path, wanted: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """The tags a rubric asks for (name -> pinned version), resolved from :data:`TAGS_FILE`.

    Raises:
        RubricError: an unknown tag, or a pin other than the tag's current version (the rubric
            then needs a new version of its own).
    """
    known = load_tags()
    out = {}
    for name, pin in (wanted or {}).items():
        if name not in known:
            raise RubricError(f"{path}: tags.{name}: unknown tag; {TAGS_FILE.name} defines "
                              f"{', '.join(known)}")
        if str(pin) != str(known[name]["version"]):
            raise RubricError(f"{path}: tags.{name}: pinned at {pin!r} but {TAGS_FILE.name} is "
                              f"at {known[name]['version']!r}; bump the rubric's version and "
                              "its pin together")
        out[name] = dict(known[name]["values"])
    return out


@cache
def load_rubric(path: Path = RUBRIC_FILE) -> Rubric:
    """Read a rubric file; its ``tags`` (optional) name shared tags with a version pin.

    Raises:
        RubricError: see :func:`_rubric_tags`.
    """
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    return Rubric(str(raw["version"]), raw["labels"], raw["failure_modes"], raw["precedence"],
                  raw["system"], raw["template"], raw["repair"],
                  _rubric_tags(path, raw.get("tags")))


@cache
def load_rubric_variants(path: Path = VARIANTS_FILE) -> tuple[Rubric, ...]:
    """The rubric's paraphrases: the rubric with each variant's label definitions and
    precedence, versioned ``<rubric version>+<variant id>``."""
    base = load_rubric()
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    return tuple(replace(base, version=f"{base.version}+{v['id']}", labels=v["labels"],
                         precedence=v["precedence"]) for v in raw["variants"])
