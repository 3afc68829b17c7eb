"""DJ Mag Top 100: request shapes, the real derived 2025 CSV (exact rows), list pages in the JSON-LD
form and the older markup, per-DJ pages, the rule that a slug-made name never replaces a real one,
rendered samples read back, and the refusals (bot check, empty, changed layout, truncated, wrong year)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chartgw.demo.replay import request_key
from chartgw.demo.samples import dj_rankings as samples
from chartgw.upstreams import UpstreamFormatError, djmag
from chartgw.upstreams.djmag import DjProfile, DjRankEntry, ParsedList

CSV = "djmag/DERIVED-djmag-top100-2025.csv"


def _entry(rank: int, name: str, slug: str, year: int = 2025, from_slug: bool = False,
           change: djmag.Change = None, image: str | None = None) -> DjRankEntry:
    return DjRankEntry(rank=rank, name=name, name_from_slug=from_slug, slug=slug, country=None, genre=None,
                       image=image, change=change, url=f"https://djmag.com/top100djs/{year}/{rank}/{slug}")


# --- requests ---------------------------------------------------------------------------------------------


def test_requests_use_the_site_paths() -> None:
    assert djmag.list_request().path == "/top100djs"
    assert djmag.list_request(2024).path == "/top100djs/2024"
    assert djmag.list_request(2024).upstream == "DJMAG"
    assert dict(djmag.list_request().headers)["User-Agent"].startswith("Mozilla/5.0")
    legacy = djmag.legacy_list_request(2019)
    assert (legacy.path, legacy.params) == ("/top100dj", (("year", "2019"),))
    assert djmag.dj_request(2025, 4, "dimitri-vegas-mike").path == "/top100djs/2025/4/dimitri-vegas-mike"
    assert djmag.dj_url(2025, 1, "david-guetta") == "https://djmag.com/top100djs/2025/1/david-guetta"
    assert djmag.dj_request_for(_entry(18, "W&W", "ww")).path == "/top100djs/2025/18/ww"
    old = DjRankEntry(rank=1, name="Hardwell", name_from_slug=False, slug="hardwell", country=None, genre=None,
                      image=None, change=None, url="https://djmag.com/top-100-djs/poll-2015-hardwell")
    assert djmag.dj_request_for(old).path == "/top-100-djs/poll-2015-hardwell"


@pytest.mark.parametrize("call", [
    lambda: djmag.list_request(1990), lambda: djmag.dj_path(2025, 0, "x"), lambda: djmag.dj_path(2025, 101, "x"),
    lambda: djmag.dj_path(2025, 1, ""), lambda: djmag.dj_path(2025, 1, "a/b"),
    lambda: djmag.dj_request_for(DjRankEntry(rank=1, name="X", name_from_slug=False, slug="x", country=None,
                                             genre=None, image=None, change=None, url="https://example.com/x")),
])
def test_bad_addresses_are_refused(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


# --- the real derived CSV ---------------------------------------------------------------------------------


def test_real_derived_csv_exact_rows(shared_upstream: Path) -> None:
    parsed = djmag.parse_derived_csv((shared_upstream / CSV).read_bytes())
    assert (parsed.year, parsed.source, parsed.complete, len(parsed.entries)) == (2025, "csv", True, 100)
    assert [e.rank for e in parsed.entries] == list(range(1, 101))
    assert all(e.name_from_slug for e in parsed.entries)  # every name is rebuilt from a slug
    assert parsed.entries[0] == _entry(1, "David Guetta", "david-guetta", from_slug=True)
    assert parsed.entries[1] == _entry(2, "Martin Garrix", "martin-garrix", from_slug=True)
    assert parsed.entries[3] == _entry(4, "Dimitri Vegas Mike", "dimitri-vegas-mike", from_slug=True)
    assert parsed.entries[17] == _entry(18, "Ww", "ww", from_slug=True)
    assert parsed.entries[27] == _entry(28, "R3Hab", "r3hab", from_slug=True)
    assert parsed.entries[60] == _entry(61, "Above Beyond", "above-beyond", from_slug=True)
    assert parsed.entries[69] == _entry(70, "Chainsmokers", "chainsmokers", from_slug=True)
    assert parsed.entries[99] == _entry(100, "Marlon Hoffstadt", "marlon-hoffstadt", from_slug=True)
    assert djmag.parse_derived_csv((shared_upstream / CSV).read_bytes(), 2025).year == 2025


def test_real_derived_csv_of_another_year_is_refused(shared_upstream: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="asked for the 2024 poll"):
        djmag.parse_derived_csv((shared_upstream / CSV).read_bytes(), 2024)


def test_sample_pool_is_the_real_2025_list(shared_upstream: Path) -> None:
    real = djmag.parse_derived_csv((shared_upstream / CSV).read_bytes())
    pool = samples.year_ranking(2025)
    assert [(r.rank, r.dj.slug) for r in pool] == [(e.rank, e.slug) for e in real.entries]
    # the pool's names are the real ones: the CSV's are what their slugs give back
    assert all(djmag.name_from_slug(r.dj.slug) == e.name for r, e in zip(pool, real.entries, strict=True))
    assert pool[3].dj.name == "Dimitri Vegas & Like Mike" and pool[17].dj.name == "W&W"


@pytest.mark.parametrize("body,reason", [
    (b"", "empty"),
    (b"Year,Rank,Name\n2025,1,David Guetta\n", "header"),
    (b"Year,Rank,DJ Name\n", "no rows"),
    (b"Year,Rank,DJ Name\n2025,one,David Guetta\n", "line 2"),
    (b"Year,Rank,DJ Name\n2025,1,David Guetta\n2025,3,Alok\n", "ranks missing"),
    (b"Year,Rank,DJ Name\n2025,1,David Guetta\n2025,1,Alok\n", "twice"),
    (b"Year,Rank,DJ Name\n2025,1,David Guetta\n2024,2,Alok\n2025,3,Afrojack\n", "rows of 2024"),
])
def test_broken_csv_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        djmag.parse_derived_csv(body)


# --- JSON-LD list pages -----------------------------------------------------------------------------------


def _jsonld_page(items: list[dict[str, object]], links: str = "", graph: bool = True, raw: str | None = None) -> bytes:
    """A list page as the 2025 scrapers describe it: the ItemList inside `@graph`, names only in links."""
    item_list = {"@type": "ItemList", "itemListElement": items}
    data: object = {"@context": "https://schema.org",
                    "@graph": [{"@type": "WebPage", "name": "Top 100 DJs"}, item_list]} if graph else item_list
    script = raw if raw is not None else json.dumps(data)
    return (f'<!DOCTYPE html><html lang="en"><head><title>Top 100 DJs | DJ Mag</title>'
            f'<script type="application/ld+json">{script}</script></head>'
            f"<body><main>{links}</main></body></html>").encode()


def _item(rank: int, slug: str, year: int = 2025) -> dict[str, object]:
    return {"@type": "ListItem", "position": rank, "url": f"https://djmag.com/top100djs/{year}/{rank}/{slug}"}


ITEMS = [_item(1, "david-guetta"), _item(2, "martin-garrix"), _item(3, "alok"), _item(4, "dimitri-vegas-mike"),
         _item(5, "armin-van-buuren")]
LINKS = (
    '<a href="/top100djs/2025/1/david-guetta">1</a><a href="/top100djs/2025/1/david-guetta">David Guetta</a>'
    '<a href="https://djmag.com/top100djs/2025/2/martin-garrix"><span>[Martin Garrix]</span></a>'
    '<a href="/top100djs/2025/4/dimitri-vegas-mike"><img src="/dvlm.jpg" alt="Dimitri Vegas &amp; Like Mike"></a>'
    '<a href="/top100djs/2025/5/armin-van-buuren/">Armin van Buuren</a>'
)


def test_jsonld_list_names_from_links_and_slugs() -> None:
    parsed = djmag.parse_list(_jsonld_page(ITEMS, LINKS))
    assert (parsed.year, parsed.source, parsed.complete, len(parsed.entries)) == (2025, "json-ld", False, 5)
    assert parsed.entries[0] == _entry(1, "David Guetta", "david-guetta")  # the rank badge link is skipped
    assert parsed.entries[1] == _entry(2, "Martin Garrix", "martin-garrix")
    assert parsed.entries[2] == _entry(3, "Alok", "alok", from_slug=True)  # no link: from the slug, flagged
    assert parsed.entries[3] == _entry(4, "Dimitri Vegas & Like Mike", "dimitri-vegas-mike")  # img alt
    assert parsed.entries[4] == _entry(5, "Armin van Buuren", "armin-van-buuren")


def test_jsonld_item_list_outside_a_graph_and_unordered() -> None:
    parsed = djmag.parse_list_jsonld(_jsonld_page(list(reversed(ITEMS)), LINKS, graph=False), 2025)
    assert [e.rank for e in parsed.entries] == [1, 2, 3, 4, 5]
    assert parsed.entries[3].name == "Dimitri Vegas & Like Mike"


def test_jsonld_picks_the_item_list_of_dj_pages() -> None:
    related = {"@type": "ItemList", "itemListElement": [{"position": 1, "url": "https://djmag.com/news/some-news"}]}
    script = json.dumps({"@graph": [related, {"@type": "ItemList", "itemListElement": ITEMS}]})
    parsed = djmag.parse_list(_jsonld_page([], LINKS, raw=script))
    assert [e.slug for e in parsed.entries][:2] == ["david-guetta", "martin-garrix"]


def test_jsonld_item_names_and_images_are_used_when_present() -> None:
    items = [{**_item(1, "fisher"), "name": "FISHER", "image": {"url": "//djmag.com/f.jpg"}}]
    (entry,) = djmag.parse_list(_jsonld_page(items)).entries
    assert (entry.name, entry.name_from_slug, entry.image) == ("FISHER", False, "https://djmag.com/f.jpg")


@pytest.mark.parametrize("body,reason", [
    (_jsonld_page(ITEMS, LINKS, raw='{"@graph": [{"@type": "ItemList", "itemListElement": [{"posit'), "not JSON"),
    (_jsonld_page([]), "no itemListElement"),
    (_jsonld_page([{"position": 1, "url": "https://djmag.com/news/some-article"}]), "not a /top100djs"),
    (_jsonld_page([{"url": "https://djmag.com/top100djs/2025/1/david-guetta"}]), "no position"),
    (_jsonld_page([ITEMS[0], ITEMS[1], ITEMS[3]]), "ranks missing"),
    (_jsonld_page(ITEMS[1:]), "not a Top 100"),
    (_jsonld_page([ITEMS[0], ITEMS[1], _item(3, "alok", 2024)]), "links to poll 2024"),
    (_jsonld_page(["not an item"]), "not an object"),  # type: ignore[list-item]
])
def test_broken_jsonld_lists_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        djmag.parse_list(body)


def test_jsonld_list_of_another_year_than_asked_is_refused() -> None:
    """`/top100djs/2026` before that poll may well answer the latest list: that is not 2026's."""
    with pytest.raises(UpstreamFormatError, match="asked for the 2026 poll, the page is the 2025 poll"):
        djmag.parse_list(_jsonld_page(ITEMS, LINKS), 2026)


