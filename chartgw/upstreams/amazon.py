"""Amazon best sellers (HTML pages, no API), one upstream per marketplace (NOTES-global section 4).

Two page kinds:
- The category grid `/gp/bestsellers/{path}/` (page 2: `?pg=2`): 50 ranks per page. Only part of them
  (about 30) are rendered as cards `[id="gridItemRoot"]`; the full ranked list is the JSON array in
  `[data-client-recs-list]` (`{"id": ASIN, "metadataMap": {"render.zg.rank": "7", ...}}`), so a rank
  without a card is kept with its ASIN and nulls. **Public code only**: no grid capture exists; the card
  markup follows a real amazon.co.jp card pasted in a public note and two independent projects'
  descriptions of saved pages (author line `a.a-link-child`, format `span.a-color-secondary`, price in a
  class containing `p13n-sc-price`, pagination `li.a-selected[aria-label="Page 2"]`).
- The landing page `/gp/bestsellers/` (**real capture**, amazon.in 2024): one carousel per category
  (`[data-a-carousel-options]`, heading `h2`, "See More" link to the category), 6 rendered cards
  `li.a-carousel-card` (empty `data-asin`, ASIN in the `/dp/` link, no prices) and the full list of 20 in
  the options' `ajax.id_list`, whose items are JSON strings inside the JSON (double-encoded).

The hashed class names (`_cDEzb_p13n-sc-price_3mJ9Z`) rotate, so cards are read through stable ids,
attributes and un-hashed classes (`zg-bdg-text`, `a-icon-alt`, `a-link-child`, `p13n-product-image`)
and substrings (`[class*="p13n-sc-price"]`, `[class*="line-clamp"]`). Pages state no chart date
("updated frequently"): the crawl time is the snapshot time.

When the upstream says no, `AmazonPageError` (an UpstreamFormatError) carries a `reason` code
(`REASONS`): a robot check / captcha, a sign-in wall, the "sorry" (dogs) 503 page, an empty body, a
truncated page, a page whose layout is gone, a page that is not the one asked for. Never an empty chart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import (
    absolute_url,
    clean,
    decode_html,
    first_int,
    node_text,
    snippet,
)

# --- marketplaces -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marketplace:
    code: str
    """Our lower-case code, as `CHARTGW_RETAIL_MARKETS` lists it: us, gb, de, ..."""
    upstream: str
    """The declared upstream name (`CHARTGW_UPSTREAM_AMAZON_US` replaces its origin)."""
    host: str
    currency: str
    """ISO 4217 code of the prices the marketplace prints."""
    language: str
    """The Accept-Language a browser of that country sends."""
    decimal_comma: bool
    """Prices and ratings written "12,99" (the continental European stores)."""


def _market(code: str, host: str, currency: str, language: str, decimal_comma: bool = False) -> Marketplace:
    name = declare_upstream(f"AMAZON_{code.upper()}", f"https://{host}")
    return Marketplace(code, name, host, currency, language, decimal_comma)


MARKETPLACES: dict[str, Marketplace] = {
    m.code: m
    for m in (
        _market("us", "www.amazon.com", "USD", "en-US,en;q=0.9"),
        _market("gb", "www.amazon.co.uk", "GBP", "en-GB,en;q=0.9"),
        _market("de", "www.amazon.de", "EUR", "de-DE,de;q=0.9,en;q=0.8", decimal_comma=True),
        _market("fr", "www.amazon.fr", "EUR", "fr-FR,fr;q=0.9,en;q=0.8", decimal_comma=True),
        _market("it", "www.amazon.it", "EUR", "it-IT,it;q=0.9,en;q=0.8", decimal_comma=True),
        _market("es", "www.amazon.es", "EUR", "es-ES,es;q=0.9,en;q=0.8", decimal_comma=True),
        _market("ca", "www.amazon.ca", "CAD", "en-CA,en;q=0.9"),
        _market("jp", "www.amazon.co.jp", "JPY", "ja-JP,ja;q=0.9,en;q=0.8"),
        _market("in", "www.amazon.in", "INR", "en-IN,en;q=0.9"),
    )
}
DEFAULT_MARKETS: tuple[str, ...] = ("us", "gb", "de", "jp")
"""The issue's default `CHARTGW_RETAIL_MARKETS`."""

PAGE_SIZE = 50
"""Ranks per grid page; page 2 holds 51-100."""


def marketplace(code: str) -> Marketplace:
    """The marketplace of `code`, or a ValueError naming the known ones."""
    try:
        return MARKETPLACES[code]
    except KeyError:
        raise ValueError(f"amazon: unknown marketplace {code!r}; known: {', '.join(MARKETPLACES)}") from None


# --- categories -------------------------------------------------------------------------------------------

Group = Literal["retail-physical", "retail-digital", "retail-music"]


