"""Sample DJ Mag Top 100 pages and MusicBrainz answers for /dj-rankings, in the formats of
`chartgw.upstreams.djmag` and `chartgw.upstreams.musicbrainz`.

The pool: the real 2025 Top 100 (ranks and DJ Mag's own slugs as in the derived 2025 CSV in
../shared/upstream/djmag, names as the artists write them), then 25 more real DJs who come and go.
2025 is the real order; every other year is derived from the year next to it by a seeded shuffle
(movers, drop-outs, new entries and re-entries), so a year's page always means the same list.
Homes and styles are what we know of the artists, null where we are not sure; bios, images, MBIDs and
discographies are made up but stable per DJ.

List pages are written in the current JSON-LD form (an ItemList of positions and URLs, names only in
the page's links); `render_list_markup` writes the older Drupal markup for tests.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from html import escape

from chartgw.core.countries import COUNTRIES
from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples.bodies import json_body, stable_number
from chartgw.upstreams import djmag, musicbrainz
from chartgw.upstreams.djmag import NEW, RE_ENTRY, Change

ANCHOR_YEAR = 2025
"""The year whose order is the real one; others are derived from it."""
YEARS_SHOWN = 5
HTML_TYPE = "text/html; charset=utf-8"
JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class SampleDj:
    name: str
    slug: str
    """DJ Mag's slug (lossy: "dimitri-vegas-mike")."""
    home: str | None
    style: str | None


@dataclass(frozen=True)
class SampleRank:
    year: int
    rank: int
    dj: SampleDj
    change: Change
    """Against the year before, as DJ Mag states it."""