# --- the older markup -------------------------------------------------------------------------------------


def _markup_row(rank: int, href: str, name: str, movement: str, image: str | None = None) -> str:
    figure = (f'<div class="views-field views-field-field-media"><div class="field-content"><a href="{href}">'
              f'<div class="media"><figure class="media--image"><a href="{href}"><img src="{image}" alt="{name}" />'
              f'</a></figure></div></a></div></div>') if image else ""
    return (f'<div class="panel-pane pane-views-row newtop100--section"><div class="container_with_line"><article>'
            f'{figure}<div class="views-field views-field-field-top100-position"><div class="field-content">{rank}'
            f'</div></div><div class="views-field views-field-field-top100-places"><div class="field-content">'
            f'<div class="top100dj-title-bar"><div class="top100dj-position">{rank}</div><div class="top100dj-name">'
            f'<a href="{href}">{name}</a></div><div class="top100dj-movement">{movement}</div></div></div></div>'
            f'</article></div></div>\n')


def _markup_page(rows: str, title: str = "Top 100 DJs") -> bytes:
    return (f'<!DOCTYPE html><html><head><title>{title} | DJ Mag</title></head><body>'
            f'<section class="top100dj--newlayout">{rows}</section></body></html>').encode()


def test_markup_list_of_2021_style_links() -> None:
    rows = "".join([
        _markup_row(1, "/top100djs/2021/1/david-guetta", "David Guetta", "Up 1",
                    "https://djmag.com/sites/default/files/top100/djs/image/guetta.jpg"),
        _markup_row(2, "/top100djs/2021/2/martin-garrix", "Martin Garrix", "Down 1"),
        _markup_row(3, "/top100djs/2021/3/armin-van-buuren", "Armin Van Buuren", "Non Mover"),
        _markup_row(4, "/top100djs/2021/4/alok", "Alok", "New Entry"),
        _markup_row(5, "/top100djs/2021/5/dimitri-vegas-mike", "Dimitri Vegas &amp; Like Mike", "Re-entry"),
        _markup_row(6, "/top100djs/2021/6/ww", "W&amp;W", '<i class="djmi djmi-solid-arrow-fat-down"></i> 3'),
    ])
    parsed = djmag.parse_list(_markup_page(rows))
    assert (parsed.year, parsed.source, len(parsed.entries)) == (2021, "markup", 6)
    assert parsed.entries[0] == _entry(1, "David Guetta", "david-guetta", 2021, change=1,
                                       image="https://djmag.com/sites/default/files/top100/djs/image/guetta.jpg")
    assert [(e.name, e.change) for e in parsed.entries[1:]] == [
        ("Martin Garrix", -1), ("Armin Van Buuren", 0), ("Alok", "new"), ("Dimitri Vegas & Like Mike", "re-entry"),
        ("W&W", -3)]
    assert parsed.entries[4].slug == "dimitri-vegas-mike" and not parsed.entries[4].name_from_slug


