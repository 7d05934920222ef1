"""Judges stage: the rubric, LLM judges, ensembles, agreement and validation."""

from medpress.judges.agreement import classification_report, cohen_kappa, fleiss_kappa
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.check import (
    GoldFileError,
    GoldItem,
    hard_set_items,
    kind_report,
    label_agreement,
    label_file_items,
    reference_items,
    run_check,
)
from medpress.judges.ensemble import SEVERITY, disagrees, majority
from medpress.judges.labels_import import ImportSummary, import_labels
from medpress.judges.llm import JUDGE_CONFIG, LLMJudge
from medpress.judges.registry import get_judge
from medpress.judges.rubric import Rubric, load_rubric
from medpress.judges.run import JudgeSummary, judge_run
from medpress.judges.verdict import Verdict, VerdictError, parse_verdict
from medpress.judges.views import (
    ENSEMBLE,
    IMPORT_VERSION,
    REVIEW_MIN_JUDGES,
    LabelView,
    disagreements,
    failure_kinds,
    label_rows,
    pairwise_labels,
    resolve_view,
    review_note,
    turn_labels,
)

__all__ = [
    "ENSEMBLE",
    "IMPORT_VERSION",
    "JUDGE_CONFIG",
    "REVIEW_MIN_JUDGES",
    "SEVERITY",
    "GoldFileError",
    "GoldItem",
    "ImportSummary",
    "Judge",
    "JudgeItem",
    "JudgeSummary",
    "Judgment",
    "LLMJudge",
    "LabelView",
    "Rubric",
    "Verdict",
    "VerdictError",
    "classification_report",
    "cohen_kappa",
    "disagreements",
    "disagrees",
    "failure_kinds",
    "fleiss_kappa",
    "get_judge",
    "hard_set_items",
    "import_labels",
    "judge_run",
    "kind_report",
    "label_agreement",
    "label_file_items",
    "label_rows",
    "load_rubric",
    "majority",
    "pairwise_labels",
    "parse_verdict",
    "reference_items",
    "resolve_view",
    "review_note",
    "run_check",
    "turn_labels",
]
