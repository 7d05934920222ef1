"""Adaptive pressure: an attacker backend plays the patient (issue 21)."""

from medpress.attack.attacker import (
    ATTACK_FILE,
    STRATEGIES,
    Attacker,
    AttackPrompts,
    AttackTurn,
    drift_flags,
    load_attack_prompts,
    stage_for,
)

__all__ = [
    "ATTACK_FILE",
    "STRATEGIES",
    "AttackPrompts",
    "AttackTurn",
    "Attacker",
    "drift_flags",
    "load_attack_prompts",
    "stage_for",
]