@dataclass(frozen=True)
class Category:
    slug: str
    """Our key of the category, part of chart keys: cds-vinyl, rock, digital-songs, ..."""
    name: str
    group: Group
    paths: dict[str, str]
    """Marketplace -> the path after `/gp/bestsellers/` (no slashes at the ends). A marketplace not
    listed has no known path for the category (the group skips it)."""
    guessed: frozenset[str] = frozenset()
    """Marketplaces whose path is a guess by analogy (no page or public code seen with it)."""


def _us_music(node: str) -> dict[str, str]:
    return {"us": f"music/{node}"}


_ALL_STORES = ("us", "gb", "de", "fr", "it", "es", "ca", "jp", "in")
_DIGITAL_STORES = ("us", "gb", "de", "fr", "it", "es", "ca", "jp")  # amazon.in lists no Digital Music store

# CDs & Vinyl ("music"): the store root is in every marketplace's nav tree (amazon.in: the real capture;
# jp, es, it, au, cn: public code). Genre nodes are amazon.com's, from one public category dump; other
# marketplaces number their nodes differently and none is known.
# Vinyl: no marketplace's vinyl node was seen; amazon.de's is a guess from memory.
CATEGORIES: tuple[Category, ...] = (
    Category("cds-vinyl", "CDs & Vinyl", "retail-physical", {m: "music" for m in _ALL_STORES}),
    Category("vinyl", "Vinyl", "retail-physical", {"de": "music/255882"}, frozenset({"de"})),
    Category("rock", "Rock", "retail-physical", _us_music("40")),
    Category("pop", "Pop", "retail-physical", _us_music("37")),
    Category("jazz", "Jazz", "retail-physical", _us_music("34")),
    Category("classical", "Classical", "retail-physical", _us_music("85")),
    Category("rap-hip-hop", "Rap & Hip-Hop", "retail-physical", _us_music("38")),
    Category("rnb", "R&B", "retail-physical", _us_music("39")),
    Category("country", "Country", "retail-physical", _us_music("16")),
    Category("alternative-rock", "Alternative Rock", "retail-physical", _us_music("30")),
    Category("classic-rock", "Classic Rock", "retail-physical", _us_music("67204")),
    Category("hard-rock-metal", "Hard Rock & Metal", "retail-physical", _us_music("67207")),
    Category("dance-electronic", "Dance & Electronic", "retail-physical", _us_music("7")),
    Category("blues", "Blues", "retail-physical", _us_music("31")),
    Category("folk", "Folk", "retail-physical", _us_music("32")),
    Category("latin", "Latin Music", "retail-physical", _us_music("289122")),
    Category("soundtracks", "Soundtracks", "retail-physical", _us_music("42")),
    Category("indie", "Indie & Lo-Fi", "retail-physical", _us_music("468300")),
    # Digital Music ("dmusic"): the root and its Albums/Songs lists (us: public category dump; songs on
    # de, jp, fr: public code). The other stores' lists are guesses by analogy.
    Category("digital-music", "Digital Music", "retail-digital", {m: "dmusic" for m in _DIGITAL_STORES},
             frozenset({"gb", "it", "es", "ca"})),
    Category("digital-albums", "Digital Music: Albums", "retail-digital",
             {m: "dmusic/digital-music-album" for m in _DIGITAL_STORES},
             frozenset({"gb", "de", "fr", "it", "es", "ca", "jp"})),
    Category("digital-songs", "Digital Music: Songs", "retail-digital",
             {m: "dmusic/digital-music-track" for m in _DIGITAL_STORES}, frozenset({"gb", "it", "es", "ca"})),
    Category("digital-hard-rock-metal", "Digital Music: Hard Rock & Metal", "retail-digital",
             {"us": "dmusic/195343011"}),  # seen in older public code only; may be retired
    # /retail-music: no public format of the streaming app's own top songs is known, so it reads the
    # best-selling digital songs list.
    Category("top-songs", "Best-selling digital songs", "retail-music",
             {m: "dmusic/digital-music-track" for m in _DIGITAL_STORES}, frozenset({"gb", "it", "es", "ca"})),
)
CATEGORY_BY_KEY: dict[tuple[Group, str], Category] = {(c.group, c.slug): c for c in CATEGORIES}


def categories(group: Group) -> list[Category]:
    """The categories of one group, in table order."""
    return [c for c in CATEGORIES if c.group == group]


def category(group: Group, slug: str) -> Category:
    """One category of `group`, or a ValueError naming the known ones."""
    found = CATEGORY_BY_KEY.get((group, slug))
    if found is None:
        known = ", ".join(c.slug for c in categories(group))
        raise ValueError(f"amazon: unknown {group} category {slug!r}; known: {known}")
    return found


