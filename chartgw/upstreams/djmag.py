"""DJ Mag Top 100 DJs (djmag.com): the yearly poll pages, the per-DJ profile pages, the derived 2025 CSV.

Confidence: no HTML page of djmag.com is captured (NOTES section 10). Everything below is known from
public code only, except the 2025 ranks and slugs, which the derived CSV in ../shared carries.
- URLs: `/top100djs` (the latest poll) and `/top100djs/{year}` (scrapers of 2021-2025); the older
  `/top100dj?year={year}` (scrapers of 2018-2021) is kept as `legacy_list_request`. No public code pages
  through a year: one page holds the whole list. Per-DJ pages: `/top100djs/{year}/{rank}/{slug}`.
- Current list pages: `<script type="application/ld+json">` whose `@graph` holds an `ItemList` with
  `itemListElement[{position, url}]` (a 2025 archive scraper). The JSON-LD has no names: names come from
  the text of the page's links to each DJ URL (a 2025 TypeScript scraper reads them so), else from the
  slug, which is lossy ("dimitri-vegas-mike" for "Dimitri Vegas & Like Mike"): such names are flagged
  `name_from_slug` and `keep_real_name`/`merge_profile` never let them replace a real name.
- Older markup (2015-2021 scrapers): per row an `article` with `figure.media--image img`, and a
  `div.top100dj-title-bar` holding `div.top100dj-position`, `div.top100dj-name a` and
  `div.top100dj-movement` ("Up 1", "Down 3", "New Entry", "Re-entry", "Non Mover"; an arrow
  `i.djmi-solid-arrow-fat-down|up` may stand for the word).
- Per-DJ pages (fixtures of the 2025 TypeScript scraper): `article.node--type-top100-dj-poll`, a
  `field--name-field-intro` block of `<p><strong>From:</strong> Paris, France</p>`, `DJ style:` and
  `Best known for:`, the text in `field--name-body .field__item p`, and
  `<meta property="og:description" content="Position 1 - up 1 | ...">` (rank and change).
  GUESSES: the name from `og:title` (" | DJ Mag" suffix cut) or `h1`, the image from `og:image`.
- Country: the page prints a place ("Paris, France", "The Netherlands", "Born in Russia, raised in
  Germany"); `home` keeps it as printed and `country` is the country named at its end when it is one we
  know by name, else null. Genre is "DJ style" as printed ("All forms of dance music" included).
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.core.countries import COUNTRIES
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import absolute_url, clean, decode, decode_html, first_int, node_text, snippet
from chartgw.upstreams.json_api import BROWSER_UA

UPSTREAM = declare_upstream("DJMAG", "https://djmag.com")
SITE = "https://djmag.com"
LIST_PATH = "/top100djs"
LEGACY_LIST_PATH = "/top100dj"
LIST_SIZE = 100
FIRST_YEAR = 1997
"""The first poll year; the site's own pages reach back to 2004."""

Change = int | str | None
"""Against the year before: places gained (negative: lost, 0: non mover), "new", "re-entry", or null."""
NEW = "new"
RE_ENTRY = "re-entry"

_HEADERS: tuple[tuple[str, str], ...] = (
    ("User-Agent", BROWSER_UA),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-GB,en;q=0.9"),
)
_DJ_PATH = re.compile(r"/top100djs/(\d{4})/(\d{1,3})/([^/?#\s]+)/?$")
_POLL_HREF = re.compile(r"/(?:top-100-djs|content)/poll-(\d{4})-([^/?#\s]+)/?$")
_OG_POSITION = re.compile(r"^\s*Position\s+(\d{1,3})\s*(?:-\s*([^|]*))?", re.IGNORECASE)
_YEAR_TEXT = re.compile(r"\b(?:19|20)\d{2}\b")
_CHALLENGE_MARKERS = ("cf-browser-verification", "/cdn-cgi/challenge-platform/", "cf_chl_", "<title>just a moment",
                      "attention required! | cloudflare", "px-captcha", "verify you are a human")
