"""Suites: one protocol each (records, rubric, conditions, metrics) on the shared runner.

Shipped suites live in folders beside this module (``medpress``, ``taf-med``, ``twins``,
``control``); a user's suite is any directory holding a ``suite.yaml``. See docs/suites.md.
"""

from medpress.suites.discovery import (
    HASH_SCHEME,
    SHIPPED_DIR,
    canonical_hash,
    known_suites,
    resolve_suite,
    stored_suite,
    suite_identity,
    suite_summary,
)
from medpress.suites.manifest import (
    DEFAULT_SUITE,
    MANIFEST,
    MetricSpec,
    Suite,
    SuiteError,
    SuiteManifest,
    load_manifest,
)
from medpress.suites.records import (
    SuiteRecord,
    load_suite_dataset,
    record_index,
    record_model,
)

__all__ = [
    "DEFAULT_SUITE",
    "HASH_SCHEME",
    "MANIFEST",
    "SHIPPED_DIR",
    "MetricSpec",
    "Suite",
    "SuiteError",
    "SuiteManifest",
    "SuiteRecord",
    "canonical_hash",
    "known_suites",
    "load_manifest",
    "load_suite_dataset",
    "record_index",
    "record_model",
    "resolve_suite",
    "stored_suite",
    "suite_identity",
    "suite_summary",
]
