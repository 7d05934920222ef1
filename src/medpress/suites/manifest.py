"""A suite's manifest (``suite.yaml``): what it measures, where its data are, how it is scored.

A suite is a directory holding data only (no code is ever imported from it): the manifest,
its records, its rubric and a README. Problems in a manifest name ``file:line: field``, as the
dataset loader does for records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from medpress.dataset.loader import YamlSyntaxError, parse_yaml
from medpress.dataset.schema import PRESSURES

MANIFEST = "suite.yaml"
# The suite whose records and rubric are the package's own; its runs may record no suite key.
DEFAULT_SUITE = "medpress"
# Fields every suite record has; an optional field (and, outside MedPRESS, a card field) may not
# reuse one of these names.
BASE_FIELDS = ("id", "family", "topic", "area", "source", "urgency", "locale", "rationale",
               "turns", "references")


class SuiteError(ValueError):
    """A suite cannot be found or its manifest is invalid; the message names file:line:field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VariantsSpec(_Strict):
    """Records that are variants of base cases (perturbation probes): which record fields name
    the case and the operator, the clean operator's name, and the operators file."""

    group: str
    operator: str
    clean: str = "clean"
    operators: str
    """A YAML file in the suite: ``operators`` (name -> definition) and ``demographic``."""


class AlertSpec(_Strict):
    """A warning a suite report prints for a group whose metrics are all below the bounds."""

    below: dict[str, float] = Field(min_length=1)
    say: str = Field(min_length=1)