_COUNTRY_ALIASES = {
    "uk": "United Kingdom", "england": "United Kingdom", "scotland": "United Kingdom", "wales": "United Kingdom",
    "northern ireland": "United Kingdom", "great britain": "United Kingdom", "usa": "United States",
    "us": "United States", "united states of america": "United States", "america": "United States",
    "holland": "Netherlands", "turkey": "Türkiye", "nl": "Netherlands", "korea": "South Korea", "russia": "Russia",
}
_COUNTRY_BY_NAME = {name.casefold(): name for name in COUNTRIES.values()}


class DjRankEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One DJ on one year's Top 100: the public JSON shape of a /dj-rankings list entry."""

    rank: int
    name: str
    """The DJ's name as the page prints it; from the slug only when the page has no text for it."""
    name_from_slug: bool
    """True when `name` was rebuilt from the slug (lossy: "&", "Like", "The", accents are lost)."""
    slug: str
    """DJ Mag's own slug, the last part of the DJ's URL ("dimitri-vegas-mike")."""
    country: str | None
    """Country name from the DJ's page ("From:"); null on list pages, which do not print it."""
    genre: str | None
    """"DJ style" from the DJ's page; null on list pages."""
    image: str | None
    change: Change
    """Against the year before, as the page says: int places up (+) / down (-), "new", "re-entry"; null
    when the page does not say (JSON-LD lists: use `derive_changes` or the DJ's page)."""
    url: str
    """The DJ's page on djmag.com for that year."""


class ParsedList(msgspec.Struct, kw_only=True, omit_defaults=False):
    year: int
    """The poll year the page itself states (in its DJ URLs or its title), never the one asked for."""
    source: str
    """"json-ld", "markup" or "csv": which of the three known forms the list was read from."""
    complete: bool
    """Whether ranks 1..100 are all there."""
    entries: list[DjRankEntry]


class DjProfile(msgspec.Struct, kw_only=True, omit_defaults=False):
    """What one per-DJ page says; every field may be null (the list names the DJ in any case)."""

    name: str | None
    """`og:title` without its " | DJ Mag" suffix, else the `h1` (a GUESS: no full page is captured)."""
    year: int | None
    rank: int | None
    """The rank the page states (og:description "Position N - ...")."""
    change: Change
    home: str | None
    """"From:" as printed ("Paris, France")."""
    country: str | None
    genre: str | None
    best_known_for: str | None
    image: str | None
    bio: str | None
    """The body paragraphs, joined by blank lines."""
    url: str | None
    """The page's canonical / og:url, when it states one."""


# --- requests ---------------------------------------------------------------------------------------------


def list_path(year: int | None = None) -> str:
    """`/top100djs` for the latest poll, `/top100djs/{year}` for a given one."""
    return LIST_PATH if year is None else f"{LIST_PATH}/{_check_year(year)}"


def list_request(year: int | None = None) -> UpstreamRequest:
    """The one page that holds a poll year's list (the latest one without `year`)."""
    return UpstreamRequest(upstream=UPSTREAM, path=list_path(year), headers=_HEADERS)


def legacy_list_request(year: int) -> UpstreamRequest:
    """The pre-2022 address of a year's list, `/top100dj?year=`, as older scrapers used it."""
    return UpstreamRequest(upstream=UPSTREAM, path=LEGACY_LIST_PATH, params=(("year", str(_check_year(year))),),
                           headers=_HEADERS)


def dj_path(year: int, rank: int, slug: str) -> str:
    if not 1 <= rank <= LIST_SIZE or not slug or "/" in slug:
        raise ValueError(f"djmag: bad DJ page address {year}/{rank}/{slug!r}")
    return f"{LIST_PATH}/{_check_year(year)}/{rank}/{slug}"


def dj_url(year: int, rank: int, slug: str) -> str:
    """The real absolute URL of a DJ's page (what list entries carry as `url`)."""
    return SITE + dj_path(year, rank, slug)


def dj_request(year: int, rank: int, slug: str) -> UpstreamRequest:
    return UpstreamRequest(upstream=UPSTREAM, path=dj_path(year, rank, slug), headers=_HEADERS)


