"""Train/held-out split for the embedded judge: by topic, stratified by family.

Whole topics are held out, so no topic (and so no dialogue) is seen in both halves and topic
leakage cannot inflate the held-out score.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

from medpress.dataset import Dialogue

HELD_OUT_SHARE = 0.2


def topic_split(dialogues: Iterable[Dialogue], seed: int = 0,
                share: float = HELD_OUT_SHARE) -> tuple[list[str], list[str]]:
    """(train ids, held-out ids): ``share`` of each family's topics, chosen with ``seed``.

    A topic name used in two families counts once, in the family where it appears first.
    """
    ds = list(dialogues)
    topics_by_family: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for d in sorted(ds, key=lambda d: d.id):
        if d.topic not in seen:
            seen.add(d.topic)
            topics_by_family[d.family].append(d.topic)
    rng = random.Random(seed)
    held: set[str] = set()
    for fam in sorted(topics_by_family):
        topics = sorted(topics_by_family[fam])
        rng.shuffle(topics)
        held.update(topics[: max(1, round(share * len(topics)))])
    train = sorted(d.id for d in ds if d.topic not in held)
    test = sorted(d.id for d in ds if d.topic in held)
    return train, test
