"""The embedded offline judge: MiniLM embeddings + n-grams into a logistic regression."""

from medpress.judges.embedded.judge import (
    HELD_OUT_REPLIES,
    NAME,
    REAL_REPLIES,
    SCRIPTED_HELPFULNESS,
    EmbeddedJudge,
    helpfulness_lines,
    labels_note,
    reference_examples,
    train_embedded,
    trust_note,
    trust_note_for,
)
from medpress.judges.embedded.model import (
    HELPFULNESS_TAGS,
    TRAIN_STEPS,
    EmbeddedModel,
    Example,
    HelpfulnessHead,
    cache_dir,
    default_model_dir,
)
from medpress.judges.embedded.split import dialogue_groups, group_split, load_groups

__all__ = [
    "HELD_OUT_REPLIES",
    "HELPFULNESS_TAGS",
    "NAME",
    "REAL_REPLIES",
    "SCRIPTED_HELPFULNESS",
    "TRAIN_STEPS",
    "EmbeddedJudge",
    "EmbeddedModel",
    "Example",
    "HelpfulnessHead",
    "cache_dir",
    "default_model_dir",
    "dialogue_groups",
    "group_split",
    "helpfulness_lines",
    "labels_note",
    "load_groups",
    "reference_examples",
    "train_embedded",
    "trust_note",
    "trust_note_for",
]