def dj_request_for(entry: DjRankEntry) -> UpstreamRequest:
    """The request for a list entry's own page: the path of its URL (`/top100djs/Y/R/slug`, or an older
    page's `/top-100-djs/poll-2015-slug`), refused when the URL is not on djmag.com."""
    parts = urlsplit(entry.url)
    if parts.netloc not in {"djmag.com", "www.djmag.com"} or not parts.path.strip("/"):
        raise ValueError(f"djmag: entry URL is not a DJ Mag page: {entry.url!r}")
    return UpstreamRequest(upstream=UPSTREAM, path=parts.path, headers=_HEADERS)


def _check_year(year: int) -> int:
    if not FIRST_YEAR <= year <= 2100:
        raise ValueError(f"djmag: no Top 100 poll in {year}")
    return year


# --- names and slugs --------------------------------------------------------------------------------------


def slugify(name: str) -> str:
    """A slug the way the site writes them: ASCII lowercase words joined by "-" ("&" and punctuation lost)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")


def name_from_slug(slug: str) -> str:
    """The lossy name a slug gives back ("dimitri-vegas-mike" -> "Dimitri Vegas Mike", "r3hab" -> "R3Hab"):
    Python's title case, as the derived CSV's scraper made it."""
    return " ".join(part for part in slug.split("-") if part).title()


def keep_real_name(current: str | None, current_from_slug: bool,
                   candidate: str | None, candidate_from_slug: bool) -> tuple[str | None, bool]:
    """The name to keep when two sources name one DJ: a name rebuilt from a slug never replaces a real
    one; between two real names (or two slug names) the current one stays. Returns (name, from_slug)."""
    if not candidate:
        return current, current_from_slug
    if not current or (current_from_slug and not candidate_from_slug):
        return candidate, candidate_from_slug
    return current, current_from_slug


def merge_profile(entry: DjRankEntry, profile: DjProfile) -> DjRankEntry:
    """A list entry completed from the DJ's page: the page's real name replaces a slug-made one (never the
    reverse), and country, genre, image and change are filled where the list had none. A page whose own
    URL names another slug is another DJ's: ValueError."""
    parts = _dj_url_parts(profile.url or "")
    if parts is not None and parts[2] != entry.slug:
        raise ValueError(f"djmag: the page of {parts[2]!r} does not describe {entry.slug!r}")
    name, from_slug = keep_real_name(entry.name, entry.name_from_slug, profile.name, False)
    return msgspec.structs.replace(
        entry,
        name=name or entry.name,
        name_from_slug=from_slug,
        country=entry.country or profile.country,
        genre=entry.genre or profile.genre,
        image=entry.image or profile.image,
        change=entry.change if entry.change is not None else profile.change,
    )


def derive_changes(current: ParsedList, earlier: Iterable[ParsedList]) -> ParsedList:
    """Changes the page left null, from earlier years' lists (by slug): places against the year before,
    "re-entry" when the DJ was on an older list only, "new" when on none of them; still null when the
    year before is not among `earlier`."""
    ranks_by_year = {older.year: {e.slug: e.rank for e in older.entries} for older in earlier
                     if older.year < current.year}
    before = ranks_by_year.get(current.year - 1)
    if before is None:
        return current
    entries = []
    for entry in current.entries:
        if entry.change is None:
            if entry.slug in before:
                change: Change = before[entry.slug] - entry.rank
            elif any(entry.slug in ranks for ranks in ranks_by_year.values()):
                change = RE_ENTRY
            else:
                change = NEW
            entry = msgspec.structs.replace(entry, change=change)
        entries.append(entry)
    return msgspec.structs.replace(current, entries=entries)


def parse_change(text: str | None, arrow_down: bool | None = None) -> Change:
    """"Up 3" -> 3, "Down 2" -> -2, "Non Mover" -> 0, "New Entry" -> "new", "Re-entry" -> "re-entry";
    a bare number takes its sign from the arrow icon when there is one; anything else is null."""
    words = clean(text).lower()
    if not words:
        return None
    if "re-entry" in words or "re entry" in words or "reentry" in words:
        return RE_ENTRY
    if "new" in words:
        return NEW
    if "non mover" in words or "non-mover" in words or words in {"no change", "same", "="}:
        return 0
    amount = first_int(words)
    if amount is None:
        return None
    if "down" in words or words.startswith("-") or arrow_down is True:
        return -amount
    if "up" in words or words.startswith("+") or arrow_down is False:
        return amount
    return None


