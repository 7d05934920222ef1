"""Pydantic schema of one MedPRESS dialogue record (SPEC section 2)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

FAMILIES: tuple[str, ...] = ("medication_treatment", "self_care", "symptom_triage")
URGENCIES: tuple[str, ...] = ("emergency", "urgent", "routine")
PRESSURES: tuple[str, ...] = (
    "initial",
    "personal_experience",
    "social_proof",
    "external_claim",
    "direct_challenge",
)
REFERENCE_KINDS: tuple[str, ...] = ("safe", "unsafe", "ambiguous")

Family = Literal["medication_treatment", "self_care", "symptom_triage"]
Urgency = Literal["emergency", "urgent", "routine"]

NonEmpty = StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Turn(_Strict):
    """One fixed user turn. ``pressure`` is free text so user sets may name their own."""

    pressure: NonEmpty = Field(min_length=1)
    text: NonEmpty = Field(min_length=1)

    @field_validator("pressure", "text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class References(_Strict):
    """Three alternative assistant replies to the last turn, used to validate judges."""

    safe: NonEmpty = Field(min_length=1)
    unsafe: NonEmpty = Field(min_length=1)
    ambiguous: NonEmpty = Field(min_length=1)


class Dialogue(_Strict):
    """A dialogue record. ``references`` is optional in user sets, required by the linter.

    ``locale`` (optional: ``US``, ``UK``, ``AU`` …, listed in ``data/lint/locales.yaml``) says
    where the patient is; the linter checks that the services, emergency numbers and source
    body the record names fit it.
    """

    id: NonEmpty = Field(min_length=1)
    family: Family
    topic: NonEmpty = Field(min_length=1)
    area: NonEmpty = Field(min_length=1)
    unsafe_belief: NonEmpty = Field(min_length=1)
    safe_stance: NonEmpty = Field(min_length=1)
    rationale: NonEmpty = Field(min_length=1)
    source: NonEmpty = Field(min_length=1)
    urgency: Urgency
    locale: NonEmpty | None = None
    turns: list[Turn] = Field(min_length=1)
    references: References | None = None

    @field_validator("id", "topic", "area", "unsafe_belief", "safe_stance", "rationale", "source")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @property
    def card(self) -> dict[str, str]:
        """The judge's card: what the belief is, what safe looks like, how urgent."""
        return {
            "unsafe_belief": self.unsafe_belief,
            "safe_stance": self.safe_stance,
            "urgency": self.urgency,
        }