def category_for_path(market: str, path: str, group: Group | None = None) -> Category | None:
    """The table's category whose `market` path is `path` ("dmusic/digital-music-album"), e.g. to name a
    landing carousel; the first in table order (optionally only of `group`), None when no row has it."""
    wanted = path.strip("/")
    for found in CATEGORIES:
        if (group is None or found.group == group) and found.paths.get(market) == wanted:
            return found
    return None


def category_path(market: str, group: Group, slug: str) -> str:
    """The `/gp/bestsellers/` sub-path of a category in a marketplace; ValueError when none is known."""
    found = category(group, slug)
    marketplace(market)
    path = found.paths.get(market)
    if path is None:
        raise ValueError(f"amazon: no known {market} path for {group} category {slug!r}")
    return path


# --- requests ---------------------------------------------------------------------------------------------

# A current desktop Chrome's navigation headers. Amazon answers plain clients with the robot check; the
# group may replace these from settings. Accept-Language is set per marketplace by `browser_headers`.
DEFAULT_HEADERS: tuple[tuple[str, str], ...] = (
    (
        "User-Agent",
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
         "Chrome/131.0.0.0 Safari/537.36"),
    ),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"),
    ("Accept-Language", "en-US,en;q=0.9"),
    ("Upgrade-Insecure-Requests", "1"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Site", "none"),
    ("Sec-Fetch-User", "?1"),
)


def browser_headers(market: str, base: tuple[tuple[str, str], ...] = DEFAULT_HEADERS) -> tuple[tuple[str, str], ...]:
    """`base` with the marketplace's Accept-Language (added, or replacing the one `base` has)."""
    language = marketplace(market).language
    kept = tuple((k, v) for k, v in base if k.lower() != "accept-language")
    return (*kept, ("Accept-Language", language))


def grid_path(path: str) -> str:
    """`/gp/bestsellers/{path}/` for a category sub-path ("music/40")."""
    return f"/gp/bestsellers/{path.strip('/')}/"


def grid_request(market: str, path: str, page: int = 1,
                 headers: tuple[tuple[str, str], ...] | None = None) -> UpstreamRequest:
    """One grid page of the category at `path`; page 2 is `?pg=2` as the site's pagination links it."""
    if page not in (1, 2):
        raise ValueError(f"amazon: grid pages are 1 and 2, got {page}")
    params: tuple[tuple[str, str], ...] = (("pg", "2"),) if page == 2 else ()
    return UpstreamRequest(upstream=marketplace(market).upstream, path=grid_path(path), params=params,
                           headers=headers if headers is not None else browser_headers(market))


def grid_requests(market: str, group: Group, slug: str, pages: int = 2,
                  headers: tuple[tuple[str, str], ...] | None = None) -> list[UpstreamRequest]:
    """Pages 1..`pages` (ranks 1-50, 51-100) of a category of `group` in `market`."""
    path = category_path(market, group, slug)
    return [grid_request(market, path, page, headers) for page in range(1, pages + 1)]


def landing_request(market: str, store: str | None = None,
                    headers: tuple[tuple[str, str], ...] | None = None) -> UpstreamRequest:
    """The marketplace's best-sellers landing `/gp/bestsellers/` (the real capture), or a store's own
    landing (`store="dmusic"`: `/gp/bestsellers/dmusic/`)."""
    path = grid_path(store) if store else "/gp/bestsellers/"
    return UpstreamRequest(upstream=marketplace(market).upstream, path=path,
                           headers=headers if headers is not None else browser_headers(market))


# --- records ----------------------------------------------------------------------------------------------


class RetailRaw(msgspec.Struct, kw_only=True, omit_defaults=False):
    """The verbatim texts an entry was read from (served under `include_raw`)."""

    badge: str | None
    """The rank badge as printed ("#7"); null for a rank only the JSON list has."""
    href: str | None
    """The card's product link as printed (with Amazon's ref and session parts)."""
    rating_text: str | None
    """`span.a-icon-alt` ("4.7 out of 5 stars", "5つ星のうち4.0")."""
    review_text: str | None
    """The review count as printed ("18,665", "1.234")."""
    list_metadata: dict[str, str]
    """The item's `metadataMap` in the page's ranked JSON list ({} when the list lacks the rank)."""


