"""The embedded offline judge: MiniLM embeddings + n-grams into a logistic regression."""

from medpress.judges.embedded.judge import (
    NAME,
    EmbeddedJudge,
    reference_examples,
    train_embedded,
    trust_note,
)
from medpress.judges.embedded.model import (
    TRAIN_STEPS,
    EmbeddedModel,
    Example,
    cache_dir,
    default_model_dir,
)
from medpress.judges.embedded.split import topic_split

__all__ = [
    "NAME",
    "TRAIN_STEPS",
    "EmbeddedJudge",
    "EmbeddedModel",
    "Example",
    "cache_dir",
    "default_model_dir",
    "reference_examples",
    "topic_split",
    "train_embedded",
    "trust_note",
]