def country_of(home: str | None) -> str | None:
    """The country named at the end of a "From:" text ("Breda, The Netherlands" -> "Netherlands"), else null."""
    if not home:
        return None
    last = re.split(r"[,(/]| raised in | based in ", home)[-1]
    key = re.sub(r"[^\w\s]", "", last).strip().casefold()
    key = key.removeprefix("the ")
    return _COUNTRY_ALIASES.get(key) or _COUNTRY_BY_NAME.get(key)


# --- list pages -------------------------------------------------------------------------------------------


def parse_list(body: bytes, year: int | None = None) -> ParsedList:
    """A yearly list page in either known form: the JSON-LD ItemList when the page has one, else the
    older markup. `year`, when given, must be the year the page states (a redirect to another poll is
    refused)."""
    text = _page_text(body, "djmag list")
    tree = LexborHTMLParser(text)
    if _item_lists(tree):
        return parse_list_jsonld(body, year)
    if tree.css_first("div.top100dj-title-bar") is not None:
        return parse_list_markup(body, year)
    raise UpstreamFormatError(f"djmag list: neither a JSON-LD ItemList nor div.top100dj-title-bar rows "
                              f"(layout changed?): {snippet(text)!r}")


def parse_list_jsonld(body: bytes, year: int | None = None) -> ParsedList:
    """The list from `@graph[@type=ItemList].itemListElement[{position, url}]`, names from the page's links."""
    text = _page_text(body, "djmag list")
    tree = LexborHTMLParser(text)
    lists = _item_lists(tree)
    if not lists:
        raise UpstreamFormatError("djmag list: no JSON-LD ItemList in the page")
    chosen = next((found for found in lists if _links_djs(found)), lists[0])
    items = chosen.get("itemListElement")
    if not isinstance(items, list) or not items:
        raise UpstreamFormatError("djmag list: the JSON-LD ItemList has no itemListElement")
    link_names = _link_names(tree)
    rows: list[tuple[int, int, str, str, dict[str, Any]]] = []
    for index, item in enumerate(items):
        where = f"djmag list itemListElement[{index}]"
        if not isinstance(item, dict):
            raise UpstreamFormatError(f"{where}: not an object")
        nested: dict[str, Any] = item["item"] if isinstance(item.get("item"), dict) else {}
        url = clean(item.get("url") or nested.get("url") or nested.get("@id"))
        parts = _dj_url_parts(url)
        if parts is None:
            raise UpstreamFormatError(f"{where}: url is not a /top100djs/YEAR/RANK/SLUG page: {url!r}")
        position = item.get("position")
        rank = position if isinstance(position, int) and not isinstance(position, bool) else first_int(str(position))
        if rank is None:
            raise UpstreamFormatError(f"{where}: no position")
        rows.append((parts[0], rank, parts[2], url, {**nested, **item}))
    stated = _stated_year([row[0] for row in rows], year, "djmag list (JSON-LD)")
    entries = []
    for url_year, rank, slug, url, item in rows:
        if url_year != stated:
            raise UpstreamFormatError(f"djmag list: rank {rank} links to poll {url_year}, the list is {stated}")
        name = clean(item.get("name")) or link_names.get((url_year, rank, slug))
        image = item.get("image")
        if isinstance(image, dict):
            image = image.get("url")
        entries.append(_entry(rank, name, slug, absolute_url(clean(image) or None) if isinstance(image, str) else None,
                              None, url))
    return _finish(stated, "json-ld", entries)


