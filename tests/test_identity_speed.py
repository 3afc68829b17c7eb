"""What keeps identity fast at 10M rows (docs/identity.md, "Speed at 10M rows"), held as bounds on work and on
query plans, never as timings: a new artist name or alias costs the same however many artists are known (and
gives the sets a join of every pair would), and a recording's page reads the artist index in its key's order."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest

from chartgw.index import history as index
from chartgw.index.identity import linker
from chartgw.index.identity.linker import Artists
from chartgw.index.identity.names import Credit, parse_credit, script_of

PRINTED = ["DAY6 (데이식스)", "원필 (DAY6)", "화사 (HWASA)", "HWASA", "화사", "마마무 (MAMAMOO)", "MAMAMOO (마마무)",
           "Wonpil (원필)", "원필", "데이식스", "IU (아이유)", "아이유 (IU)", "이지은 (IU)", "IU", "BTS (방탄소년단)", "방탄소년단",
           "Bangtan (방탄소년단)", "Jimin (지민)", "지민 (BTS)", "米津玄師 (Kenshi Yonezu)", "Kenshi Yonezu", "YOASOBI",
           "요아소비 (YOASOBI)", "太妍 (TAEYEON)", "TAEYEON (태연)", "태연 (소녀시대)", "소녀시대 (Girls' Generation)",
           "Girls' Generation (少女時代)", "Taylor Swift"]


def _credits(printed: str) -> list[Credit]:
    return [c for part in parse_credit(printed) for c in part]


def _joined_from_scratch(credits: list[Credit]) -> dict[str, frozenset[str]]:
    """Each name's artist (its set of names) as joining every pair again, in sorted order, makes it: the rule
    `Artists` keeps, written the slow way."""
    names = {n for c in credits for n in c.aliases}
    pairs = sorted({(c.main, a) for c in credits for a in c.aliases - {c.main}})
    parent = {n: n for n in names}
    scripts = {n: {script_of(n): n} for n in names}

    def find(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for main, alias in pairs:
        a, b = find(main), find(alias)
        if a == b or any(scripts[b].get(s, n) != n for s, n in scripts[a].items()):
            continue
        parent[b] = a
        scripts[a].update(scripts.pop(b))
    members: defaultdict[str, set[str]] = defaultdict(set)
    for n in names:
        members[find(n)].add(n)
    return {n: frozenset(members[find(n)]) for n in names}


def test_artists_join_as_every_pair_joined_again_would() -> None:
    """The joins made again among the names a new pair reaches give, after every credit, the sets that joining
    every pair in sorted order gives (the rule that makes ids independent of row order)."""
    rng = random.Random(30)
    for _ in range(200):
        artists, seen = Artists(), []
        for printed in (rng.choice(PRINTED) for _ in range(rng.randint(1, 30))):
            for credit in _credits(printed):
                artists.add(credit)
                seen.append(credit)
            expected = _joined_from_scratch(seen)
            assert {n: frozenset(artists.names_of(n)) for n in expected} == expected, seen
            by_set: dict[frozenset[str], set[str]] = defaultdict(set)
            for name, names in expected.items():
                by_set[names].add(artists.id_of(name))
            assert all(len(ids) == 1 for ids in by_set.values())  # one id per artist
            assert len({next(iter(ids)) for ids in by_set.values()}) == len(by_set)  # and none shared


def test_a_new_name_or_alias_costs_the_same_however_many_artists_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linking 10M rows meets tens of thousands of artists: a name, or an alias joining two, reads the scripts of
    the names it touches, not of every name known (re-joining every name on each was quadratic: 201 of the 209 s
    of linking 30k rows)."""
    calls = 0

    def counted(name: str) -> str:
        nonlocal calls
        calls += 1
        return script_of(name)

    monkeypatch.setattr(linker, "script_of", counted)
    artists = Artists()
    for n in range(2000):
        for credit in _credits(f"Artist Number {n}"):
            artists.add(credit)
        artists.id_of(credit.main)
    assert calls <= 2 * 2000
    calls = 0
    for credit in _credits("화사 (HWASA)"):  # a pair: its two names joined again, no other
        artists.add(credit)
    assert artists.id_of("hwasa") == artists.id_of("화사")
    for credit in _credits("Artist Number 5000"):
        artists.add(credit)
    artists.id_of(credit.main)
    assert calls <= 10


@pytest.mark.parametrize("name", ["_APPEARANCES", "_PLOTTED"])
def test_a_recording_page_reads_the_artist_index_in_its_order(tmp_path: Path, name: str) -> None:
    """A recording's appearances are read one artist at a time, by the primary key of `appearance_artists` in the
    page's order: no sort of every row of the artist (372,434 rows for the heaviest at 10M) before the LIMIT. Each
    with its row, in the same pass (the appearance, its chart and variant by their keys)."""
    from chartgw.index.identity import routes

    db = index.open_index(tmp_path / "index.sqlite")
    try:
        plan = [row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {getattr(routes, name).sql}",
                                              [1, "[1]", "[1]", None, None, 101])]
    finally:
        db.close()
    assert plan[0].startswith("SEARCH k USING PRIMARY KEY (artist_id=?)"), plan
    assert {"SEARCH a USING PRIMARY KEY (chart_id=? AND chart_date=? AND track_id=?)",
            "SEARCH c USING INTEGER PRIMARY KEY (rowid=?)", "SEARCH v USING INTEGER PRIMARY KEY (rowid=?)"} <= set(plan), plan
    assert not any("TEMP B-TREE" in step or (step.startswith("SCAN") and "json_each" not in step) for step in plan), plan
