"""The diff and summary rules of chartgw.store.diff, on hand-made entries (pure: no store, no clock)."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from chartgw.store import StoredEntry
from chartgw.store.diff import Identity, diff, entered, identity, summarize


def chart(*names: str, ids: dict[str, str] | None = None) -> list[StoredEntry]:
    """Entries ranked in the order given; an entry's item id from `ids` when listed there."""
    ids = ids or {}
    return [StoredEntry(rank, name.lower(), "artist", ids.get(name), json.dumps({"title": name, "rank": rank}).encode())
            for rank, name in enumerate(names, start=1)]


def lines_of(previous: list[StoredEntry], current: list[StoredEntry]) -> list[tuple[str, int | None, int | None, str]]:
    return [(line.status, line.rank, line.previous_rank, json.loads(line.record)["title"])
            for line in diff(previous, current)]


def decoded(summary: Any) -> dict[str, Any]:
    return msgspec.json.decode(msgspec.json.encode(summary))


def test_diff_lists_the_new_chart_in_order_then_what_went_out() -> None:
    before = chart("A", "B", "C", "D")
    after = chart("C", "A", "E", "B")
    assert lines_of(before, after) == [
        ("up", 1, 3, "C"), ("down", 2, 1, "A"), ("new", 3, None, "E"), ("down", 4, 2, "B"),
        ("out", None, 4, "D")]
    assert [line.change for line in diff(before, after)] == [2, -1, None, -2, None]


def test_an_unchanged_chart_is_all_same() -> None:
    lines = diff(chart("A", "B"), chart("A", "B"))
    assert [line.status for line in lines] == ["same", "same"]
    summary = summarize(lines, first=False)
    assert (summary.changed, summary.entries_in, summary.entries_out, summary.moved, summary.new_number_one) == (
        False, 0, 0, 0, False)


def test_entries_match_by_item_id_before_names() -> None:
    """A renamed track with the same item id is the same entry; two tracks of one title with different ids are not."""
    before = chart("Song", "Other", ids={"Song": "id-1", "Other": "id-2"})
    after = chart("Song (Remastered)", "Song", ids={"Song (Remastered)": "id-1", "Song": "id-3"})
    assert lines_of(before, after) == [("same", 1, 1, "Song (Remastered)"), ("new", 2, None, "Song"),
                                       ("out", None, 2, "Other")]
    assert identity(after[0]) == Identity("id-1", "", "") and identity(chart("x")[0]) == Identity(None, "x", "artist")


def test_an_entry_listed_twice_is_matched_occurrence_by_occurrence() -> None:
    before = chart("A", "B", "A")
    after = chart("A", "A", "C")
    assert lines_of(before, after) == [("same", 1, 1, "A"), ("up", 2, 3, "A"), ("new", 3, None, "C"),
                                       ("out", None, 2, "B")]


def test_summary_names_number_one_movers_ins_outs_and_reentries() -> None:
    before = chart(*"ABCDEFGHIJ")
    after = chart(*"JAXBCDEFGY")  # J climbs 9, A falls 1, B..G fall 2, X and Y new, H and I out
    lines = diff(before, after)
    assert entered(lines) == [Identity(None, "x", "artist"), Identity(None, "y", "artist")]
    summary = decoded(summarize(lines, first=False, reentered={Identity(None, "y", "artist")}))
    titles = lambda items: [(i["entry"]["title"], i["rank"], i["previous_rank"], i["change"]) for i in items]
    assert {k: summary[k] for k in ("entries", "changed", "entries_in", "entries_out", "moved", "reentries",
                                    "new_number_one")} == {
        "entries": 10, "changed": True, "entries_in": 2, "entries_out": 2, "moved": 8, "reentries": 1,
        "new_number_one": True}
    assert summary["number_one"] == {"rank": 1, "previous_rank": 10, "change": 9, "entry": {"title": "J", "rank": 1}}
    assert titles(summary["climbers"]) == [("J", 1, 10, 9)]
    # The biggest falls first, then the best placed of equal falls: A's one place is not among the five.
    assert titles(summary["fallers"]) == [("B", 4, 2, -2), ("C", 5, 3, -2), ("D", 6, 4, -2), ("E", 7, 5, -2),
                                          ("F", 8, 6, -2)]
    assert titles(summary["entered"]) == [("X", 3, None, None), ("Y", 10, None, None)]
    assert titles(summary["exited"]) == [("H", None, 8, None), ("I", None, 9, None)]
    assert titles(summary["reentered"]) == [("Y", 10, None, None)]


def test_a_first_snapshot_is_all_new_and_lists_are_capped() -> None:
    lines = diff([], chart(*(f"T{i}" for i in range(1, 31))))
    summary = decoded(summarize(lines, first=True))
    assert (summary["entries"], summary["entries_in"], summary["changed"], summary["new_number_one"]) == (30, 30, True, True)
    assert [i["rank"] for i in summary["entered"]] == list(range(1, 11))
    assert summary["climbers"] == summary["fallers"] == summary["exited"] == []


def test_an_empty_chart_has_no_number_one() -> None:
    summary = summarize(diff(chart("A"), []), first=False)
    assert summary.number_one is None and not summary.new_number_one and summary.entries_out == 1 and summary.entries == 0