# (slug, name, home, DJ style) of the 2025 Top 100 in rank order, then the DJs outside it.
_TOP_2025: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("david-guetta", "David Guetta", "Paris, France", "All forms of dance music"),
    ("martin-garrix", "Martin Garrix", "Amstelveen, The Netherlands", "Progressive house"),
    ("alok", "Alok", "Goiânia, Brazil", "Brazilian bass"),
    ("dimitri-vegas-mike", "Dimitri Vegas & Like Mike", "Willebroek, Belgium", "Big room"),
    ("armin-van-buuren", "Armin van Buuren", "Leiden, The Netherlands", "Trance"),
    ("timmy-trumpet", "Timmy Trumpet", "Sydney, Australia", "Big room"),
    ("fisher", "FISHER", "Gold Coast, Australia", "Tech house"),
    ("afrojack", "Afrojack", "Spijkenisse, The Netherlands", "Electro house"),
    ("charlotte-de-witte", "Charlotte de Witte", "Ghent, Belgium", "Techno"),
    ("anyma", "Anyma", "Italy", "Melodic techno"),
    ("vintage-culture", "Vintage Culture", "Mundo Novo, Brazil", "House"),
    ("peggy-gou", "Peggy Gou", "Incheon, South Korea", "House"),
    ("don-diablo", "Don Diablo", "Coevorden, The Netherlands", "Future house"),
    ("steve-aoki", "Steve Aoki", "Miami, USA", "Electro house"),
    ("hardwell", "Hardwell", "Breda, The Netherlands", "Big room"),
    ("calvin-harris", "Calvin Harris", "Dumfries, UK", "House"),
    ("black-coffee", "Black Coffee", "Durban, South Africa", "Afro house"),
    ("ww", "W&W", "Breda, The Netherlands", "Big room"),
    ("lost-frequencies", "Lost Frequencies", "Brussels, Belgium", "Deep house"),
    ("keinemusik", "Keinemusik", "Berlin, Germany", "Afro house"),
    ("tiesto", "Tiësto", "Breda, The Netherlands", "House"),
    ("reinier-zonneveld", "Reinier Zonneveld", "The Netherlands", "Techno"),
    ("kshmr", "KSHMR", "Berkeley, USA", "Big room"),
    ("alan-walker", "Alan Walker", "Bergen, Norway", "Electro house"),
    ("carl-cox", "Carl Cox", "Oldham, UK", "Techno"),
    ("oliver-heldens", "Oliver Heldens", "Rotterdam, The Netherlands", "Future house"),
    ("jamie-jones", "Jamie Jones", "Wales", "Tech house"),
    ("r3hab", "R3HAB", "Breda, The Netherlands", "Electro house"),
    ("nicky-romero", "Nicky Romero", "Amerongen, The Netherlands", "Progressive house"),
    ("claptone", "Claptone", None, "House"),
    ("skrillex", "Skrillex", "Los Angeles, USA", "Dubstep"),
    ("vini-vici", "Vini Vici", "Israel", "Psytrance"),
    ("fred-again", "Fred again..", "London, UK", "House"),
    ("swedish-house-mafia", "Swedish House Mafia", "Stockholm, Sweden", "Progressive house"),
    ("joel-corry", "Joel Corry", "Hertfordshire, UK", "House"),
    ("indira-paganotto", "Indira Paganotto", "Madrid, Spain", "Techno"),
    ("eric-prydz", "Eric Prydz", "Stockholm, Sweden", "Progressive house"),
    ("amelie-lens", "Amelie Lens", "Antwerp, Belgium", "Techno"),
    ("paul-van-dyk", "Paul van Dyk", "Berlin, Germany", "Trance"),
    ("dj-snake", "DJ Snake", "Paris, France", "Trap"),
    ("dom-dolla", "Dom Dolla", "Melbourne, Australia", "Tech house"),
    ("marshmello", "Marshmello", "Philadelphia, USA", "Future bass"),
    ("martinez-brothers", "The Martinez Brothers", "The Bronx, New York, USA", "House"),
    ("zedd", "Zedd", "Born in Russia, raised in Germany", "Electro house"),
    ("bassjackers", "Bassjackers", "Amsterdam, The Netherlands", "Big room"),
    ("john-summit", "John Summit", "Chicago, USA", "Tech house"),
    ("quintino", "Quintino", "Amsterdam, The Netherlands", "Big room"),
    ("michael-bibi", "Michael Bibi", "London, UK", "Tech house"),
    ("boris-brejcha", "Boris Brejcha", "Ludwigshafen, Germany", "Minimal techno"),
    ("korolova", "Korolova", "Ukraine", "Melodic techno"),
    ("alesso", "Alesso", "Stockholm, Sweden", "Progressive house"),
    ("james-hype", "James Hype", "Liverpool, UK", "House"),
    ("maddix", "Maddix", "Utrecht, The Netherlands", "Techno"),
    ("hugel", "HUGEL", "Marseille, France", "Afro house"),
    ("solomun", "Solomun", "Hamburg, Germany", "Deep house"),
    ("mochakk", "Mochakk", "São Carlos, Brazil", "House"),
    ("lilly-palmer", "Lilly Palmer", "Germany", "Techno"),
    ("nora-en-pure", "Nora En Pure", "Zurich, Switzerland", "Deep house"),
    ("atb", "ATB", "Freckenhorst, Germany", "Trance"),
    ("deborah-de-luca", "Deborah De Luca", "Naples, Italy", "Techno"),
    ("above-beyond", "Above & Beyond", "London, UK", "Trance"),
    ("sara-landry", "Sara Landry", "Austin, USA", "Hard techno"),
    ("nervo", "NERVO", "Melbourne, Australia", "House"),
    ("sub-zero-project", "Sub Zero Project", "The Netherlands", "Hardstyle"),
    ("kolsch", "Kölsch", "Copenhagen, Denmark", "Melodic techno"),
    ("lucas-steve", "Lucas & Steve", "Maastricht, The Netherlands", "House"),
    ("nico-moreno", "Nico Moreno", "Caen, France", "Techno"),
    ("gordo", "GORDO", "Houston, USA", "Tech house"),
    ("pawsa", "PAWSA", "London, UK", "Tech house"),
    ("chainsmokers", "The Chainsmokers", "New York, USA", "EDM"),
    ("liu", "LIU", None, None),
    ("mike-williams", "Mike Williams", "The Netherlands", "Future bounce"),
    ("artbat", "ARTBAT", "Kyiv, Ukraine", "Melodic techno"),
    ("kaaze", "KAAZE", "Sweden", "Big room"),
    ("miss-monique", "Miss Monique", "Kyiv, Ukraine", "Progressive house"),
    ("burak-yeter", "Burak Yeter", "Istanbul, Turkey", "House"),
    ("mau-p", "Mau P", "Amsterdam, The Netherlands", "Tech house"),
    ("le-twins", "Le Twins", "Canada", "Big room"),
    ("i-hate-models", "I Hate Models", "France", "Techno"),
    ("marnik", "Marnik", "Bucharest, Romania", "Big room"),
    ("chris-stussy", "Chris Stussy", "Amsterdam, The Netherlands", "House"),
    ("deadmau5", "deadmau5", "Toronto, Canada", "Progressive house"),
    ("wukong", "WUKONG", "China", "Big room"),
    ("fedde-le-grand", "Fedde Le Grand", "Utrecht, The Netherlands", "House"),
    ("ferry-corsten", "Ferry Corsten", "Rotterdam, The Netherlands", "Trance"),
    ("plastik-funk", "Plastik Funk", "Cologne, Germany", "House"),
    ("dubvision", "DubVision", "The Netherlands", "Progressive house"),
    ("b-jones", "B Jones", None, None),
    ("giuseppe-ottaviani", "Giuseppe Ottaviani", "Italy", "Trance"),
    ("cuebrick", "Cuebrick", "The Netherlands", "House"),
    ("mariana-bo", "Mariana BO", "Mexico", "Big room"),
    ("meduza", "MEDUZA", "Milan, Italy", "House"),
    ("fantasm", "Fantasm", None, None),
    ("vinai", "VINAI", "Italy", "Big room"),
    ("chris-lake", "Chris Lake", "Isle of Wight, UK", "Tech house"),
    ("faustix", "Faustix", "Denmark", "House"),
    ("honey-dijon", "Honey Dijon", "Chicago, USA", "House"),
    ("nils-van-zandt", "Nils van Zandt", "The Netherlands", "House"),
    ("topic", "Topic", "Germany", "House"),
    ("marlon-hoffstadt", "Marlon Hoffstadt", "Berlin, Germany", "House"),
)
_OUTSIDE: tuple[tuple[str, str | None, str | None], ...] = (
    ("Kygo", "Bergen, Norway", "Tropical house"), ("Steve Angello", "Stockholm, Sweden", "Progressive house"),
    ("Headhunterz", "The Netherlands", "Hardstyle"), ("Showtek", "The Netherlands", "Hardstyle"),
    ("Yellow Claw", "Amsterdam, The Netherlands", "Trap"), ("Blasterjaxx", "The Netherlands", "Big room"),
    ("Andrew Rayel", "Chișinău, Moldova", "Trance"), ("Aly & Fila", "Cairo, Egypt", "Trance"),
    ("Cosmic Gate", "Germany", "Trance"), ("Markus Schulz", "USA", "Trance"),
    ("Angerfist", "The Netherlands", "Hardcore"), ("Brennan Heart", "The Netherlands", "Hardstyle"),
    ("Da Tweekaz", "Norway", "Hardstyle"), ("Coone", "Belgium", "Hardstyle"), ("Yves V", "Belgium", "Big room"),
    ("Hannah Laing", "Scotland", "Hard house"), ("Cloonee", "London, UK", "Tech house"),
    ("Ummet Ozcan", "The Netherlands", "Big room"), ("Mike Candys", "Switzerland", "House"),
    ("Nina Kraviz", "Russia", "Techno"), ("Diplo", "USA", None), ("Kaskade", "USA", "House"),
    ("Axwell", "Sweden", "Progressive house"), ("Tchami", "France", "Future house"), ("Malaa", "France", "House"),
)