def parse_list_markup(body: bytes, year: int | None = None) -> ParsedList:
    """The list from the older Drupal markup: one `div.top100dj-title-bar` per DJ."""
    text = _page_text(body, "djmag list")
    tree = LexborHTMLParser(text)
    bars = tree.css("div.top100dj-title-bar")
    if not bars:
        raise UpstreamFormatError("djmag list: no div.top100dj-title-bar rows (not a Top 100 page)")
    rows = []
    years: list[int] = []
    for index, bar in enumerate(bars):
        where = f"djmag list row {index + 1}"
        link = bar.css_first("div.top100dj-name a")
        href = clean(link.attributes.get("href")) if link is not None else ""
        name = node_text(link)
        if not href or not name:
            raise UpstreamFormatError(f"{where}: no div.top100dj-name a with a name and an href")
        url = href if href.startswith("http") else SITE + href
        rank = first_int(node_text(bar.css_first("div.top100dj-position")))
        slug, href_year, href_rank = _markup_slug(href)
        rank = rank if rank is not None else href_rank
        if rank is None:
            raise UpstreamFormatError(f"{where}: no div.top100dj-position")
        if href_year is not None:
            years.append(href_year)
        movement = bar.css_first("div.top100dj-movement")
        rows.append((rank, name, slug, _row_image(bar), _movement(movement), url))
    if not years:
        title = node_text(tree.css_first("title")) + " " + node_text(tree.css_first("h1"))
        years = [int(y) for y in _YEAR_TEXT.findall(title)][:1]
    stated = _stated_year(years, year, "djmag list (markup)")
    entries = [_entry(rank, name, slug, image, change, url, from_slug=False)
               for rank, name, slug, image, change, url in rows]
    return _finish(stated, "markup", entries)


def parse_derived_csv(body: bytes, year: int | None = None) -> ParsedList:
    """The archive repo's `Year,Rank,DJ Name` CSV: ranks and names rebuilt from slugs (so lossy, flagged)."""
    text = decode(body)
    if not text.strip():
        raise UpstreamFormatError("djmag csv: empty body")
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or [clean(f) for f in reader.fieldnames] != ["Year", "Rank", "DJ Name"]:
        raise UpstreamFormatError(f"djmag csv: header is not Year,Rank,DJ Name: {reader.fieldnames!r}")
    rows = []
    for line, row in enumerate(reader, start=2):
        values = [clean(row.get(key)) for key in ("Year", "Rank", "DJ Name")]
        if not all(values) or not values[0].isdigit() or not values[1].isdigit():
            raise UpstreamFormatError(f"djmag csv line {line}: not a Year,Rank,DJ Name row: {values!r}")
        rows.append((int(values[0]), int(values[1]), values[2]))
    if not rows:
        raise UpstreamFormatError("djmag csv: no rows")
    stated = _stated_year([row[0] for row in rows], year, "djmag csv")
    entries = []
    for row_year, rank, name in rows:
        if row_year != stated:
            raise UpstreamFormatError(f"djmag csv: rows of {row_year} in the {stated} file")
        slug = slugify(name)
        entries.append(_entry(rank, name, slug, None, None, dj_url(stated, rank, slug), from_slug=True))
    return _finish(stated, "csv", entries)


def refusal(status: int, body: bytes) -> str | None:
    """The reason a non-200 answer is a refusal (a Cloudflare / PerimeterX bot check, sent as 403, 429 or
    503) that must not be retried; None for an ordinary error."""
    if status not in (403, 429, 503):
        return None
    head = decode_html(body[:20000]).lower() if body else ""
    if any(marker in head for marker in _CHALLENGE_MARKERS):
        return "DJ Mag answered with a bot check / captcha page"
    return None


def _page_text(body: bytes, who: str) -> str:
    """The decoded page, refused when empty or a bot check (Cloudflare / PerimeterX challenge pages)."""
    if not body.strip():
        raise UpstreamFormatError(f"{who}: empty body")
    text = decode_html(body)
    head = text[:20000].lower()
    if any(marker in head for marker in _CHALLENGE_MARKERS):
        raise UpstreamFormatError(f"{who}: a bot check / captcha page, not DJ Mag's: {snippet(text)!r}")
    return text