class RecordsSpec(_Strict):
    files: list[str] = Field(min_length=1)
    """Globs relative to the suite directory."""
    card: list[str] = Field(min_length=1)
    """Record fields the judge sees (the rubric template's ``card.<field>``)."""
    optional: list[str] = Field(default_factory=list)
    """Extra string fields a record may carry (twins' ``mirrors``); the judge does not see them."""
    pressures: list[str] = Field(default_factory=lambda: list(PRESSURES), min_length=1)
    """The pressure of each turn, in order: every record has exactly these turns."""
    stratum: str = "family"
    variants: VariantsSpec | None = None
    """Set for a suite of variants: near-duplicates are allowed within a case, the bootstrap
    resamples cases, and flip metrics compare each variant with its case's clean record."""

    @model_validator(mode="after")
    def _variant_fields(self) -> RecordsSpec:
        v = self.variants
        if v is not None and (bad := [f for f in (v.group, v.operator)
                                      if f not in (*self.card, *self.optional)]):
            raise ValueError(f"variants: {bad} must be card or optional fields")
        return self

    @field_validator("optional")
    @classmethod
    def _not_base_or_card(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if clash := sorted(set(v) & set(BASE_FIELDS)):
            raise ValueError(f"{clash} are base record fields")
        if both := sorted(set(v) & set(info.data.get("card") or ())):
            raise ValueError(f"{both} are card fields (always required)")
        return v

    @field_validator("card", "optional")
    @classmethod
    def _own_names(cls, v: list[str]) -> list[str]:
        if bad := [f for f in v if not f.isidentifier()]:
            raise ValueError(f"{bad} are not field names")
        if len(set(v)) != len(v):
            raise ValueError(f"a field is listed twice ({v})")
        return v

    @field_validator("pressures")
    @classmethod
    def _pressure_names(cls, v: list[str]) -> list[str]:
        if blank := [i for i, p in enumerate(v) if not p.strip()]:
            raise ValueError(f"pressures {blank} are blank")
        return v


class ConditionsSpec(_Strict):
    default: list[str] = Field(min_length=1)
    pairs: list[tuple[str, str]] = Field(default_factory=list)


class MetricSpec(BaseModel):
    """``{use: registry name, as: reported name, **arguments}``."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    use: str
    as_: str = Field(alias="as")

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ExpectSpec(_Strict):
    records: int | None = None
    per_stratum: int | None = None


class SuiteManifest(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str
    question: str = Field(min_length=1)
    records: RecordsSpec
    rubric: str
    conditions: ConditionsSpec
    metrics: list[MetricSpec] = Field(min_length=1)
    headline: list[str] = Field(min_length=1)
    references: dict[str, str] = Field(default_factory=dict)
    expect: ExpectSpec = ExpectSpec()
    embedded_judge: bool = False
    alerts: list[AlertSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _headline_known(self) -> SuiteManifest:
        names = [m.as_ for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metrics: two metrics report as the same name ({names})")
        if unknown := [h for h in self.headline if h not in names]:
            raise ValueError(f"headline: {unknown} not among the metrics' names {names}")
        if unknown := sorted({k for a in self.alerts for k in a.below} - set(names)):
            raise ValueError(f"alerts: {unknown} not among the metrics' names {names}")
        return self


@dataclass(frozen=True)
class Suite:
    """A loaded manifest and the directory it lives in."""

    manifest: SuiteManifest
    path: Path
    shipped: bool

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def is_default(self) -> bool:
        """The package's own MedPRESS suite: everything then runs exactly as without suites."""
        return self.shipped and self.name == DEFAULT_SUITE

    @property
    def rubric_path(self) -> Path:
        return self.inside(self.manifest.rubric, "rubric")

    def inside(self, rel: str, field: str) -> Path:
        """``rel`` resolved against the suite; a user suite may not reach outside its folder
        (a shipped one may, to share the package's files).

        Raises:
            SuiteError: naming the manifest field.
        """
        p = (self.path / rel).resolve()
        if not self.shipped and not p.is_relative_to(self.path.resolve()):
            raise SuiteError(f"{self.path / MANIFEST}: {field}: {rel!r} is outside the suite")
        return p

    def variant_info(self) -> tuple[dict[str, str], list[str]]:
        """For a suite of variants: operator name -> definition (the clean one first, its
        definition empty) and the demographic operators; ({}, []) otherwise.

        Raises:
            SuiteError: the operators file is missing or malformed.
        """
        v = self.manifest.records.variants
        if v is None:
            return {}, []
        path = self.inside(v.operators, "records.variants.operators")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
            ops = {v.clean: "", **{str(k): str(d) for k, d in raw["operators"].items()}}
            return ops, [str(x) for x in raw.get("demographic") or []]
        except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as e:
            raise SuiteError(f"{path}: not an operators file ({e})") from None

    def record_files(self) -> list[Path]:
        """Every file the ``records.files`` globs match, sorted, without duplicates.

        Raises:
            SuiteError: a glob leaving the suite (user suites) or matching no file.
        """
        out: set[Path] = set()
        for pattern in self.manifest.records.files:
            matched = {p.resolve() for p in self.path.glob(pattern) if p.is_file()}
            for p in matched:
                self.inside(str(p), "records.files")
            if not matched:
                raise SuiteError(f"{self.path / MANIFEST}: records.files: {pattern!r} matches "
                                 "no file")
            out |= matched
        return sorted(out)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at ``loc`` (or its nearest existing parent)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) \
                and key < len(node.value):
            found = node.value[key]
        else:
            found = None
        if found is None:
            break
        node, line = found, found.start_mark.line + 1
    return line


def load_manifest(directory: Path, *, shipped: bool = False) -> Suite:
    """Read and validate ``directory/suite.yaml`` (no records are read).

    Raises:
        SuiteError: no manifest, invalid YAML, or fields that fail validation; each problem
            on its own line as ``path:line: field: message``.
    """
    path = directory / MANIFEST
    if not path.is_file():
        raise SuiteError(f"{directory}: no {MANIFEST} (not a suite directory)")
    text = path.read_text(encoding="utf-8")
    try:
        node, raw = parse_yaml(text)
    except YamlSyntaxError as e:
        raise SuiteError(f"{path}:{e.line or 1}: {e}") from None
    if not isinstance(raw, dict):
        raise SuiteError(f"{path}:1: a manifest must be a mapping")
    try:
        manifest = SuiteManifest.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = tuple(err["loc"])
            where = ".".join(str(x) for x in loc) or "manifest"
            msg = "unknown field" if err["type"] == "extra_forbidden" else (
                "missing required field" if err["type"] == "missing" else
                str(err["msg"]).removeprefix("Value error, "))
            lines.append(f"{path}:{_line_of(node, loc) or 1}: {where}: {msg}")
        raise SuiteError("\n".join(lines)) from None
    return Suite(manifest, directory, shipped)