@cache
def dj_pool() -> tuple[SampleDj, ...]:
    """The 2025 Top 100 in rank order, then the 25 DJs outside it."""
    top = [SampleDj(name, slug, home, style) for slug, name, home, style in _TOP_2025]
    outside = [SampleDj(name, djmag.slugify(name), home, style) for name, home, style in _OUTSIDE]
    return tuple(top + outside)


def _next_year(order: list[SampleDj], seed: str) -> list[SampleDj]:
    """A neighbouring year: about a third of the list moves a few places and five DJs of the lower half
    trade places with DJs outside the list (so the outsiders of one year re-enter in another)."""
    rng = random.Random(seed)
    size = djmag.LIST_SIZE
    inside, outside = list(order[:size]), list(order[size:])
    for _ in range(35):
        i = rng.randrange(size)
        j = max(0, min(size - 1, i + rng.randint(-9, 9)))
        inside.insert(j, inside.pop(i))
    for _ in range(5):
        k = rng.randrange(40, size)
        m = rng.randrange(len(outside))
        inside[k], outside[m] = outside[m], inside[k]
    return inside + outside


@cache
def year_order(year: int) -> tuple[SampleDj, ...]:
    """The whole pool ordered for `year`: its Top 100 first. 2025 is the real order; a year before or
    after is derived from the year next to it."""
    if year == ANCHOR_YEAR:
        return dj_pool()
    neighbour = year + 1 if year < ANCHOR_YEAR else year - 1
    return tuple(_next_year(list(year_order(neighbour)), f"djmag-sample/{year}"))