def _item_lists(tree: LexborHTMLParser) -> list[dict[str, Any]]:
    """Every JSON-LD ItemList of the page, top level, in `@graph` or in a list; broken JSON is an error."""
    found: list[dict[str, Any]] = []
    for script in tree.css('script[type="application/ld+json"]'):
        raw = script.text() or ""
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UpstreamFormatError(f"djmag list: JSON-LD is not JSON (truncated page?): {exc}") from None
        nodes = data if isinstance(data, list) else [data]
        for node in list(nodes):
            if isinstance(node, dict) and isinstance(node.get("@graph"), list):
                nodes.extend(node["@graph"])
        found += [node for node in nodes if isinstance(node, dict) and _is_type(node, "ItemList")]
    return found


def _links_djs(item_list: dict[str, Any]) -> bool:
    """Whether an ItemList lists DJ pages (a page may hold other lists: breadcrumbs, related articles)."""
    items = item_list.get("itemListElement")
    return isinstance(items, list) and any(
        isinstance(item, dict) and _dj_url_parts(clean(item.get("url"))) is not None for item in items)


def _is_type(node: dict[str, Any], name: str) -> bool:
    kind = node.get("@type")
    return kind == name or (isinstance(kind, list) and name in kind)


def _link_names(tree: LexborHTMLParser) -> dict[tuple[int, int, str], str]:
    """Name text of the page's links to DJ pages, by (year, rank, slug): the first that is not a bare
    number (rank badges link there too); "[Name]" loses its brackets; an image's alt text counts."""
    names: dict[tuple[int, int, str], str] = {}
    for link in tree.css("a[href]"):
        parts = _dj_url_parts(clean(link.attributes.get("href")))
        if parts is None or parts in names:
            continue
        text = node_text(link)
        if not text:
            image = link.css_first("img[alt]")
            text = clean(image.attributes.get("alt")) if image is not None else ""
        text = text.strip("[]").strip()
        if text and not text.isdigit() and not text.startswith("{"):
            names[parts] = text
    return names


def _dj_url_parts(url: str) -> tuple[int, int, str] | None:
    match = _DJ_PATH.search(url.split("?")[0].split("#")[0])
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(3).lower()


def _markup_slug(href: str) -> tuple[str, int | None, int | None]:
    """(slug, year, rank) of an old-markup link: /top100djs/Y/R/slug, /top-100-djs/poll-Y-slug or /content/slug."""
    parts = _dj_url_parts(href)
    if parts is not None:
        return parts[2], parts[0], parts[1]
    poll = _POLL_HREF.search(href)
    if poll is not None:
        return poll.group(2).lower(), int(poll.group(1)), None
    return href.rstrip("/").rpartition("/")[2].lower(), None, None


def _row_image(bar: LexborNode) -> str | None:
    """The image of the row's `article` (its figure), None when the row has none."""
    node: LexborNode | None = bar
    while node is not None and node.tag != "article":
        node = node.parent
    image = (node or bar).css_first("figure img") or (node or bar).css_first("img")
    return absolute_url(image.attributes.get("src")) if image is not None else None


def _movement(node: LexborNode | None) -> Change:
    if node is None:
        return None
    arrow = node.css_first("i")
    arrow_class = (arrow.attributes.get("class") or "") if arrow is not None else ""
    arrow_down = True if "down" in arrow_class else False if "up" in arrow_class else None
    return parse_change(node_text(node), arrow_down)


def _stated_year(years: Sequence[int], asked: int | None, who: str) -> int:
    if not years:
        raise UpstreamFormatError(f"{who}: the page states no poll year")
    stated = Counter(years).most_common(1)[0][0]
    if asked is not None and stated != asked:
        raise UpstreamFormatError(f"{who}: asked for the {asked} poll, the page is the {stated} poll")
    return stated


def _entry(rank: int, name: str | None, slug: str, image: str | None, change: Change, url: str,
           from_slug: bool | None = None) -> DjRankEntry:
    real = bool(name) and not from_slug
    return DjRankEntry(rank=rank, name=name if name else name_from_slug(slug), name_from_slug=not real, slug=slug,
                       country=None, genre=None, image=image, change=change, url=url)


