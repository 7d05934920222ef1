"""Runner stage: plans, resumable generation, summaries."""

from medpress.runner.plan import (
    RunPlan,
    Unit,
    dataset_difference,
    planned_turns,
    resume_settings,
    unit_turns,
)
from medpress.runner.run_dataset import run_dataset
from medpress.runner.runner import (
    REJECTED_KINDS,
    Budget,
    Runner,
    RunRejected,
    RunSummary,
    check_resume,
    generate,
    prepare_store,
)

__all__ = ["REJECTED_KINDS", "Budget", "RunPlan", "RunRejected", "RunSummary", "Runner", "Unit",
           "check_resume", "dataset_difference", "generate", "planned_turns", "prepare_store",
           "resume_settings", "run_dataset", "unit_turns"]