def sample_years(variant: int = 0, count: int = YEARS_SHOWN) -> list[int]:
    """The poll years the samples publish, oldest first: `count` years up to 2025 + `variant`
    (variant n+1 is the world after one more poll)."""
    last = ANCHOR_YEAR + variant
    return list(range(last - count + 1, last + 1))


def year_ranking(year: int) -> list[SampleRank]:
    """`year`'s Top 100 with each DJ's change against the year before (places, "new" or "re-entry",
    judged over the five years before, as a page would)."""
    before = {dj.slug: rank for rank, dj in enumerate(year_order(year - 1)[: djmag.LIST_SIZE], start=1)}
    older = {dj.slug for back in range(2, 7) for dj in year_order(year - back)[: djmag.LIST_SIZE]}
    rows = []
    for rank, dj in enumerate(year_order(year)[: djmag.LIST_SIZE], start=1):
        change: Change = before[dj.slug] - rank if dj.slug in before else RE_ENTRY if dj.slug in older else NEW
        rows.append(SampleRank(year=year, rank=rank, dj=dj, change=change))
    return rows


# --- DJ Mag pages -----------------------------------------------------------------------------------------


def image_url(year: int, dj: SampleDj) -> str:
    """A made-up but stable image path in the style of the site's Drupal files."""
    return f"https://djmag.com/sites/default/files/styles/djm_23_961x540/public/top100/djs/{year}/{dj.slug}.jpg"


def _page(title: str, head: str, body: str) -> bytes:
    page = (f'<!DOCTYPE html>\n<html lang="en" dir="ltr">\n<head>\n<meta charset="utf-8" />\n'
            f"<title>{escape(title)}</title>\n{head}</head>\n<body>\n{body}</body>\n</html>\n")
    return page.encode("utf-8")