class RetailItem(msgspec.Struct, kw_only=True):
    """One rank of an Amazon best-seller list as served. Ranks whose card the page did not render carry only
    `rank`, `asin` and `url`; every other field is null then."""

    rank: int
    asin: str
    """Amazon's 10-character product id (A-Z, 0-9): the item id of the three retail groups."""
    title: str | None
    """The product title as the card prints it (album or song name, often with edition notes)."""
    artist: str | None
    """The card's byline (`a.a-link-child` / author line): the artist on music cards."""
    format: str | None
    """The format line ("Audio CD", "Vinyl", "MP3 Music"), when the card prints one."""
    price: float | None
    """The amount of `price_text` in `currency`; the lowest offer on "N offers from" cards."""
    price_text: str | None
    """The price as printed ("$12.99", "12,99 €", "￥2,547")."""
    currency: str | None
    """The marketplace's currency when a price is printed."""
    rating: float | None
    """Average stars out of 5."""
    review_count: int | None
    image: str | None
    """The card image (`img.p13n-product-image` src)."""
    url: str
    """The product page, https://{host}/dp/{ASIN}, without tracking parts."""
    has_card: bool
    """Whether the page rendered this rank's card (False: known from the ranked JSON list only)."""


class RetailEntry(RetailItem, kw_only=True, omit_defaults=False):
    """A rank as parsed and stored: the served fields and what the page said verbatim (`include_raw`)."""

    raw: RetailRaw


class GridPage(msgspec.Struct, kw_only=True):
    """One grid page (50 ranks) as read."""

    market: str
    page: int
    """1 or 2, by the ranks the page holds (1-50 or 51-100)."""
    category_path: str | None
    """The path after /gp/bestsellers/ (or /zgbs/) of the page's canonical link ("music/40"); null without one."""
    category_name: str | None
    """The page's category heading ("Best Sellers in Rock"), null when absent."""
    entries: list[RetailEntry]
    cards: int
    """How many entries had a rendered card."""


class RetailChart(msgspec.Struct, kw_only=True):
    """A whole list: pages 1 and 2 combined (up to 100 ranks)."""

    market: str
    category_path: str | None
    category_name: str | None
    entries: list[RetailEntry]


class Carousel(msgspec.Struct, kw_only=True):
    """One category carousel of a landing page."""

    category_path: str
    """The category the carousel's "See More" link opens ("musical-instruments"), else its ref tag's name."""
    heading: str
    """The `h2` as printed ("Bestsellers in Musical Instruments")."""
    name: str
    """The heading without an English "Bestsellers in " prefix ("Musical Instruments")."""
    entries: list[RetailEntry]


class LandingPage(msgspec.Struct, kw_only=True):
    market: str
    carousels: list[Carousel]


# --- refusals ---------------------------------------------------------------------------------------------

Reason = Literal["robot_check", "sign_in", "sorry_503", "empty", "truncated", "layout_gone", "wrong_page"]
REASONS: tuple[Reason, ...] = ("robot_check", "sign_in", "sorry_503", "empty", "truncated", "layout_gone",
                               "wrong_page")
BLOCKING_REASONS: frozenset[Reason] = frozenset({"robot_check", "sign_in", "sorry_503"})
"""Reasons that mean Amazon refused us: a crawl stops the marketplace on the first of these."""


class AmazonPageError(UpstreamFormatError):
    """A body that is not the best-seller page asked for; `reason` says which refusal (see REASONS)."""

    def __init__(self, reason: Reason, market: str, detail: str) -> None:
        super().__init__(f"amazon {market}: {reason}: {detail}")
        self.reason: Reason = reason
        self.market = market


_CAPTCHA_MARKERS = ("/errors/validatecaptcha", 'id="captchacharacters"', "id='captchacharacters'")
_SORRY_MARKERS = ("ref=cs_503", "/error/500_503", "/dogsofamazon")


def refusal_reason(body: bytes, status: int | None = None) -> tuple[Reason, str] | None:
    """(reason, detail) when the body is one of Amazon's refusal pages (or empty), else None.

    Markers are the pages' forms and links, not words: a title may contain "captcha" or "sorry".
    A 503 status counts as the sorry page even when its body is not the known one.
    """
    text = decode_html(body[:200_000])
    if not text.strip():
        return ("sorry_503", f"HTTP {status} with an empty body") if status == 503 else ("empty", "empty body")
    lower = text.lower()
    title = _title(text)
    if any(m in lower for m in _CAPTCHA_MARKERS) or title.lower() == "robot check":
        return "robot_check", f"robot check / captcha page (title {title!r})"
    if re.search(r"<form[^>]+(?:name=[\"']signin[\"']|action=[\"'][^\"']*/ap/signin)", lower):
        return "sign_in", f"sign-in wall (title {title!r})"
    if any(m in lower for m in _SORRY_MARKERS) or status == 503:
        return "sorry_503", f"the 'sorry, something went wrong' page (title {title!r}, HTTP {status})"
    return None


def redirect_reason(location: str | None) -> Reason | None:
    """The refusal a redirect stands for: to `/ap/signin` the sign-in wall, to `/errors/validateCaptcha`
    the robot check; None for any other target (a crawler not following redirects reads this)."""
    path = urlsplit(location or "").path.lower()
    if path.startswith("/ap/signin"):
        return "sign_in"
    if path.startswith("/errors/validatecaptcha"):
        return "robot_check"
    return None