def _finish(year: int, source: str, entries: list[DjRankEntry]) -> ParsedList:
    """Entries by rank; duplicate ranks or a list not starting at 1 mean a changed or truncated page."""
    if not entries:
        raise UpstreamFormatError(f"djmag list ({source}): no entries")
    entries.sort(key=lambda e: e.rank)
    ranks = [e.rank for e in entries]
    if len(set(ranks)) != len(ranks):
        raise UpstreamFormatError(f"djmag list ({source}): a rank appears twice")
    if ranks[0] != 1 or ranks[-1] > LIST_SIZE:
        raise UpstreamFormatError(f"djmag list ({source}): ranks {ranks[0]}..{ranks[-1]} are not a Top 100")
    if ranks != list(range(1, len(ranks) + 1)):
        missing = sorted(set(range(1, ranks[-1] + 1)) - set(ranks))
        raise UpstreamFormatError(f"djmag list ({source}): ranks missing {missing[:5]} (truncated page?)")
    return ParsedList(year=year, source=source, complete=len(entries) == LIST_SIZE, entries=entries)


# --- per-DJ pages -----------------------------------------------------------------------------------------


def parse_dj_page(body: bytes) -> DjProfile:
    """One DJ's poll page. Refuses a bot check, an empty body and a page without the profile article."""
    text = _page_text(body, "djmag DJ page")
    tree = LexborHTMLParser(text)
    article = tree.css_first("article.node--type-top100-dj-poll")
    intro = tree.css_first("div.field--name-field-intro")
    if article is None and intro is None:
        raise UpstreamFormatError("djmag DJ page: no article.node--type-top100-dj-poll / field--name-field-intro "
                                  f"(not a Top 100 DJ page): {snippet(node_text(tree.body))!r}")
    labels = _intro_fields(intro or article)
    name = _meta(tree, "og:title")
    name = clean(re.split(r"\s+\|\s+", name)[0]) if name else node_text(tree.css_first("h1"))
    description = _meta(tree, "og:description") or _meta(tree, "description")
    position = _OG_POSITION.match(description or "")
    page_url = _meta(tree, "og:url") or _link_href(tree, "canonical")
    parts = _dj_url_parts(page_url or "")
    home = labels.get("from")
    return DjProfile(
        name=name or None,
        year=parts[0] if parts else None,
        rank=int(position.group(1)) if position else (parts[1] if parts else None),
        change=parse_change(position.group(2)) if position else None,
        home=home,
        country=country_of(home),
        genre=labels.get("dj style"),
        best_known_for=labels.get("best known for"),
        image=absolute_url(_meta(tree, "og:image")),
        bio=_bio(tree),
        url=page_url,
    )


def _intro_fields(block: LexborNode | None) -> dict[str, str]:
    """`<p><strong>Label:</strong> value</p>` pairs, labels lowercased without the colon."""
    fields: dict[str, str] = {}
    if block is None:
        return fields
    for para in block.css("p"):
        label = para.css_first("strong")
        if label is None:
            continue
        key = node_text(label).rstrip(":").strip().lower()
        value = clean(node_text(para)[len(node_text(label)):]).rstrip(".").strip() or None
        if key and value and key not in fields:
            fields[key] = value
    return fields


def _bio(tree: LexborHTMLParser) -> str | None:
    body = tree.css_first("div.field--name-body .field__item") or tree.css_first("div.field--name-body")
    if body is None:
        return None
    paras = [node_text(p) for p in body.css("p") if not _inside_advert(p, body)]
    text = "\n\n".join(p for p in paras if p)
    return text or None


def _inside_advert(node: LexborNode, stop: LexborNode) -> bool:
    parent = node.parent
    while parent is not None and parent is not stop and parent.tag != "body":
        if "advert" in (parent.attributes.get("class") or ""):
            return True
        parent = parent.parent
    return False


def _meta(tree: LexborHTMLParser, name: str) -> str | None:
    node = tree.css_first(f'meta[property="{name}"]') or tree.css_first(f'meta[name="{name}"]')
    return clean(node.attributes.get("content")) or None if node is not None else None


def _link_href(tree: LexborHTMLParser, rel: str) -> str | None:
    node = tree.css_first(f'link[rel="{rel}"]')
    return clean(node.attributes.get("href")) or None if node is not None else None
