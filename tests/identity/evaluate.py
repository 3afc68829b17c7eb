"""Recall and precision of recording identity on the labelled captures: `python -m tests.identity.evaluate`.

Each set is linked by a Linker of its own, in the order its rows are listed. A pair of rows is positive when the
labels put them in one cluster. Recall counts positive pairs that end in one recording; a false merge is a pair in
one recording that the labels keep apart. A link's tier is correct when the recording it joined already held a row
of the link's own cluster.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from chartgw.index.identity.linker import Linker, Row
from tests.identity import captures

LABELS = Path(__file__).with_name("labels.json")
TIERS = ("isrc", "platform_id", "exact", "high", "low")


@dataclass
class Figures:
    positive_pairs: int = 0
    found_pairs: int = 0
    false_merges: list[tuple[str, str]] = field(default_factory=list)
    missed: list[tuple[str, str]] = field(default_factory=list)
    links: Counter[str] = field(default_factory=Counter)
    correct: Counter[str] = field(default_factory=Counter)
    rows: int = 0

    @property
    def recall(self) -> float:
        return self.found_pairs / self.positive_pairs if self.positive_pairs else 1.0

    def precision(self, tier: str) -> float | None:
        return self.correct[tier] / self.links[tier] if self.links[tier] else None


def labelled_sets() -> dict[str, tuple[dict[str, Row], list[list[str]]]]:
    rows = captures.all_rows()
    clusters = json.loads(LABELS.read_text())["clusters"]
    clusters += [[key.replace("apple/", "apple-ids/", 1) for key in c] for c in clusters if c[0].startswith("apple/")]
    sets: dict[str, tuple[dict[str, Row], list[list[str]]]] = {}
    for name in dict.fromkeys(key.split("/")[0] for key in rows):
        sets[name] = ({k: r for k, r in rows.items() if k.startswith(name + "/")},
                      [c for c in clusters if c[0].startswith(name + "/")])
    sets["made"] = captures.constructed()
    return sets


def evaluate(rows: dict[str, Row], clusters: list[list[str]], figures: Figures) -> None:
    truth = {key: key for key in rows}
    for cluster in clusters:
        for key in cluster:
            truth[key] = cluster[0]
    linker = Linker()
    members: dict[int, list[str]] = defaultdict(list)
    for key, row in rows.items():
        link = linker.link(row)
        number = link.recording.number
        if link.tier != "none":
            figures.links[link.tier] += 1
            figures.correct[link.tier] += any(truth[k] == truth[key] for k in members[number])
        members[number].append(key)
    figures.rows += len(rows)
    found = {frozenset(p) for group in members.values() for p in itertools.combinations(group, 2)}
    for cluster in clusters:
        for a, b in itertools.combinations(cluster, 2):
            figures.positive_pairs += 1
            if frozenset((a, b)) in found:
                figures.found_pairs += 1
            else:
                figures.missed.append((a, b))
    for pair in found:
        a, b = sorted(pair)
        if truth[a] != truth[b]:
            figures.false_merges.append((a, b))


def run() -> dict[str, Figures]:
    results: dict[str, Figures] = {}
    total = Figures()
    for name, (rows, clusters) in labelled_sets().items():
        results[name] = Figures()
        evaluate(rows, clusters, results[name])
        evaluate(rows, clusters, total)
    results["all"] = total
    return results


def main() -> None:
    results = run()
    print("| set | rows | positive pairs | recall | false merges | " + " | ".join(f"{t} links (precision)" for t in TIERS) + " |")
    print("|---" * (5 + len(TIERS)) + "|")
    for name, f in results.items():
        cells = [f"{f.links[t]} ({f.precision(t):.1%})" if f.links[t] else "0" for t in TIERS]
        print(f"| {name} | {f.rows} | {f.positive_pairs} | {f.recall:.1%} | {len(f.false_merges)} | " + " | ".join(cells) + " |")
    everything = results["all"]
    rows = {k: r for rows, _ in labelled_sets().values() for k, r in rows.items()}
    for a, b in everything.missed:
        print("missed:", a, rows[a], "<>", b, rows[b])
    for a, b in everything.false_merges:
        print("false merge:", a, rows[a], "<>", b, rows[b])


if __name__ == "__main__":
    main()