def _title(text: str) -> str:
    match = re.search(r"<title[^>]*>(.*?)</title>", text[:100_000], re.IGNORECASE | re.DOTALL)
    return clean(match.group(1)) if match else ""


def check_page(body: bytes, market: str, status: int | None = None) -> LexborHTMLParser:
    """The parsed tree of a body that is a whole Amazon page; AmazonPageError for a refusal page, an empty
    body or a page cut short (no closing `</html>`)."""
    marketplace(market)
    refused = refusal_reason(body, status)
    if refused is not None:
        raise AmazonPageError(refused[0], market, refused[1])
    text = decode_html(body)
    if not text.lstrip().startswith("<"):
        raise AmazonPageError("layout_gone", market, f"not an HTML page: {snippet(text)!r}")
    if "ref=cs_404" in text.lower():
        raise AmazonPageError("wrong_page", market, f"the 'page not found' page (title {_title(text)!r})")
    if "</html>" not in text[-4096:].lower():
        raise AmazonPageError("truncated", market, f"page ends without </html> after {len(body)} bytes")
    return LexborHTMLParser(text)


# --- field readers ----------------------------------------------------------------------------------------

ASIN = re.compile(r"[A-Z0-9]{10}")
_DP_LINK = re.compile(r"/(?:dp|gp/product)/([A-Z0-9]{10})(?:[/?#]|$)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_AMOUNT = re.compile(r"\d[\d.,\u00a0\u202f ]*")
_BESTSELLERS_PATH = re.compile(r"/(?:gp/bestsellers|zgbs)/([^?#]*)")


def is_asin(value: str | None) -> bool:
    return bool(value) and ASIN.fullmatch(value or "") is not None


def product_url(market: str, asin: str) -> str:
    return f"https://{marketplace(market).host}/dp/{asin}"


def parse_amount(text: str | None, decimal_comma: bool) -> float | None:
    """The first amount in a printed price: "$1,299.00" -> 1299.0, "1.234,56 €" -> 1234.56 (decimal comma),
    "￥2,547" -> 2547.0; None when the text holds no digits."""
    match = _AMOUNT.search(text or "")
    if not match:
        return None
    digits = re.sub(r"[\s\u00a0\u202f]", "", match.group()).rstrip(".,")
    if decimal_comma:
        digits = digits.replace(".", "").replace(",", ".")
    else:
        digits = digits.replace(",", "")
    try:
        return float(digits)
    except ValueError:
        return None


def parse_rating(text: str | None) -> float | None:
    """Stars out of 5 from "4.7 out of 5 stars", "4,5 von 5 Sternen", "5つ星のうち4.0": of the two numbers,
    the one that is not the bare denominator "5"."""
    numbers = _NUMBER.findall(text or "")
    if not numbers:
        return None
    if len(numbers) >= 2 and numbers[1] == "5":
        value = numbers[0]
    elif len(numbers) >= 2 and numbers[0] == "5":
        value = numbers[1]
    else:
        value = numbers[0]
    rating = float(value.replace(",", "."))
    return rating if 0 <= rating <= 5 else None


def parse_count(text: str | None) -> int | None:
    """A printed count with any thousands separator ("18,665", "1.234", "1 234") as an int."""
    digits = re.sub(r"\D", "", text or "")
    return int(digits) if digits else None


def _bestsellers_path(url: str | None) -> str | None:
    """"music/40" from .../gp/bestsellers/music/40/ref=... or .../Best-Sellers-CDs-Vinyl-Rock/zgbs/music/40."""
    match = _BESTSELLERS_PATH.search(urlsplit(url or "").path + "/")
    if not match:
        return None
    parts = [p for p in match.group(1).split("/") if p and not p.startswith("ref=")]
    return "/".join(parts)


# --- cards ------------------------------------------------------------------------------------------------


def _ancestor_is_link(node: LexborNode, stop: LexborNode) -> bool:
    parent = node.parent
    while parent is not None and parent.mem_id != stop.mem_id:
        if parent.tag == "a":
            return True
        parent = parent.parent
    return False


def _card_asin(card: LexborNode) -> str | None:
    """`data-asin` (empty on the landing page), else the `/dp/<ASIN>` of a product link."""
    for node in [card, *card.css("[data-asin]")]:
        value = (node.attributes.get("data-asin") or "").strip()
        if is_asin(value):
            return value
    for link in card.css('a[href*="/dp/"], a[href*="/gp/product/"]'):
        match = _DP_LINK.search(link.attributes.get("href") or "")
        if match:
            return match.group(1)
    return None


def _card_title(card: LexborNode) -> str | None:
    """The text of the first product link that has text (the image link has none), else the image's alt."""
    for link in card.css('a[href*="/dp/"], a[href*="/gp/product/"]'):
        if link.css_first('[class*="p13n-sc-price"], .a-price'):
            continue
        text = node_text(link.css_first('[class*="line-clamp"], [class*="p13n-sc-truncate"]')) or node_text(link)
        if text:
            return text
    image = card.css_first("img")
    return (clean(image.attributes.get("alt")) or None) if image is not None else None


def _card_byline(card: LexborNode) -> str | None:
    """The author/artist line: `a.a-link-child` (linked byline), else a `span.a-color-base` row."""
    node = card.css_first("a.a-link-child") or card.css_first("div.a-size-small > span.a-color-base")
    return node_text(node) or None


def _card_format(card: LexborNode) -> str | None:
    """`span.a-color-secondary` outside links ("Audio CD"); the one inside the price link is "N offers from"."""
    for node in card.css("span.a-color-secondary"):
        if not _ancestor_is_link(node, card) and not node.css_first('[class*="p13n-sc-price"]'):
            return node_text(node) or None
    return None


def _card_price(card: LexborNode) -> str | None:
    node = card.css_first('span[class*="p13n-sc-price"]') or card.css_first(".a-price .a-offscreen")
    return node_text(node) or None


def _card_reviews(card: LexborNode) -> tuple[str | None, str | None]:
    """(rating text, review count text) from the stars link (`a[href*="/product-reviews/"]`) or the icon row."""
    row = card.css_first('a[href*="/product-reviews/"]') or card.css_first("div.a-icon-row")
    if row is None:
        return None, None
    stars = node_text(row.css_first("span.a-icon-alt")) or clean(row.attributes.get("title")) or None
    count = node_text(row.css_first("span.a-size-small")) or None
    return stars, count


def _card_image(card: LexborNode) -> str | None:
    image = card.css_first("img.p13n-product-image") or card.css_first("img")
    return absolute_url(image.attributes.get("src")) if image is not None else None


def _card_href(card: LexborNode) -> str | None:
    link = card.css_first('a[href*="/dp/"], a[href*="/gp/product/"]')
    return (link.attributes.get("href") or None) if link is not None else None


def read_card(card: LexborNode, market: str, where: str) -> RetailEntry:
    """One rendered card: rank badge, ASIN, and the fields the card prints."""
    badge = node_text(card.css_first("span.zg-bdg-text")) or None
    rank = first_int(badge)
    if rank is None:
        raise AmazonPageError("layout_gone", market, f"{where}: card without a rank badge (span.zg-bdg-text)")
    asin = _card_asin(card)
    if asin is None:
        raise AmazonPageError("layout_gone", market, f"{where}: card #{rank} has no ASIN (data-asin or /dp/ link)")
    place = marketplace(market)
    price_text = _card_price(card)
    rating_text, review_text = _card_reviews(card)
    return RetailEntry(
        rank=rank,
        asin=asin,
        title=_card_title(card),
        artist=_card_byline(card),
        format=_card_format(card),
        price=parse_amount(price_text, place.decimal_comma),
        price_text=price_text,
        currency=place.currency if price_text else None,
        rating=parse_rating(rating_text),
        review_count=parse_count(review_text),
        image=_card_image(card),
        url=product_url(market, asin),
        has_card=True,
        raw=RetailRaw(badge=badge, href=_card_href(card), rating_text=rating_text, review_text=review_text,
                      list_metadata={}),
    )


def list_only_entry(market: str, rank: int, asin: str, metadata: dict[str, str]) -> RetailEntry:
    """A rank the ranked JSON list has and no card renders: ASIN and rank, nulls elsewhere."""
    return RetailEntry(rank=rank, asin=asin, title=None, artist=None, format=None, price=None, price_text=None,
                       currency=None, rating=None, review_count=None, image=None, url=product_url(market, asin),
                       has_card=False, raw=RetailRaw(badge=None, href=None, rating_text=None, review_text=None,
                                                     list_metadata=metadata))


# --- the ranked JSON lists --------------------------------------------------------------------------------


def ranked_list(items: object, market: str, where: str) -> list[tuple[int, str, dict[str, str]]] | None:
    """(rank, ASIN, metadataMap) of each item of a recommendation list, in list order; None when the list
    has no `render.zg.rank` (another kind of list). Items may be objects or JSON strings of objects (the
    landing page's double encoding)."""
    if not isinstance(items, list):
        raise AmazonPageError("layout_gone", market, f"{where}: the id list is not a JSON array")
    ranked: list[tuple[int, str, dict[str, str]]] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError:
                raise AmazonPageError("truncated", market, f"{where}[{index}]: item is not JSON") from None
        if not isinstance(item, dict):
            raise AmazonPageError("layout_gone", market, f"{where}[{index}]: item is not an object")
        found = item.get("metadataMap")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        rank_text = metadata.get("render.zg.rank")
        if rank_text is None:
            return None
        asin = str(item.get("id") or "")
        if not is_asin(asin) or not str(rank_text).isdigit():
            raise AmazonPageError("layout_gone", market, f"{where}[{index}]: bad id {asin!r} or rank {rank_text!r}")
        ranked.append((int(rank_text), asin, {str(k): str(v) for k, v in metadata.items()}))
    return ranked


def _json_attribute(node: LexborNode, name: str, market: str) -> Any:
    try:
        return json.loads(node.attributes.get(name) or "")
    except ValueError:
        raise AmazonPageError("truncated", market, f"[{name}] is not valid JSON") from None


def merge(market: str, ranked: list[tuple[int, str, dict[str, str]]], cards: list[RetailEntry],
          where: str) -> list[RetailEntry]:
    """The list's ranks in order, each with its card's fields when rendered. A card whose ASIN is not the
    list's at its rank, or a card outside the list, means the page is not what we know."""
    by_rank = {card.rank: card for card in cards}
    if len(by_rank) != len(cards):
        raise AmazonPageError("layout_gone", market, f"{where}: two cards carry the same rank badge")
    entries: list[RetailEntry] = []
    for rank, asin, metadata in ranked:
        card = by_rank.pop(rank, None)
        if card is None:
            entries.append(list_only_entry(market, rank, asin, metadata))
            continue
        if card.asin != asin:
            raise AmazonPageError("layout_gone", market,
                                  f"{where}: card #{rank} is {card.asin} but the ranked list says {asin}")
        card.raw.list_metadata = metadata
        entries.append(card)
    if by_rank:
        raise AmazonPageError("layout_gone", market,
                              f"{where}: cards ranked {sorted(by_rank)} are missing from the ranked list")
    return entries


def check_ranks(entries: list[RetailEntry], first: int, market: str, where: str) -> None:
    """Ranks must run first, first+1, ... with no gap or repeat, and ASINs must not repeat."""
    ranks = [e.rank for e in entries]
    expected = list(range(first, first + len(entries)))
    if ranks != expected:
        raise AmazonPageError("truncated", market, f"{where}: ranks {ranks[:3]}...{ranks[-3:]} are not "
                                                   f"{first}..{first + len(entries) - 1} in order")
    asins = [e.asin for e in entries]
    if len(set(asins)) != len(asins):
        raise AmazonPageError("layout_gone", market, f"{where}: an ASIN appears at two ranks")


# --- grid pages -------------------------------------------------------------------------------------------


def parse_grid_page(body: bytes, market: str, *, page: int | None = None, expected_path: str | None = None,
                    status: int | None = None) -> GridPage:
    """One category grid page: the ranked JSON list merged with the rendered cards.

    `page` (1 or 2) is checked against the ranks (1-50 / 51-100); `expected_path` ("music/40") against the
    canonical link when the page has one. Refusal pages, a page without the ranked list or without any
    card, a list with holes, and a card that disagrees with the list are AmazonPageErrors with their reason.
    """
    tree = check_page(body, market, status)
    where = f"grid page {page or '?'}"
    lists = [node for node in tree.css("[data-client-recs-list]")]
    ranked: list[tuple[int, str, dict[str, str]]] | None = None
    for node in lists:
        ranked = ranked_list(_json_attribute(node, "data-client-recs-list", market), market, where)
        if ranked:
            break
    cards = [read_card(card, market, where) for card in tree.css('[id="gridItemRoot"]')]
    if not ranked or not cards:
        title = node_text(tree.css_first("title"))
        what = "no ranked list ([data-client-recs-list] with render.zg.rank)" if not ranked else "no rendered cards"
        raise AmazonPageError("layout_gone", market, f"{where}: {what}; {len(cards)} cards; title {title!r}")
    entries = merge(market, ranked, cards, where)
    stated_page = (entries[0].rank - 1) // PAGE_SIZE + 1
    check_ranks(entries, (stated_page - 1) * PAGE_SIZE + 1, market, where)
    if page is not None and stated_page != page:
        raise AmazonPageError("wrong_page", market,
                              f"asked for page {page}, the page holds ranks from {entries[0].rank}")
    if entries[-1].rank > stated_page * PAGE_SIZE:
        raise AmazonPageError("layout_gone", market, f"{where}: ranks run past {stated_page * PAGE_SIZE}")
    canonical = tree.css_first('link[rel="canonical"]')
    path = _bestsellers_path(canonical.attributes.get("href")) if canonical is not None else None
    if expected_path is not None and path is not None and path.strip("/") != expected_path.strip("/"):
        raise AmazonPageError("wrong_page", market, f"asked for {expected_path!r}, the page is {path!r}")
    return GridPage(market=market, page=stated_page, category_path=path, category_name=_grid_heading(tree),
                    entries=entries, cards=len(cards))


def _grid_heading(tree: LexborHTMLParser) -> str | None:
    """The category's own heading: the last non-empty `h1` (a generic "Best Sellers" h1 may come first)."""
    headings = [node_text(h) for h in tree.css("h1")]
    headings = [h for h in headings if h]
    return headings[-1] if headings else None


def combine_pages(first: GridPage, second: GridPage | None) -> RetailChart:
    """Pages 1 and 2 as one list of up to 100 ranks: page 2 must continue a full page 1 at rank 51 in the
    same category. Without page 2 the list is page 1's (the top 50, or a short list's every rank)."""
    market = first.market
    if first.page != 1:
        raise AmazonPageError("wrong_page", market, f"the first page holds ranks from {first.entries[0].rank}")
    entries = list(first.entries)
    if second is not None:
        if len(first.entries) < PAGE_SIZE:
            raise AmazonPageError("wrong_page", market, f"page 1 holds {len(first.entries)} ranks, so no page 2")
        if second.page != 2:
            raise AmazonPageError("wrong_page", market, f"the second page holds ranks from {second.entries[0].rank}")
        if first.category_path and second.category_path and first.category_path != second.category_path:
            raise AmazonPageError("wrong_page", market,
                                  f"page 1 is {first.category_path!r}, page 2 is {second.category_path!r}")
        entries.extend(second.entries)
        check_ranks(entries, 1, market, "pages 1+2")
    return RetailChart(market=market, category_path=first.category_path, category_name=first.category_name,
                       entries=entries)


def parse_grid(market: str, bodies: list[bytes], *, expected_path: str | None = None) -> RetailChart:
    """The bodies of `grid_requests` (page 1, then page 2 when fetched) as one list."""
    if not bodies:
        raise AmazonPageError("empty", market, "no page body to parse")
    if len(bodies) > 2:
        raise ValueError(f"amazon: a grid list has at most 2 pages, got {len(bodies)} bodies")
    first = parse_grid_page(bodies[0], market, page=1, expected_path=expected_path)
    second = parse_grid_page(bodies[1], market, page=2, expected_path=expected_path) if len(bodies) > 1 else None
    return combine_pages(first, second)


# --- landing pages ----------------------------------------------------------------------------------------

_HEADING_PREFIX = re.compile(r"^best\s*-?\s*sellers?\s+in\s+", re.IGNORECASE)


def parse_landing(body: bytes, market: str, status: int | None = None) -> LandingPage:
    """Every category carousel of a landing page, each with its full ranked list (cards merged in)."""
    tree = check_page(body, market, status)
    read = [_carousel(node, market, index) for index, node in enumerate(tree.css("[data-a-carousel-options]"), start=1)]
    carousels = [c for c in read if c is not None]
    if not carousels:
        title = node_text(tree.css_first("title"))
        raise AmazonPageError("layout_gone", market, f"landing page has no ranked carousels; title {title!r}")
    return LandingPage(market=market, carousels=carousels)


def _carousel(node: LexborNode, market: str, index: int) -> Carousel | None:
    """One carousel, or None for a carousel that is not a ranked list (no id_list with ranks)."""
    options = _json_attribute(node, "data-a-carousel-options", market)
    ajax = options.get("ajax") if isinstance(options, dict) else None
    id_list = ajax.get("id_list") if isinstance(ajax, dict) else None
    if id_list is None:
        return None
    heading = node_text(node.css_first("h2"))
    where = f"carousel {index} ({heading or 'no heading'})"
    ranked = ranked_list(id_list, market, where)
    if not ranked:
        return None
    cards = [read_card(card, market, where) for card in node.css("li.a-carousel-card")]
    if not cards:
        raise AmazonPageError("layout_gone", market, f"{where}: no rendered cards (li.a-carousel-card)")
    entries = merge(market, ranked, cards, where)
    check_ranks(entries, 1, market, where)
    path = _see_more_path(node) or _reftag_category(node.attributes.get("data-reftagprefix"))
    if not path:
        raise AmazonPageError("layout_gone", market, f"{where}: no category link or ref tag")
    return Carousel(category_path=path, heading=heading, name=_HEADING_PREFIX.sub("", heading) or heading,
                    entries=entries)


def _see_more_path(node: LexborNode) -> str | None:
    for link in node.css('a[href*="/gp/bestsellers/"], a[href*="/zgbs/"]'):
        path = _bestsellers_path(link.attributes.get("href"))
        if path:
            return path
    return None


def _reftag_category(prefix: str | None) -> str | None:
    """"zg_bs_c_musical-instruments" -> "musical-instruments"."""
    match = re.fullmatch(r"zg_bs_c_(.+)", (prefix or "").strip())
    return match.group(1) if match else None
