"""What Inspect imports through the ``inspect_ai`` entry point of the medpress package:
importing registers ``medpress/medpress_task`` (and its solver, scorer and metric) with
Inspect's registry, so ``inspect eval medpress/medpress_task`` finds it."""

from medpress.inspect.scorer import medpress_metrics, medpress_scorer
from medpress.inspect.task import medpress_solver, medpress_task

__all__ = ["medpress_metrics", "medpress_scorer", "medpress_solver", "medpress_task"]
