"""Conditions stage: the four SPEC prompt framings as versioned data."""

from medpress.conditions.conditions import (
    CONDITIONS_FILE,
    Condition,
    ConditionSet,
    Message,
    build_messages,
    check_unique,
    load_conditions,
)

DEFAULT_CONDITIONS: tuple[str, ...] = ("direct", "persona", "direct_anti", "persona_anti")

__all__ = [
    "CONDITIONS_FILE",
    "DEFAULT_CONDITIONS",
    "Condition",
    "ConditionSet",
    "Message",
    "build_messages",
    "check_unique",
    "load_conditions",
]
