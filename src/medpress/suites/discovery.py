"""Finding suites: shipped ones by name, anyone's by directory; and a suite's identity.

Discovery reads manifests only; no code is imported from a suite.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from medpress.suites.manifest import DEFAULT_SUITE, MANIFEST, Suite, SuiteError, load_manifest

SHIPPED_DIR: Path = Path(__file__).parent
HASH_SCHEME = 1


@cache
def known_suites() -> dict[str, Path]:
    """Shipped suites by name: every folder here holding a ``suite.yaml``.

    Raises:
        SuiteError: two shipped folders declaring the same name.
    """
    out: dict[str, Path] = {}
    for d in sorted(p.parent for p in SHIPPED_DIR.glob(f"*/{MANIFEST}")):
        name = load_manifest(d, shipped=True).name
        if name in out:
            raise SuiteError(f"suite name {name!r} is declared by {out[name]} and {d}")
        out[name] = d
    return out


def resolve_suite(ref: str = DEFAULT_SUITE) -> Suite:
    """A bare word is a shipped suite's name; anything with a ``/`` or a leading ``.`` is a
    directory (so ``./my-suite`` and ``/tmp/x`` are paths, ``taf-med`` a name).

    Raises:
        SuiteError: an unknown name (listing the known ones), or a directory without a valid
            manifest.
    """
    if "/" in ref or ref.startswith("."):
        directory = Path(ref)
        shipped = directory.resolve().parent == SHIPPED_DIR.resolve()
        return load_manifest(directory, shipped=shipped)
    known = known_suites()
    if ref not in known:
        raise SuiteError(f"unknown suite {ref!r}; known: {', '.join(sorted(known))}; or pass a "
                         "directory such as ./my-suite")
    return load_manifest(known[ref], shipped=True)


def canonical_hash(obj: Any) -> str:
    """SHA-256 of ``obj`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def suite_identity(suite: Suite, records_hash: str) -> dict[str, Any]:
    """What a run records about its suite: declared name and version, and computed hashes.

    ``records_hash`` is the content hash of the records the run uses (the dataset's). The
    ``hash_scheme`` is raised whenever what the hashes cover changes.
    """
    from medpress.metrics.registry import metric_version

    m = suite.manifest
    rubric = yaml.safe_load(suite.rubric_path.read_text(encoding="utf-8"))
    parts = {
        "records": records_hash,
        "rubric": canonical_hash(rubric),
        "conditions": canonical_hash(m.conditions.model_dump(mode="json")),
        "metrics": canonical_hash([[x.use, x.as_, x.args, metric_version(x.use)]
                                   for x in m.metrics]),
    }
    if m.records.variants is not None:  # the operators shape the flip metrics
        parts["variants"] = canonical_hash(suite.variant_info())
    return {"name": m.name, "version": m.version, "path": str(suite.path.resolve()),
            "hash": canonical_hash(parts), "parts": parts, "hash_scheme": HASH_SCHEME}


def suite_summary(suite: Suite) -> dict[str, Any]:
    """``{name, version, path, n_records}`` for ``medpress suites``, from the manifest and a
    line count of the record files (records are not validated here; none yet counts 0)."""
    n = 0
    files = {p for g in suite.manifest.records.files for p in suite.path.glob(g) if p.is_file()}
    for f in sorted(files):
        if f.suffix == ".jsonl":
            n += sum(1 for line in f.read_text(encoding="utf-8").splitlines() if line.strip())
        else:
            n += len(yaml.safe_load(f.read_text(encoding="utf-8")) or [])
    return {"name": suite.name, "version": suite.version, "path": str(suite.path), "n_records": n}


def stored_suite(meta: dict[str, Any] | None) -> Suite:
    """The suite a run used, from its ``suite`` meta (None: an older run, the MedPRESS suite).

    The recorded directory is tried first, then the recorded name among the shipped suites.

    Raises:
        SuiteError: the suite is found nowhere.
    """
    if not meta:
        return resolve_suite(DEFAULT_SUITE)
    path = Path(str(meta.get("path", "")))
    if meta.get("path") and (path / MANIFEST).is_file():
        return resolve_suite(str(path))
    name = str(meta.get("name"))
    if name in known_suites():
        return resolve_suite(name)
    raise SuiteError(f"the run's suite {name!r} is not shipped and its directory {path} is gone")