def render_list_page(year: int, current: bool = False) -> bytes:
    """The JSON-LD form of `year`'s list page (`/top100djs/{year}`, or `/top100djs` when `current`):
    an ItemList of positions and DJ URLs, and one card per DJ whose link text is the DJ's name."""
    rows = year_ranking(year)
    page_url = djmag.SITE + djmag.list_path(None if current else year)
    graph = {"@context": "https://schema.org", "@graph": [
        {"@type": "WebPage", "@id": page_url, "url": page_url, "name": f"Top 100 DJs {year}"},
        {"@type": "ItemList", "numberOfItems": len(rows), "itemListElement": [
            {"@type": "ListItem", "position": row.rank, "url": djmag.dj_url(year, row.rank, row.dj.slug)}
            for row in rows]},
    ]}
    cards = "".join(
        f'<div class="top100-card"><a class="top100-card__rank" href="{djmag.dj_path(year, r.rank, r.dj.slug)}">'
        f'{r.rank}</a><a class="top100-card__name" href="{djmag.dj_path(year, r.rank, r.dj.slug)}">'
        f"{escape(r.dj.name)}</a></div>\n"
        for r in rows
    )
    head = (f'<link rel="canonical" href="{page_url}" />\n'
            f'<script type="application/ld+json">{json.dumps(graph, ensure_ascii=False)}</script>\n')
    body = f'<main><h1>Top 100 DJs {year}</h1>\n<section class="top100-list">\n{cards}</section></main>\n'
    return _page(f"Top 100 DJs {year} | DJ Mag", head, body)


def _movement(change: Change) -> str:
    if change == NEW:
        return "New Entry"
    if change == RE_ENTRY:
        return "Re-entry"
    if change == 0:
        return "Non Mover"
    return f"Up {change}" if isinstance(change, int) and change > 0 else f"Down {-int(change or 0)}"


def render_list_markup(year: int) -> bytes:
    """`year`'s list in the older Drupal markup (panel panes of `article`s with a title bar)."""
    articles = "".join(
        f'<article>\n<div class="views-field views-field-field-media"><div class="field-content">'
        f'<figure class="media--image"><a href="{djmag.dj_path(year, r.rank, r.dj.slug)}">'
        f'<img src="{image_url(year, r.dj)}" alt="{escape(r.dj.name)}" /></a></figure></div></div>\n'
        f'<div class="views-field views-field-field-top100-position"><div class="field-content">{r.rank}</div></div>\n'
        f'<div class="views-field views-field-field-top100-places"><div class="field-content">'
        f'<div class="top100dj-title-bar"><div class="top100dj-position">{r.rank}</div>'
        f'<div class="top100dj-name"><a href="{djmag.dj_path(year, r.rank, r.dj.slug)}">{escape(r.dj.name)}</a></div>'
        f'<div class="top100dj-movement">{_movement(r.change)}</div></div></div></div>\n</article>\n'
        for r in year_ranking(year)
    )
    body = f'<section class="top100dj--newlayout"><div class="panel-pane pane-views-row">\n{articles}</div></section>\n'
    return _page(f"Top 100 DJs {year} | DJ Mag", "", body)


def _known_for(dj: SampleDj) -> str:
    return f"{dj.style} sets around the world" if dj.style else "Marathon sets around the world"


def _places(count: int) -> str:
    return "one place" if count == 1 else f"{count} places"


def _bio(row: SampleRank) -> list[str]:
    name, change = row.dj.name, row.change
    if change == NEW:
        move = f"enters the Top 100 DJs for the first time at No. {row.rank}"
    elif change == RE_ENTRY:
        move = f"returns to the Top 100 DJs at No. {row.rank}"
    elif change == 0:
        move = f"holds on to No. {row.rank}"
    elif isinstance(change, int) and change > 0:
        move = f"climbs {_places(change)} to No. {row.rank}"
    else:
        move = f"slips {_places(-int(change or 0))} to No. {row.rank}"
    where = f" from {row.dj.home}" if row.dj.home else ""
    return [f"{name} {move} in the {row.year} poll, after a year of festival headline slots and new music.",
            (f"The {(row.dj.style or 'dance music').lower()} artist{where} has played "
             f"{20 + stable_number(row.dj.slug, str(row.year)) % 140} shows in the last twelve months.")]


