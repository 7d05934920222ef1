"""Runner stage: plans, resumable generation, summaries."""

from medpress.runner.plan import RunPlan, Unit
from medpress.runner.run_dataset import run_dataset
from medpress.runner.runner import Runner, RunSummary, generate, prepare_store

__all__ = ["RunPlan", "RunSummary", "Runner", "Unit", "generate", "prepare_store", "run_dataset"]