def test_markup_list_of_2015_poll_links_takes_the_year_from_them() -> None:
    """The 2015 page linked `/top-100-djs/poll-2015-<slug>` (a row printed in public code)."""
    rows = (_markup_row(1, "/top-100-djs/poll-2015-dimitri-vegas-mike", "Dimitri Vegas &amp; Like Mike", "Up 1",
                        "https://djmag.com/sites/default/files/styles/djmag_landscape/public/top100/djs/image/DVLM.png")
            + _markup_row(2, "/top-100-djs/poll-2015-hardwell", "Hardwell", "Down 1"))
    parsed = djmag.parse_list_markup(_markup_page(rows), 2015)
    first = parsed.entries[0]
    assert (first.rank, first.name, first.slug, first.change) == (
        1, "Dimitri Vegas & Like Mike", "dimitri-vegas-mike", 1)
    assert first.url == "https://djmag.com/top-100-djs/poll-2015-dimitri-vegas-mike"
    assert first.image and first.image.endswith("/DVLM.png")
    assert parsed.entries[1].change == -1


def test_markup_list_without_year_links_takes_it_from_the_title() -> None:
    rows = _markup_row(1, "/content/carl-cox", "Carl Cox", "Up 2")
    parsed = djmag.parse_list(_markup_page(rows, "Top 100 DJs 2008"))
    assert (parsed.year, parsed.entries[0].slug) == (2008, "carl-cox")
    with pytest.raises(UpstreamFormatError, match="states no poll year"):
        djmag.parse_list(_markup_page(rows))


