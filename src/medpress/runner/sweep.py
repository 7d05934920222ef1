"""A sweep: one TOML file that describes a whole study, expanded into cells.

A sweep file (docs/sweeps.md) names the models, the judges, the suites and the run settings
(``[run]``: conditions, sample, repeats, seed, ...). Every model × suite pair is one **cell**,
a run directory of its own, ``<out>/<model directory>/<suite>``: deterministic, so running the
same sweep again resumes each cell where it stopped. A cell that finished (generated and
judged) is recorded in ``<out>/sweep-state.json`` with a fingerprint of its settings; while the
fingerprint matches and its run directory exists, a later run reuses it without contacting any
server. Changing a cell's settings (another judge, more repeats) changes its fingerprint, so
the cell is entered again and the run's own resume checks decide what is left to do.

This module holds the configuration, the cells and the state; the command that runs them is
:mod:`medpress.cli.sweep`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from medpress.backends import GenerateConfig, Reasoning, is_model_spec

__all__ = ["STATE_FILE", "Cell", "JudgeEntry", "ModelEntry", "RunSettings", "Sweep",
           "SweepConfig", "cell_dir_name", "expand", "finished_cells", "load_sweep",
           "looks_like_secret", "mark_finished"]

STATE_FILE = "sweep-state.json"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Prefixes of common API keys (OpenAI, Hugging Face, Groq, xAI, Google, GitHub, NVIDIA).
_KEY_PREFIXES = ("sk-", "sk_", "hf_", "gsk_", "xai-", "AIza", "ghp_", "github_pat_", "nvapi-")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def looks_like_secret(value: str) -> bool:
    """Whether an ``api_key_env`` value looks like an API key rather than a variable's name.

    A variable's name is letters, digits and underscores, not starting with a digit
    (``OPENAI_API_KEY``, ``MY_KEY``). Taken for a key: a value that starts with a known key
    prefix (``sk-``, ``hf_``, ``gsk_``, ...), that has a character no name can have (``-``,
    ``.``), or that is long (20 characters or more) with no underscore, the shape of a random
    token rather than of a name.
    """
    if value.startswith(_KEY_PREFIXES) or not _ENV_NAME.fullmatch(value):
        return True
    return len(value) >= 20 and "_" not in value


def cell_dir_name(name: str) -> str:
    """A model's directory under the sweep's folder: its display name with anything but
    letters, digits, ``.``, ``_`` and ``-`` replaced by ``_`` (so no name can leave the
    folder), ``model`` if nothing is left."""
    safe = _UNSAFE_CHARS.sub("_", name).strip("._-")
    return re.sub(r"\.{2,}", "_", safe) or "model"


def _reasoning(value: object) -> object:
    """TOML booleans for ``reasoning``: ``true`` is ``"on"``, ``false`` is ``"off"``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


def _relative_to_config(value: Path | None, info: ValidationInfo) -> Path | None:
    """A path in the sweep file, relative to the file's own folder (so the sweep runs the
    same from any working directory); absolute paths and ``~`` are kept."""
    if value is None:
        return None
    value = value.expanduser()
    base = (info.context or {}).get("base")
    return value if value.is_absolute() or base is None else Path(base) / value


