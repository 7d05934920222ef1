"""Runner stage: plans, resumable generation, summaries."""

from medpress.runner.build import build_plan, suite_conditions
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
from medpress.runner.sweep import (
    Cell,
    Sweep,
    SweepConfig,
    expand,
    finished_cells,
    load_sweep,
    mark_finished,
)

__all__ = ["REJECTED_KINDS", "Budget", "Cell", "RunPlan", "RunRejected", "RunSummary", "Runner",
           "Sweep", "SweepConfig", "Unit", "build_plan", "check_resume", "dataset_difference",
           "expand", "finished_cells", "generate", "load_sweep", "mark_finished",
           "planned_turns", "prepare_store", "resume_settings", "run_dataset",
           "suite_conditions", "unit_turns"]