@pytest.mark.parametrize("text,arrow,change", [
    ("Up 1", None, 1), ("Down 12", None, -12), ("UP 3", None, 3), ("Non Mover", None, 0), ("New Entry", None, "new"),
    ("new", None, "new"), ("Re-entry", None, "re-entry"), ("Re-Entry", None, "re-entry"), ("5", True, -5),
    ("5", False, 5), ("5", None, None), ("", None, None), (None, None, None), ("+4", None, 4), ("-2", None, -2),
])
def test_parse_change(text: str | None, arrow: bool | None, change: djmag.Change) -> None:
    assert djmag.parse_change(text, arrow) == change


# --- per-DJ pages -----------------------------------------------------------------------------------------

# Our own pages in the form of the 2025 scraper's fixtures: the profile article, its intro labels, body
# paragraphs and the og:description "Position N - <change> | ..." (one page with the head, one without).
GUETTA = b"""<!DOCTYPE html><html><head>
<meta property="og:title" content="David Guetta | DJ Mag" />
<meta property="og:url" content="https://djmag.com/top100djs/2025/1/david-guetta" />
<meta property="og:image" content="https://djmag.com/sites/default/files/top100/guetta-2025.jpg" />
<meta property="og:description" content="Position 1 - up 1 | Four decades in, David Guetta still works every day." />
</head><body><article class="node node--type-top100-dj-poll">
  <div class="field field--name-field-intro">
    <p><strong>From:</strong> Paris, France</p>
    <p><strong>DJ style:</strong> All forms of dance music</p>
    <p><strong>Best known for: </strong>Two Ibiza residencies and chart domination</p>
  </div>
  <div class="field field--name-body"><div class="field__item">
    <p>Four decades in, David Guetta still works every day.</p>
    <div class="advert"><p>Advertisement</p></div>
    <p>He released more than a single a month this year.</p>
  </div></div>
</article></body></html>"""
WITTE = b"""<article class="node node--type-top100-dj-poll">
  <div class="field field--name-field-intro">
    <p><strong>From:</strong> Ghent, Belgium</p>
    <p><strong>DJ style:</strong> Techno</p>
    <p><strong>Best known for:</strong> Taking techno to the main stage</p>
  </div>
  <div class="field field--name-body"><div class="field__item">
    <p>Charlotte de Witte opened and closed a festival main stage on one day.</p>
  </div></div>
</article>"""