def render_dj_page(row: SampleRank) -> bytes:
    """A DJ's poll page: og tags (title, image, "Position N - up K | ..." description) and the profile
    article with its From / DJ style / Best known for intro and the body text."""
    url = djmag.dj_url(row.year, row.rank, row.dj.slug)
    paragraphs = _bio(row)
    change = _movement(row.change).lower()
    head = (f'<link rel="canonical" href="{url}" />\n<meta property="og:url" content="{url}" />\n'
            f'<meta property="og:title" content="{escape(row.dj.name)} | DJ Mag" />\n'
            f'<meta property="og:image" content="{image_url(row.year, row.dj)}" />\n'
            f'<meta property="og:description" content="Position {row.rank} - {change} | {escape(paragraphs[0])}" />\n')
    intro = "".join(f"<p><strong>{label}:</strong> {escape(value)}</p>\n" for label, value in (
        ("From", row.dj.home), ("DJ style", row.dj.style), ("Best known for", _known_for(row.dj))) if value)
    body_text = "".join(f"<p>{escape(p)}</p>\n" for p in paragraphs)
    body = (f'<main><h1>{escape(row.dj.name)}</h1>\n<article class="node node--type-top100-dj-poll">\n'
            f'<div class="field field--name-field-intro">\n{intro}</div>\n'
            f'<div class="field field--name-body"><div class="field__item">\n{body_text}'
            f'<div class="advert"><p>Advertisement</p></div>\n</div></div>\n</article></main>\n')
    return _page(f"{row.dj.name} | DJ Mag", head, body)


def djmag_replies(variant: int = 0, count: int = YEARS_SHOWN) -> dict[ReplayKey, Reply]:
    """Every DJ Mag page of the sample years: `/top100djs` (the latest), `/top100djs/{year}` and every
    DJ's page of every year."""
    years = sample_years(variant, count)
    replies = {request_key(djmag.list_request()): Reply(render_list_page(years[-1], current=True), 200, HTML_TYPE)}
    for year in years:
        replies[request_key(djmag.list_request(year))] = Reply(render_list_page(year), 200, HTML_TYPE)
        for row in year_ranking(year):
            key = request_key(djmag.dj_request(year, row.rank, row.dj.slug))
            replies[key] = Reply(render_dj_page(row), 200, HTML_TYPE)
    return replies


# --- MusicBrainz ------------------------------------------------------------------------------------------

_WORDS = ("Afterglow", "Gravity", "Neon", "Horizon", "Pulse", "Echoes", "Sunrise", "Voltage", "Mirage",
          "Tides", "Firelight", "Orbit", "Paradise", "Static", "Wildfire", "Aurora", "Momentum", "Kaleido")
_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Single", ()), ("Single", ()), ("Single", ("Remix",)), ("EP", ()), ("Album", ()),
    ("Album", ("Compilation",)), ("Album", ("DJ-mix",)), ("Album", ("Live",)), ("Single", ()),
)


def sample_mbid(*parts: str) -> str:
    """A made-up but stable MBID."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "chartgw-sample:" + "/".join(parts)))


def release_group_count(dj: SampleDj) -> int:
    """3..162 release groups: many DJs need two browse pages."""
    return 3 + stable_number(dj.slug, "release-groups") % 160


def has_musicbrainz_match(dj: SampleDj) -> bool:
    """One DJ in 23 has no MusicBrainz artist of that name (the explicit no-match path)."""
    return stable_number(dj.slug, "mb-match") % 23 != 0


def _country_code(dj: SampleDj) -> str | None:
    """The DJ's country as MusicBrainz writes it (upper-case alpha-2), from the home DJ Mag prints."""
    name = djmag.country_of(dj.home)
    codes = {country: code for code, country in COUNTRIES.items()}
    return codes[name].upper() if name in codes else None


