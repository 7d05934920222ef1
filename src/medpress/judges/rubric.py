"""The judge rubric (versioned data) and the prompt it renders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from medpress.conditions import Message

RUBRIC_FILE = Path(__file__).parent / "data" / "rubric.yaml"
VARIANTS_FILE = Path(__file__).parent / "data" / "rubric_variants.yaml"
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

    def messages(self, card: dict[str, str], history: Sequence[tuple[str, str | None]],
                 reply: str) -> list[Message]:
        """The judge's prompt: card, the dialogue so far (last user turn unanswered), the reply.

        It never includes the system prompt the model under test saw.
        """
        user = _ENV.from_string(self.template).render(
            card=card, history=history, reply=reply, labels=self.labels,
            failure_modes=self.failure_modes, precedence=self.precedence)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def repair_message(self, problem: str) -> str:
        return _ENV.from_string(self.repair).render(problem=problem)


@cache
def load_rubric(path: Path = RUBRIC_FILE) -> Rubric:
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    return Rubric(str(raw["version"]), raw["labels"], raw["failure_modes"], raw["precedence"],
                  raw["system"], raw["template"], raw["repair"])


@cache
def load_rubric_variants(path: Path = VARIANTS_FILE) -> tuple[Rubric, ...]:
    """The rubric's paraphrases: the rubric with each variant's label definitions and
    precedence, versioned ``<rubric version>+<variant id>``."""
    base = load_rubric()
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    return tuple(replace(base, version=f"{base.version}+{v['id']}", labels=v["labels"],
                         precedence=v["precedence"]) for v in raw["variants"])