def test_dj_page_with_head() -> None:
    assert djmag.parse_dj_page(GUETTA) == DjProfile(
        name="David Guetta", year=2025, rank=1, change=1, home="Paris, France", country="France",
        genre="All forms of dance music", best_known_for="Two Ibiza residencies and chart domination",
        image="https://djmag.com/sites/default/files/top100/guetta-2025.jpg",
        bio="Four decades in, David Guetta still works every day.\n\nHe released more than a single a month this year.",
        url="https://djmag.com/top100djs/2025/1/david-guetta")


def test_dj_page_fragment_without_head_gives_nulls() -> None:
    assert djmag.parse_dj_page(WITTE) == DjProfile(
        name=None, year=None, rank=None, change=None, home="Ghent, Belgium", country="Belgium", genre="Techno",
        best_known_for="Taking techno to the main stage",
        image=None, bio="Charlotte de Witte opened and closed a festival main stage on one day.", url=None)


def test_dj_page_with_only_an_h1_and_no_body() -> None:
    page = (b'<html><body><h1>Mau P</h1><article class="node node--type-top100-dj-poll">'
            b'<div class="field field--name-field-intro"><p><strong>DJ style:</strong> Tech house</p></div>'
            b'</article></body></html>')
    profile = djmag.parse_dj_page(page)
    assert (profile.name, profile.genre, profile.home, profile.country, profile.bio) == (
        "Mau P", "Tech house", None, None, None)


@pytest.mark.parametrize("home,country", [
    ("Paris, France", "France"), ("Breda, The Netherlands", "Netherlands"), ("Dumfries, UK", "United Kingdom"),
    ("Wales", "United Kingdom"), ("Born in Russia, raised in Germany", "Germany"), ("Chicago, USA", "United States"),
    ("Istanbul, Turkey", "Türkiye"), ("The Netherlands.", "Netherlands"), ("Rotterdam", None), ("“Unknown.”", None),
    (None, None),
])
def test_country_of_home(home: str | None, country: str | None) -> None:
    assert djmag.country_of(home) == country


# --- names: a slug never overwrites a real name -----------------------------------------------------------


def test_slug_helpers() -> None:
    assert djmag.slugify("Dimitri Vegas & Like Mike") == "dimitri-vegas-like-mike"
    assert djmag.slugify("Tiësto") == "tiesto"
    assert djmag.slugify("Fred again..") == "fred-again"
    assert djmag.name_from_slug("dimitri-vegas-mike") == "Dimitri Vegas Mike"


