"""Prompt conditions: versioned system framings, and how they enter a conversation."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

CONDITIONS_FILE: Path = Path(__file__).parent / "data" / "conditions.yaml"
Role = Literal["system", "user", "assistant"]
Message = dict[str, str]


@dataclass(frozen=True)
class Condition:
    name: str
    system: str
    version: str

    @property
    def text_hash(self) -> str:
        return text_hash(self.system)


@dataclass(frozen=True)
class ConditionSet:
    version: str
    conditions: dict[str, Condition]
    no_system_role_template: str

    @property
    def template_hash(self) -> str:
        """Identifies the no-system-role template, which shapes prompts without a system role."""
        return text_hash(self.no_system_role_template)

    def get(self, names: Sequence[str]) -> list[Condition]:
        """The named conditions, in the order given.

        Raises:
            ValueError: naming the unknown condition and the known ones, or a condition named
                twice (its dialogues would be generated twice under one key).
        """
        unknown = [n for n in names if n not in self.conditions]
        if unknown:
            raise ValueError(f"unknown condition(s) {', '.join(unknown)}; "
                             f"known: {', '.join(self.conditions)}")
        check_unique(names)
        return [self.conditions[n] for n in names]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_unique(names: Sequence[str]) -> None:
    """Raises ValueError naming every condition listed more than once."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"condition(s) listed more than once in --conditions: {', '.join(twice)}")


@cache
def load_conditions(path: Path = CONDITIONS_FILE) -> ConditionSet:
    raw: dict[str, Any] = yaml.safe_load(path.read_text())
    version = str(raw["version"])
    conds = {
        name: Condition(name, "\n\n".join(spec["system"]), version)
        for name, spec in raw["conditions"].items()
    }
    return ConditionSet(version, conds, raw["no_system_role_template"])


def build_messages(
    system: str | None,
    history: Sequence[tuple[str, str | None]],
    *,
    system_role: bool = True,
    template: str | None = None,
) -> list[Message]:
    """Chat messages for one model call.

    ``history`` is ``[(user_text, assistant_reply_or_None), ...]``; the last pair's reply is
    ``None`` (the turn being asked). Earlier replies are the model's own. Without a system role
    the framing is folded into the *first* user message only, so later turns read naturally.
    """
    msgs: list[Message] = []
    if system and system_role:
        msgs.append({"role": "system", "content": system})
    for i, (user, reply) in enumerate(history):
        if i == 0 and system and not system_role:
            tpl = template or load_conditions().no_system_role_template
            user = tpl.format(system=system, user=user)
        msgs.append({"role": "user", "content": user})
        if reply is not None:
            msgs.append({"role": "assistant", "content": reply})
    return msgs