def render_artist_search(dj: SampleDj, when: datetime) -> bytes:
    """The search answer for the DJ's real name: the DJ at score 100 (unless it has no match), a weaker
    same-name artist of another kind for some matched DJs, and a loose match at a low score."""
    artists: list[dict[str, object]] = []
    if has_musicbrainz_match(dj):
        artists.append({"id": sample_mbid(dj.slug), "type": "Group" if "&" in dj.name else "Person", "score": 100,
                        "name": dj.name, "sort-name": dj.name, "country": _country_code(dj),
                        "disambiguation": "DJ and producer", "life-span": {"ended": None},
                        "aliases": [{"name": djmag.name_from_slug(dj.slug), "sort-name": dj.name}]})
    if has_musicbrainz_match(dj) and stable_number(dj.slug, "namesake") % 4 == 0:
        artists.append({"id": sample_mbid(dj.slug, "namesake"), "type": "Group", "score": 88, "name": dj.name,
                        "sort-name": dj.name, "disambiguation": "indie rock band", "life-span": {"ended": True}})
    artists.append({"id": sample_mbid(dj.slug, "loose"), "type": "Person", "score": 54,
                    "name": f"{dj.name.split()[0]} Collective", "sort-name": f"{dj.name.split()[0]} Collective",
                    "life-span": {"ended": None}})
    created = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return json_body({"created": created, "count": len(artists) + 7, "offset": 0, "artists": artists})


def release_groups(dj: SampleDj) -> list[dict[str, object]]:
    """All of the DJ's sample release groups, in the order the browse pages give them."""
    groups: list[dict[str, object]] = []
    for index in range(release_group_count(dj)):
        number = stable_number(dj.slug, "rg", str(index))
        primary, secondary = _KINDS[number % len(_KINDS)]
        year = 2005 + number % 21
        date = f"{year}" if number % 7 == 0 else f"{year}-{1 + number % 12:02d}-{1 + number % 28:02d}"
        title = f"{_WORDS[number % len(_WORDS)]} {_WORDS[(number // 7) % len(_WORDS)]}"
        groups.append({"id": sample_mbid(dj.slug, "rg", str(index)), "title": title, "primary-type": primary,
                       "primary-type-id": sample_mbid("type", primary), "secondary-types": list(secondary),
                       "secondary-type-ids": [sample_mbid("type", s) for s in secondary],
                       "first-release-date": "" if number % 31 == 0 else date, "disambiguation": ""})
    return groups


def render_release_groups(dj: SampleDj, offset: int = 0) -> bytes:
    """One browse page (100 a page) of the DJ's release groups."""
    groups = release_groups(dj)
    page = groups[offset: offset + musicbrainz.PAGE_SIZE]
    return json_body({"release-group-offset": offset, "release-group-count": len(groups), "release-groups": page})


def musicbrainz_replies(when: datetime, variant: int = 0, count: int = YEARS_SHOWN) -> dict[ReplayKey, Reply]:
    """The search answer for every DJ of the sample years (by real name) and every browse page of each
    matched DJ's release groups."""
    replies: dict[ReplayKey, Reply] = {}
    djs = {row.dj for year in sample_years(variant, count) for row in year_ranking(year)}
    for dj in sorted(djs, key=lambda d: d.slug):
        replies[request_key(musicbrainz.artist_search_request(dj.name))] = Reply(
            render_artist_search(dj, when), 200, JSON_TYPE)
        if has_musicbrainz_match(dj):
            for offset in range(0, release_group_count(dj), musicbrainz.PAGE_SIZE):
                request = musicbrainz.release_groups_request(sample_mbid(dj.slug), offset)
                replies[request_key(request)] = Reply(render_release_groups(dj, offset), 200, JSON_TYPE)
    return replies


def all_replies(when: datetime, variant: int = 0, count: int = YEARS_SHOWN) -> dict[str, dict[ReplayKey, Reply]]:
    """Replay tables by upstream name (DJMAG, MUSICBRAINZ) for `chartgw.demo.replay_upstreams`."""
    return {djmag.UPSTREAM: djmag_replies(variant, count),
            musicbrainz.UPSTREAM: musicbrainz_replies(when, variant, count)}