@pytest.mark.parametrize("current,current_lossy,candidate,candidate_lossy,kept", [
    ("Dimitri Vegas Mike", True, "Dimitri Vegas & Like Mike", False, ("Dimitri Vegas & Like Mike", False)),
    ("Dimitri Vegas & Like Mike", False, "Dimitri Vegas Mike", True, ("Dimitri Vegas & Like Mike", False)),
    ("Dimitri Vegas & Like Mike", False, "Dimitri Vegas Like Mike", False, ("Dimitri Vegas & Like Mike", False)),
    ("Ww", True, "Ww", True, ("Ww", True)),
    (None, False, "Ww", True, ("Ww", True)),
    ("W&W", False, None, False, ("W&W", False)),
])
def test_keep_real_name(current: str | None, current_lossy: bool, candidate: str | None, candidate_lossy: bool,
                        kept: tuple[str, bool]) -> None:
    assert djmag.keep_real_name(current, current_lossy, candidate, candidate_lossy) == kept


def test_merge_profile_keeps_the_real_name(shared_upstream: Path) -> None:
    lossy = djmag.parse_derived_csv((shared_upstream / CSV).read_bytes()).entries[3]
    page = GUETTA.replace(b"David Guetta |", b"Dimitri Vegas &amp; Like Mike |")
    profile = djmag.parse_dj_page(page.replace(b"2025/1/david-guetta", b"2025/4/dimitri-vegas-mike"))
    merged = djmag.merge_profile(lossy, profile)
    assert (merged.name, merged.name_from_slug, merged.slug) == (
        "Dimitri Vegas & Like Mike", False, "dimitri-vegas-mike")
    assert (merged.country, merged.genre, merged.change) == ("France", "All forms of dance music", 1)
    # a page without a name, or a list that already has the real name, leaves the list's name alone
    assert djmag.merge_profile(lossy, djmag.parse_dj_page(WITTE)).name == "Dimitri Vegas Mike"
    real = _entry(4, "Dimitri Vegas & Like Mike", "dimitri-vegas-mike", change=-2)
    renamed = djmag.merge_profile(real, profile)
    assert (renamed.name, renamed.change) == ("Dimitri Vegas & Like Mike", -2)  # the list's own change stays
    with pytest.raises(ValueError, match="does not describe 'alok'"):
        djmag.merge_profile(_entry(3, "Alok", "alok"), djmag.parse_dj_page(GUETTA))


def test_derive_changes_from_earlier_years() -> None:
    def listing(year: int, slugs: list[str]) -> ParsedList:
        entries = [_entry(rank, djmag.name_from_slug(slug), slug, year, True) for rank, slug in enumerate(slugs, 1)]
        return ParsedList(year=year, source="csv", complete=False, entries=entries)

    current = listing(2025, ["a", "b", "c", "d"])
    current.entries[0].change = 5  # what a page stated stays
    derived = djmag.derive_changes(current, [listing(2024, ["b", "a", "x"]), listing(2022, ["c"])])
    assert [e.change for e in derived.entries] == [5, -1, "re-entry", "new"]
    assert djmag.derive_changes(current, [listing(2022, ["c"])]) is current  # no year before: unchanged


# --- refusals ---------------------------------------------------------------------------------------------

CHALLENGE = (b'<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>'
             b'<div id="challenge-running">Checking if the site connection is secure</div>'
             b'<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>')
NEWS = (b'<!DOCTYPE html><html><head><title>News | DJ Mag</title></head><body><article class="node--type-article">'
        b'<h1>Top 100 DJs 2025: the results</h1><p>Voting is now open.</p></article></body></html>')


@pytest.mark.parametrize("parse", [djmag.parse_list, djmag.parse_list_jsonld, djmag.parse_list_markup,
                                   djmag.parse_dj_page])