class RunSettings(BaseModel):
    """``[run]``: the settings every cell shares, named as on the command line.

    ``conditions`` apply to every suite except those given their own in
    ``suite_conditions``; unset, each suite runs its own default conditions. ``dataset``,
    ``ids`` and ``starter`` select MedPRESS dialogues and apply to the ``medpress`` suite
    only; ``sample`` applies to every suite. Paths are relative to the sweep file.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    suites: list[str] = Field(default_factory=lambda: ["medpress"], min_length=1)
    conditions: list[str] | None = Field(default=None, min_length=1)
    suite_conditions: dict[str, list[str]] = Field(default_factory=dict)
    conditions_files: list[Path] = Field(default_factory=list)
    dataset: Path | None = None
    sample: int | None = Field(default=None, ge=1)
    ids: list[str] | None = Field(default=None, min_length=1)
    starter: bool = False
    repeats: int = Field(default=1, ge=1)
    seed: int = 0
    max_tokens: int = Field(default=GenerateConfig.max_tokens, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    concurrency: int = Field(default=32, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    reasoning: Reasoning | None = None
    system_role: bool = True
    judge_concurrency: int = Field(default=16, ge=1)
    judge_truncated: bool = True
    retry_failed: bool = False
    allow_failed: bool = False
    html: bool = False
    n_boot: int = Field(default=1000, ge=0)
    out: Path | None = None
    """The sweep's folder; default ``runs/<sweep file name>`` (``--out`` wins over both)."""

    @field_validator("ids", mode="before")
    @classmethod
    def _split_ids(cls, v: object) -> object:
        # "MT-0001,SC-0002" as on the command line, or a TOML list
        return [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v

    @field_validator("reasoning", mode="before")
    @classmethod
    def _bool_reasoning(cls, v: object) -> object:
        return _reasoning(v)

    @field_validator("dataset", "out")
    @classmethod
    def _paths(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        return _relative_to_config(v, info)

    @field_validator("conditions_files")
    @classmethod
    def _files(cls, v: list[Path], info: ValidationInfo) -> list[Path]:
        return [p for f in v if (p := _relative_to_config(f, info)) is not None]

    @field_validator("suites")
    @classmethod
    def _suite_dirs(cls, v: list[str], info: ValidationInfo) -> list[str]:
        # a suite given as a directory (has a "/" or starts with ".") is relative to the file
        base = (info.context or {}).get("base")
        out = []
        for ref in v:
            if base is not None and ("/" in ref or ref.startswith(".")) \
                    and not Path(ref).expanduser().is_absolute():
                ref = str(Path(base) / ref)
            out.append(ref)
        if len(set(out)) < len(out):
            raise ValueError("a suite is listed twice")
        return out


class ModelEntry(BaseModel):
    """``[[models]]``: one model configuration (a row of the leaderboard).

    ``name`` is its display name in reports (stored as the run's name) and gives its
    directory; default: the spec, plus `` (reasoning=on|off)`` when the entry sets
    ``reasoning``. ``base_urls`` are replicas of one model (requests are spread over them);
    ``base_url`` is the one-server shorthand. ``api_key_env`` is the *name* of the variable
    holding the key, never the key. ``reasoning``, ``system_role``, ``concurrency``,
    ``max_tokens`` and ``temperature`` override ``[run]`` for this model.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str
    name: str | None = None
    base_url: str | None = None
    base_urls: list[str] = Field(default_factory=list)
    api_key_env: str = DEFAULT_KEY_ENV
    reasoning: Reasoning | None = None
    system_role: bool | None = None
    concurrency: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)

    @field_validator("reasoning", mode="before")
    @classmethod
    def _bool_reasoning(cls, v: object) -> object:
        return _reasoning(v)

    @field_validator("spec")
    @classmethod
    def _spec(cls, v: str) -> str:
        if not is_model_spec(v):
            raise ValueError(f"{v!r} is not a model spec (openai/<model>, llamacpp/<path.gguf>, "
                             "smollm2, scripted/<behaviour>)")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty (leave it out for the default name)")
        return None if v is None else v.strip()

    @field_validator("api_key_env")
    @classmethod
    def _key_name(cls, v: str) -> str:
        # The message never repeats the value: it may be a real key.
        if looks_like_secret(v):
            raise ValueError("this looks like an API key, not a variable's name: give the NAME "
                             "of the environment variable that holds the key (e.g. "
                             "api_key_env = \"MY_KEY\", then export MY_KEY=...), and take the "
                             "key out of this file")
        return v

    @property
    def urls(self) -> tuple[str, ...]:
        """Every replica's URL (``base_url`` and ``base_urls`` together), in order."""
        return tuple(dict.fromkeys([*([self.base_url] if self.base_url else []),
                                    *self.base_urls]))

    @property
    def display_name(self) -> str:
        if self.name is not None:
            return self.name
        return self.spec + (f" (reasoning={self.reasoning})" if self.reasoning else "")


class JudgeEntry(BaseModel):
    """``[[judges]]``: a judge spec (``embedded``, ``openai/…``, ...), its server, the suites
    it judges (default: every suite of the sweep) and an LLM judge's ``reasoning`` and
    ``max_tokens``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str
    base_url: str | None = None
    suites: list[str] | None = Field(default=None, min_length=1)
    reasoning: Reasoning | None = None
    max_tokens: int | None = Field(default=None, ge=1)

    @field_validator("reasoning", mode="before")
    @classmethod
    def _bool_reasoning(cls, v: object) -> object:
        return _reasoning(v)


class SweepConfig(BaseModel):
    """The whole sweep file: ``[run]``, ``[[models]]`` (at least one), ``[[judges]]`` (at
    least one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: RunSettings = RunSettings()  # frozen: one shared default is safe
    models: list[ModelEntry] = Field(min_length=1)
    judges: list[JudgeEntry] = Field(min_length=1)


@dataclass(frozen=True)
class Sweep:
    """A sweep file, read and checked: its path and its configuration."""

    path: Path
    config: SweepConfig

    @property
    def default_out(self) -> Path:
        """``[run] out``, else ``runs/<file name without .toml>`` in the working directory."""
        return self.config.run.out or Path("runs") / self.path.stem


@dataclass(frozen=True)
class Cell:
    """One model × suite: a run directory, with the settings it runs with."""

    index: int
    """1-based, in run order (model by model, each model's suites in the file's order)."""
    model: ModelEntry
    suite: str
    """As given in ``[run] suites`` (a name, or a directory)."""
    suite_name: str
    """The suite's own name (its directory under the model's)."""
    conditions: tuple[str, ...] | None
    """None: the suite's default conditions."""
    judges: tuple[JudgeEntry, ...]
    run_dir: Path
    reasoning: Reasoning | None
    system_role: bool
    concurrency: int
    max_tokens: int
    temperature: float

    @property
    def key(self) -> str:
        """``<model directory>/<suite>``: the cell's name in the state file."""
        return f"{self.run_dir.parent.name}/{self.run_dir.name}"

    @property
    def label(self) -> str:
        return f"{self.model.display_name} × {self.suite_name}"

    def fingerprint(self, run: RunSettings) -> str:
        """A hash of everything that decides what the cell holds: the model entry, the
        suite, conditions and selection, the judges; not the folder, concurrency or report
        options. Equal fingerprints mean the finished cell can be reused as it is."""
        keep = run.model_dump(mode="json", exclude={"out", "html", "n_boot", "concurrency",
                                                    "judge_concurrency", "suites",
                                                    "suite_conditions", "conditions"})
        data = {"run": keep, "model": self.model.model_dump(mode="json", exclude={"concurrency"}),
                "suite": self.suite, "conditions": self.conditions,
                "judges": [j.model_dump(mode="json", exclude={"suites"}) for j in self.judges]}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _where(loc: Sequence[int | str], data: dict[str, Any]) -> str:
    """A pydantic error location as the sweep file spells it: ``[[models]] 2 (name), key
    'api_key_env'`` or ``[run] key 'sample'``."""
    if not loc:
        return "top level"
    head, rest = str(loc[0]), list(loc[1:])
    if head in ("models", "judges") and rest and isinstance(i := rest[0], int):
        rest = rest[1:]
        entries = data.get(head)
        entry = entries[i] if isinstance(entries, list) and i < len(entries) else {}
        who = entry.get("name") or entry.get("spec") if isinstance(entry, dict) else None
        where = f"[[{head}]] {i + 1}" + (f" ({who})" if isinstance(who, str) else "")
    elif head == "run":
        where = "[run]"
    else:
        return f"key {'.'.join(map(str, loc))!r}"
    return where + (f", key {'.'.join(map(str, rest))!r}" if rest else "")


def _problem(err: Any) -> str:
    """One pydantic error's message, without the input value (it may be a secret)."""
    msg = str(err["msg"])
    if err["type"] == "extra_forbidden":
        return "unknown key (a typo?); see docs/sweeps.md for the keys"
    if err["type"] == "missing":
        return "missing (required)"
    return msg.removeprefix("Value error, ")


def load_sweep(path: Path) -> Sweep:
    """Read and check a sweep file.

    Checked here: TOML syntax, unknown keys (anywhere), types and ranges, model specs, a
    key-looking ``api_key_env``, display names and their directories unique, ``base_url``
    only for ``openai/`` models, ``suite_conditions`` and judges' ``suites`` naming suites
    of the sweep. Suites, conditions and dialogues are checked by :func:`expand` and when
    the plans are built.

    Raises:
        ValueError: every problem found, one per line, each naming the file, the table (and
            for ``[[models]]``/``[[judges]]`` the 1-based entry) and the key.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read sweep file {path}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None
    try:
        config = SweepConfig.model_validate(data, context={"base": path.parent})
    except ValidationError as e:
        lines = [f"{path}: {_where(err['loc'], data)}: {_problem(err)}" for err in e.errors()]
        raise ValueError("\n".join(lines)) from None
    problems = [f"{path}: {p}" for p in _cross_checks(config)]
    if problems:
        raise ValueError("\n".join(problems))
    return Sweep(path, config)


def _cross_checks(config: SweepConfig) -> list[str]:
    """What one entry cannot check alone: names, URLs against specs, suites named."""
    out = []
    seen: dict[str, int] = {}
    for i, m in enumerate(config.models, 1):
        where = f"[[models]] {i} ({m.display_name})"
        d = cell_dir_name(m.display_name)
        if d in seen:
            out.append(f"{where}: its name gives the same directory ({d!r}) as [[models]] "
                       f"{seen[d]}: give each model a different `name`")
        seen.setdefault(d, i)
        if m.urls and not m.spec.startswith("openai/"):
            out.append(f"{where}, key 'base_urls': base URLs apply to openai/<model> specs, "
                       f"not {m.spec!r}")
    suites = set(config.run.suites)
    for s in config.run.suite_conditions:
        if s not in suites:
            out.append(f"[run], key 'suite_conditions.{s}': {s!r} is not in suites "
                       f"({', '.join(config.run.suites)})")
    for i, j in enumerate(config.judges, 1):
        for s in j.suites or []:
            if s not in suites:
                out.append(f"[[judges]] {i} ({j.spec}), key 'suites': {s!r} is not in [run] "
                           f"suites ({', '.join(config.run.suites)})")
        if j.base_url is not None and not j.spec.startswith("openai/"):
            out.append(f"[[judges]] {i} ({j.spec}), key 'base_url': a base URL applies to "
                       f"openai/ judges, not {j.spec!r}")
    return out


def expand(sweep: Sweep, out: Path) -> list[Cell]:
    """The sweep's cells in run order: model by model, each model's suites in file order;
    run directory ``<out>/<model directory>/<suite name>``.

    Raises:
        ValueError: an unknown suite, a suite no judge can judge, or the embedded judge set
            on a suite that has none (each naming the file and the entry).
    """
    from medpress.suites import resolve_suite

    run = sweep.config.run
    names = {}
    for ref in run.suites:
        try:
            suite = resolve_suite(ref)
        except ValueError as e:
            raise ValueError(f"{sweep.path}: [run], key 'suites': {e}") from None
        names[ref] = suite.name
        for i, j in enumerate(sweep.config.judges, 1):
            if j.spec == "embedded" and (j.suites is None or ref in j.suites) \
                    and not suite.is_default and not suite.manifest.embedded_judge:
                raise ValueError(
                    f"{sweep.path}: [[judges]] {i} (embedded): the embedded judge exists only "
                    f"for the medpress suite, not {suite.name!r}; add suites = [\"medpress\"] "
                    "to this judge and an LLM judge for the others")
    if len(set(names.values())) < len(names):
        raise ValueError(f"{sweep.path}: [run], key 'suites': two entries are the same suite")
    cells: list[Cell] = []
    for m in sweep.config.models:
        for ref in run.suites:
            judges = tuple(j for j in sweep.config.judges if j.suites is None or ref in j.suites)
            if not judges:
                raise ValueError(f"{sweep.path}: no [[judges]] entry judges suite {ref!r}: "
                                 "add one, or widen a judge's `suites`")
            conds = run.suite_conditions.get(ref, run.conditions)
            cells.append(Cell(
                index=len(cells) + 1, model=m, suite=ref, suite_name=names[ref],
                conditions=None if conds is None else tuple(conds), judges=judges,
                run_dir=out / cell_dir_name(m.display_name) / cell_dir_name(names[ref]),
                reasoning=m.reasoning or run.reasoning,
                system_role=run.system_role if m.system_role is None else m.system_role,
                concurrency=m.concurrency or run.concurrency,
                max_tokens=m.max_tokens or run.max_tokens,
                temperature=run.temperature if m.temperature is None else m.temperature))
    return cells


def _read_state(out: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((out / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"{out / STATE_FILE}: cannot be read ({e}); delete it and run the "
                         "sweep again (finished cells are then checked, not redone)") from None
    done = state.get("done")
    return done if isinstance(done, dict) else {}


def finished_cells(out: Path, cells: Sequence[Cell], run: RunSettings) -> dict[int, str]:
    """The cells that a previous run of this sweep finished and that can be reused as they
    are: index → the judge view their labels are read with (``name@version,…``).

    A cell counts as finished when the state file records it with the same fingerprint and
    its run directory still holds a run; anything else is run again (and resumes).

    Raises:
        ValueError: a state file that is not JSON.
    """
    state = _read_state(out)
    reuse = {}
    for c in cells:
        entry = state.get(c.key)
        if (isinstance(entry, dict) and entry.get("fingerprint") == c.fingerprint(run)
                and (c.run_dir / "run.sqlite").is_file()):
            reuse[c.index] = str(entry.get("view", ""))
    return reuse


def mark_finished(out: Path, cell: Cell, run: RunSettings, view: str) -> None:
    """Record ``cell`` as finished (generated and judged) with its judge view. Written to a
    temporary file and renamed, so a kill mid-write leaves the previous state whole."""
    state = _read_state(out)
    state[cell.key] = {"fingerprint": cell.fingerprint(run), "view": view,
                       "model": cell.model.display_name, "suite": cell.suite_name}
    path = out / STATE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": 1, "done": state}, indent=1, sort_keys=True),
                   encoding="utf-8")
    os.replace(tmp, path)

