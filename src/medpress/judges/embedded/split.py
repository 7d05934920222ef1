"""Train/held-out split for the embedded judge: by topic *group*, stratified by family.

Whole groups are held out (see ``data/split_groups.yaml``): a group is an area, or a set of
areas or topics whose beliefs are near-identical, so no topic, and no close cousin of a
held-out topic, is seen in training and leakage cannot inflate the held-out score. Some groups
are pinned to the held-out side (those of the dialogues whose labelled real replies measure
the judge); each family is then topped up at random, seeded, to ``share`` of its dialogues.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from medpress.dataset import Dialogue

HELD_OUT_SHARE = 0.2
GROUPS_FILE = Path(__file__).parent / "data" / "split_groups.yaml"


@dataclass(frozen=True)
class SplitGroups:
    """The grouping as data: area -> group, topic -> group, pinned held-out groups."""

    version: str
    areas: dict[str, str]
    topics: dict[str, str]
    held_out: frozenset[str]
    sha256: str

    def key(self, d: Dialogue) -> str:
        """The group named for a dialogue before groups sharing a topic are merged."""
        return self.topics.get(d.topic) or self.areas.get(d.area) or d.area


@cache
def load_groups(path: Path = GROUPS_FILE) -> SplitGroups:
    """Read ``split_groups.yaml``; a name listed twice raises ValueError."""
    blob = path.read_bytes()
    raw = yaml.safe_load(blob)

    def invert(section: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for group, members in (raw.get(section) or {}).items():
            for m in members:
                if m in out:
                    raise ValueError(f"{path}: {section}: {m!r} is in two groups")
                out[m] = str(group)
        return out

    return SplitGroups(str(raw["version"]), invert("areas"), invert("topics"),
                       frozenset(raw.get("held_out") or ()), hashlib.sha256(blob).hexdigest())


def dialogue_groups(dialogues: Iterable[Dialogue], groups: SplitGroups | None = None
                    ) -> dict[str, str]:
    """dialogue id -> group, groups that share a topic merged (under the smallest name).

    Merging keeps a topic used in two areas (``borrowed-stimulant``) on one side of the split.
    """
    g = groups or load_groups()
    ds = list(dialogues)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    by_topic: dict[str, str] = {}
    for d in ds:
        k = g.key(d)
        first = by_topic.setdefault(d.topic, k)
        a, b = find(first), find(k)
        if a != b:  # the smaller name wins, so the result does not depend on order
            parent[max(a, b)] = min(a, b)
    return {d.id: find(g.key(d)) for d in ds}


def group_split(dialogues: Iterable[Dialogue], seed: int = 0, share: float = HELD_OUT_SHARE,
                groups: SplitGroups | None = None) -> tuple[list[str], list[str]]:
    """(train ids, held-out ids), both sorted.

    Held out: every pinned group present (a merged group is pinned if any of its parts is),
    then, family by family in name order, groups with that family's dialogues chosen with
    ``seed`` until ``share`` of the family is held out (at least one group per family). A set
    with other areas than the shipped one gets a plain seeded group split.
    """
    g = groups or load_groups()
    ds = sorted(dialogues, key=lambda d: d.id)
    group_of = dialogue_groups(ds, g)
    pinned_roots = {group_of[d.id] for d in ds if g.key(d) in g.held_out}
    held: set[str] = set(pinned_roots)
    by_family: dict[str, list[Dialogue]] = defaultdict(list)
    for d in ds:
        by_family[d.family].append(d)
    rng = random.Random(seed)
    for fam in sorted(by_family):
        members = by_family[fam]
        candidates = sorted({group_of[d.id] for d in members} - held)
        rng.shuffle(candidates)
        for grp in candidates:
            n_held = sum(group_of[d.id] in held for d in members)
            if n_held and n_held >= share * len(members):
                break
            held.add(grp)
    train = [d.id for d in ds if group_of[d.id] not in held]
    test = [d.id for d in ds if group_of[d.id] in held]
    return train, test