@pytest.mark.parametrize("body,reason", [(b"", "empty"), (b"  \n", "empty"), (CHALLENGE, "bot check")])
def test_empty_and_bot_check_pages_are_refused(parse: object, body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        parse(body)  # type: ignore[operator]


def test_other_pages_are_refused() -> None:
    with pytest.raises(UpstreamFormatError, match="neither a JSON-LD ItemList nor"):
        djmag.parse_list(NEWS)
    with pytest.raises(UpstreamFormatError, match="no JSON-LD ItemList"):
        djmag.parse_list_jsonld(NEWS)
    with pytest.raises(UpstreamFormatError, match="no div.top100dj-title-bar"):
        djmag.parse_list_markup(NEWS)
    with pytest.raises(UpstreamFormatError, match="not a Top 100 DJ page"):
        djmag.parse_dj_page(NEWS)
    with pytest.raises(UpstreamFormatError, match="no div.top100dj-name a"):
        djmag.parse_list_markup(_markup_page(_markup_row(1, "", "", "Up 1")))


# --- rendered samples -------------------------------------------------------------------------------------


@pytest.mark.parametrize("year", samples.sample_years())
def test_rendered_jsonld_pages_read_back(year: int) -> None:
    rows = samples.year_ranking(year)
    parsed = djmag.parse_list(samples.render_list_page(year), year)
    assert (parsed.year, parsed.source, parsed.complete) == (year, "json-ld", True)
    assert [(e.rank, e.name, e.slug, e.name_from_slug, e.change) for e in parsed.entries] == [
        (r.rank, r.dj.name, r.dj.slug, False, None) for r in rows]
    assert parsed.entries[0].url == djmag.dj_url(year, 1, rows[0].dj.slug)


def test_rendered_markup_pages_read_back_with_changes() -> None:
    rows = samples.year_ranking(2023)
    parsed = djmag.parse_list(samples.render_list_markup(2023))
    assert (parsed.year, parsed.source, len(parsed.entries)) == (2023, "markup", 100)
    assert [(e.rank, e.name, e.change, e.image) for e in parsed.entries] == [
        (r.rank, r.dj.name, r.change, samples.image_url(2023, r.dj)) for r in rows]
    assert {type(e.change) for e in parsed.entries} == {int, str}


def test_sample_years_have_movers_new_entries_and_re_entries() -> None:
    changes = [row.change for year in samples.sample_years() for row in samples.year_ranking(year)]
    assert {"new", "re-entry"} <= set(changes)
    assert any(isinstance(c, int) and c > 0 for c in changes) and any(isinstance(c, int) and c < 0 for c in changes)
    assert samples.year_ranking(2024) == samples.year_ranking(2024)  # deterministic
    assert samples.sample_years(1) == [2022, 2023, 2024, 2025, 2026]


def test_rendered_dj_pages_read_back() -> None:
    for row in samples.year_ranking(2024)[:20] + samples.year_ranking(2022)[60:]:
        profile = djmag.parse_dj_page(samples.render_dj_page(row))
        assert (profile.name, profile.year, profile.rank, profile.change) == (row.dj.name, 2024 if row.year == 2024
                                                                              else 2022, row.rank, row.change)
        assert (profile.home, profile.genre, profile.image) == (row.dj.home, row.dj.style,
                                                                samples.image_url(row.year, row.dj))
        assert profile.country == djmag.country_of(row.dj.home)
        assert profile.bio and "Advertisement" not in profile.bio


def test_replay_table_holds_every_page() -> None:
    replies = samples.djmag_replies()
    latest = djmag.parse_list(replies[request_key(djmag.list_request())].body)
    assert latest.year == 2025
    for year in samples.sample_years():
        parsed = djmag.parse_list(replies[request_key(djmag.list_request(year))].body, year)
        for entry in parsed.entries[::17]:
            page = replies[request_key(djmag.dj_request_for(entry))]
            assert djmag.parse_dj_page(page.body).name == entry.name
    assert len(replies) == 1 + 5 * 101


def test_samples_module_imports_no_platform_modules() -> None:
    code = ("import sys, chartgw.demo.samples.dj_rankings; print(sorted(m for m in sys.modules "
            "if m.startswith(('chartgw.groups', 'chartgw.demo.', 'chartgw.crawl.runner')) "
            "and not m.startswith(('chartgw.demo.samples', 'chartgw.demo.replay'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
