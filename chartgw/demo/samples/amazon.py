"""Amazon best-seller pages written from the global sample pool, in the markup the parser knows.

- Grid pages (`/gp/bestsellers/{path}/`, page 2 `?pg=2`): 50 ranks each in `[data-client-recs-list]`,
  cards for the first 30 of them (ranks 1-30 / 51-80, as saved pages show), in the card markup of a real
  amazon.co.jp card (public note) and of two projects' descriptions of saved pages: `[id="gridItemRoot"]`,
  badge, image and title links, byline `a.a-link-child`, stars row, format line, price (some cards as
  "N offers from"). Public code only: no grid capture exists.
- Landing pages (`/gp/bestsellers/`): carousels in the markup of the real amazon.in capture: 6 cards with
  empty `data-asin` and no prices, the full list of 20 double-encoded in `data-a-carousel-options`.
- Refusal pages: the robot check (captcha form), the "sorry" (dogs) 503 page and the sign-in wall.

Hashed class names can be rotated (`rotated_hashes`) to test that nothing depends on them. Products are
made up but stable per marketplace, category and song: ASINs, prices in the marketplace's currency and
spelling, ratings and review counts. `variant` n+1 is the list after n (`chartgw.demo.samples.chart_rows`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape

from chartgw.demo.replay import ReplayKey, Reply, request_key
from chartgw.demo.samples import GlobalSong, SampleRow, global_rows
from chartgw.demo.samples.bodies import stable_hex, stable_number
from chartgw.upstreams.amazon import (
    PAGE_SIZE,
    Category,
    Group,
    category,
    category_for_path,
    category_path,
    grid_request,
    landing_request,
    marketplace,
)

CARDS_PER_PAGE = 30
"""Cards a grid page renders (the rest of its 50 ranks are in the JSON list only)."""
CAROUSEL_CARDS = 6
CAROUSEL_SIZE = 20
"""Cards and list length of a landing carousel, as in the real capture."""
CONTENT_TYPE = "text/html;charset=UTF-8"

# The hashed class names seen in the wild (NOTES 4 and public code); `rotated_hashes` makes new ones.
HASHES: dict[str, str] = {
    "grid-column": "_cDEzb_grid-column_2hIsc",
    "grid-cell": "_cDEzb_grid-cell_1uMOS",
    "grid-row": "_cDEzb_grid-row_3Cywl",
    "video": "_cDEzb_iveVideoWrapper_JJ34T",
    "noop": "_cDEzb_noop_3Xbw5",
    "line-clamp-1": "_cDEzb_p13n-sc-css-line-clamp-1_1Fn1y",
    "line-clamp-3": "_cDEzb_p13n-sc-css-line-clamp-3_g3dy1",
    "price": "_cDEzb_p13n-sc-price_3mJ9Z",
    "price-wrapper": "_cDEzb_p13n-sc-price-animation-wrapper_3PzN2",
}


def rotated_hashes(seed: str) -> dict[str, str]:
    """Every hashed class with a new build prefix and suffix (as a new Amazon front-end build does)."""
    prefix = stable_hex(seed, "prefix", digits=5)
    rotated = {}
    for key, value in HASHES.items():
        _, _, rest = value[1:].partition("_")
        stem, _, _ = rest.rpartition("_")
        rotated[key] = f"_{prefix}_{stem}_{stable_hex(seed, key, digits=5)}"
    return rotated


# Per currency: how a price is printed, and the base price of a CD, vinyl, digital album, digital song
# (made up, typical; 0 = not sold there).
PRICE_FORMATS: dict[str, str] = {"USD": "${}", "CAD": "${}", "GBP": "£{}", "EUR": "{}\u00a0€", "JPY": "￥{}",
                                 "INR": "₹{}"}
PRICE_AMOUNTS: dict[str, tuple[float, float, float, float]] = {
    "USD": (12.98, 29.99, 9.49, 1.29),
    "CAD": (16.99, 39.99, 11.49, 1.29),
    "GBP": (9.99, 24.99, 7.99, 0.99),
    "EUR": (14.99, 29.99, 9.49, 1.29),
    "JPY": (2547, 4950, 1500, 255),
    "INR": (599.0, 2499.0, 0, 0),
}
# Per marketplace language: rating text, thousands separator of counts, heading of a category list.
LOCALE: dict[str, tuple[str, str, str]] = {
    "en": ("{} out of 5 stars", ",", "Best Sellers in {}"),
    "de": ("{} von 5 Sternen", ".", "Bestseller in {}"),
    "fr": ("{} sur 5\u00a0étoiles", "\u00a0", "Meilleures ventes en {}"),
    "it": ("{} su 5 stelle", ".", "Bestseller in {}"),
    "es": ("{} de 5 estrellas", ".", "Los más vendidos en {}"),
    "ja": ("5つ星のうち{}", ",", "{} の 売れ筋ランキング"),
}
IMAGE_BASE = "https://m.media-amazon.com/images/I/"
FORMATS = {"cd": "Audio CD", "vinyl": "Vinyl", "album": "MP3 Music", "song": "MP3 Music"}


@dataclass(frozen=True)
class SampleProduct:
    """What one rendered card shows, for the renderer and for tests comparing the parse to it."""

    asin: str
    title: str
    artist: str
    format: str
    price: float | None
    price_text: str | None
    offers: int | None
    """"N offers from" cards print the lowest offer; None for a plain price."""
    rating: float | None
    rating_text: str | None
    review_count: int | None
    review_text: str | None
    image: str


def _language(market: str) -> str:
    return marketplace(market).language[:2]


def artist_credit(artists: tuple[str, ...]) -> str:
    """One byline as the store prints it: "A", "A & B", "A, B & C"."""
    return artists[0] if len(artists) == 1 else ", ".join(artists[:-1]) + " & " + artists[-1]


def asin_for(market: str, kind: str, song: GlobalSong) -> str:
    """A made-up ASIN ("B0" + 8 of A-Z0-9), stable per marketplace, product kind and song."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    number = stable_number(market, kind, song.title, *song.artists) * 7919 + stable_number(song.title)
    chars = []
    for _ in range(8):
        number, digit = divmod(number, 36)
        chars.append(alphabet[digit])
    return "B0" + "".join(chars)


def product_kind(found: Category, song: GlobalSong) -> str:
    """cd, vinyl, album or song: what a list of that category sells (CDs & Vinyl mixes both formats)."""
    if found.group == "retail-physical":
        if found.slug == "vinyl" or (found.slug == "cds-vinyl" and stable_number(song.title, "vinyl") % 3 == 0):
            return "vinyl"
        return "cd"
    if found.slug in ("digital-songs", "top-songs") or (found.slug != "digital-albums"
                                                        and stable_number(song.title, "kind") % 2 == 0):
        return "song"
    return "album"


def price_text(market: str, amount: float) -> str:
    """An amount printed as the marketplace prints it ("$12.98", "14,99 €", "￥2,547", "₹599.00")."""
    place = marketplace(market)
    pattern = PRICE_FORMATS[place.currency]
    if place.currency == "JPY":
        shown = f"{int(amount):,}"
    elif place.decimal_comma:
        shown = f"{amount:,.2f}".replace(",", "\u2009").replace(".", ",").replace("\u2009", ".")
    else:
        shown = f"{amount:,.2f}"
    return pattern.format(shown)


def _count_text(market: str, count: int) -> str:
    separator = LOCALE[_language(market)][1]
    return f"{count:,}".replace(",", separator)


def product(market: str, found: Category, song: GlobalSong) -> SampleProduct:
    """The card of `song` in a list of category `found` in `market`."""
    place = marketplace(market)
    kind = product_kind(found, song)
    base = PRICE_AMOUNTS[place.currency][("cd", "vinyl", "album", "song").index(kind)]
    seed = stable_number(market, kind, song.title)
    amount: float | None = None
    if base:
        step = 100 if place.currency == "JPY" else 1
        amount = round(base + (seed % 5) * step - (step if seed % 7 == 0 else 0), 2)
    offers = 2 + seed % 40 if kind in ("cd", "vinyl") and seed % 6 == 0 else None
    rated = seed % 9 != 0
    rating = round(3.5 + (seed >> 4) % 16 / 10, 1) if rated else None
    reviews = 1 + (seed >> 9) % 60000 if rated else None
    language = _language(market)
    shown_rating = None
    if rating is not None:
        shown_rating = f"{rating:.1f}".replace(".", ",") if place.decimal_comma else f"{rating:.1f}"
    token = stable_hex(song.title, kind, digits=8)
    return SampleProduct(
        asin=asin_for(market, kind, song),
        title=song.title if kind != "vinyl" else f"{song.title} [Vinyl]",
        artist=artist_credit(song.artists),
        format=FORMATS[kind],
        price=amount,
        price_text=price_text(market, amount) if amount is not None else None,
        offers=offers,
        rating=rating,
        rating_text=LOCALE[language][0].format(shown_rating) if shown_rating else None,
        review_count=reviews,
        review_text=_count_text(market, reviews) if reviews is not None else None,
        image=f"{IMAGE_BASE}{int(token, 16) % 90 + 10}{token.upper()}L._AC_UL300_SR300,200_.jpg",
    )


def sample_rows(market: str, group: Group, slug: str, variant: int = 0, size: int = 100,
                ) -> list[SampleRow[GlobalSong]]:
    """The sample list of a category in a marketplace (100 rows: pages 1 and 2). Seeded by the page path, so
    two categories reading one list (retail-music top-songs, retail-digital digital-songs) get one list."""
    return global_rows(f"amazon/{market}/{category_path(market, group, slug)}", variant, size)


def page_category(market: str, group: Group, slug: str) -> Category:
    """The category a page is rendered as: the table's first one with the same path (one page, one body)."""
    return category_for_path(market, category_path(market, group, slug)) or category(group, slug)


# --- grid pages -------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return "-".join("".join(ch if ch.isalnum() else " " for ch in text).split()) or "item"


def _ref(path: str) -> str:
    """The ref tag stem of a category ("music/40" -> "zg_bs_g_40", "music" -> "zg_bs_g_music")."""
    return f"zg_bs_g_{path.rstrip('/').rpartition('/')[2]}"


def _stars(product_: SampleProduct, href: str) -> str:
    if product_.rating is None:
        return ""
    whole, half = int(product_.rating), product_.rating % 1 >= 0.5
    icon = f"a-star-small-{whole}-5" if half else f"a-star-small-{whole}"
    shown = escape(product_.rating_text or "")
    return (f'<div class="a-row"><div class="a-icon-row"><a class="a-link-normal" title="{shown}" href="{href}">'
            f'<i class="a-icon a-icon-star-small {icon} aok-align-top"><span class="a-icon-alt">'
            f'{shown}</span></i> <span class="a-size-small">{product_.review_text}</span>'
            f"</a></div></div>")


def _price_row(product_: SampleProduct, href: str, hashes: dict[str, str]) -> str:
    if product_.price_text is None:
        return ""
    if product_.offers is not None:
        return (f'<div class="a-row"><a class="a-link-normal" href="{href}" role="link">'
                f'<span class="a-color-secondary">'
                f'{product_.offers} offers from <span><span class="p13n-sc-price">{escape(product_.price_text)}'
                f"</span></span></span></a></div>")
    return (f'<div class="a-row"><div class="a-row"><div class="{hashes["price-wrapper"]}">'
            f'<a class="a-link-normal aok-block a-text-normal" href="{href}" role="link"><div class="a-row">'
            f'<span class="a-size-base a-color-price"><span class="{hashes["price"]}">{escape(product_.price_text)}'
            f"</span></span></div></a></div></div></div>")


def grid_card(market: str, path: str, rank: int, product_: SampleProduct, hashes: dict[str, str]) -> str:
    """One `gridItemRoot` card in a `li`, as the grid renders it."""
    ref = f"{_ref(path)}_d_sccl_{rank}"
    href = f"/{_slug(product_.title)}/dp/{product_.asin}/ref={ref}/000-0000000-0000000?psc=1"
    artist_href = f"/{_slug(product_.artist)}/e/B{stable_hex(product_.artist, digits=8).upper()}X/ref={ref}_bl"
    reviews_href = f"/product-reviews/{product_.asin}/ref={ref}_cr/000-0000000-0000000"
    sizes = json.dumps({product_.image: [300, 200], product_.image.replace("UL300_SR300,200", "UL600_SR600,400"):
                        [600, 400]}, separators=(",", ":"))
    title = escape(product_.title)
    return (
        f'<li class="zg-no-numbers"><span class="a-list-item"><div id="gridItemRoot" class="a-column a-span12 '
        f'a-text-center {hashes["grid-column"]}"><div id="p13n-asin-index-{(rank - 1) % PAGE_SIZE}" '
        f'class="a-cardui {hashes["grid-cell"]} expandableGrid p13n-grid-content" data-a-card-type="basic">'
        f'<div data-asin="{product_.asin}" class="{hashes["video"]}"><div class="a-section zg-bdg-ctr">'
        f'<div class="a-section zg-bdg-body zg-bdg-clr-body aok-float-left"><span class="zg-bdg-text">#{rank}</span>'
        f'</div><div class="a-section zg-bdg-tri zg-bdg-clr-tri aok-float-left"></div></div>'
        f'<div class="zg-grid-general-faceout"><div id="{product_.asin}" class="p13n-sc-uncoverable-faceout">'
        f'<a class="a-link-normal aok-block" tabindex="-1" href="{href}" role="link">'
        f'<div class="a-section a-spacing-mini {hashes["noop"]}"><img alt="{title}" src="{product_.image}" '
        f'class="a-dynamic-image p13n-sc-dynamic-image p13n-product-image" height="200px" '
        f"data-a-dynamic-image='{sizes}' style=\"max-width:300px;max-height:200px\"></div></a>"
        f'<div><div><a class="a-link-normal aok-block" href="{href}" role="link"><span>'
        f'<div class="{hashes["line-clamp-3"]}">{title}</div></span></a>'
        f'<div class="a-row a-size-small"><a class="a-size-small a-link-child" href="{artist_href}">'
        f'<div class="{hashes["line-clamp-1"]}">{escape(product_.artist)}</div></a></div>'
        f"{_stars(product_, reviews_href)}"
        f'<div class="a-row a-size-small"><span class="a-size-small a-color-secondary a-text-normal">'
        f"{escape(product_.format)}</span></div>"
        f"{_price_row(product_, href, hashes)}"
        f"</div></div></div></div></div></div></div></span></li>\n"
    )


def recs_list(asins: list[tuple[int, str]]) -> str:
    """The `data-client-recs-list` JSON of a page's ranks, escaped for the attribute."""
    items = [{"id": asin, "metadataMap": {"render.zg.rank": str(rank), "render.zg.bsms.currentSalesRank": "",
                                          "render.zg.bsms.percentageChange": "",
                                          "render.zg.bsms.twentyFourHourOldSalesRank": "",
                                          "disablePercolateLinkParams": "true"}, "linkParameters": {}}
             for rank, asin in asins]
    return escape(json.dumps(items, separators=(",", ":")), quote=True)


def _heading(market: str, name: str) -> str:
    return LOCALE[_language(market)][2].format(name)


def _nav(market: str) -> str:
    """The page header's sign-in link (every Amazon page has one; it is not a sign-in wall)."""
    host = marketplace(market).host
    return (f'<header id="navbar-main"><a href="/ref=nav_logo" class="nav-logo-link">Amazon</a>'
            f'<div id="nav-signin-tooltip"><a href="https://{host}/ap/signin?openid.pape.max_auth_age=0" '
            f'class="nav-action-signin-button"><span class="nav-action-inner">Sign in</span></a></div></header>')


def _pagination(market: str, path: str, page: int) -> str:
    base = f"/gp/bestsellers/{path}/ref=zg_bs_pg_{{n}}_{path.split('/')[0]}?ie=UTF8&amp;pg={{n}}"
    items = []
    for n in (1, 2):
        if n == page:
            items.append(f'<li aria-label="Page {n}" class="a-selected"><a href="{base.format(n=n)}" '
                         f'aria-current="page">{n}</a></li>')
        else:
            items.append(f'<li aria-label="Page {n}" class="a-normal"><a href="{base.format(n=n)}">{n}</a></li>')
    return (f'<div class="a-text-center"><nav aria-label="pagination"><ul class="a-pagination">{"".join(items)}'
            "</ul></nav></div>")


def _document(market: str, title: str, canonical: str | None, body: str) -> bytes:
    language = marketplace(market).language.split(",")[0].lower()
    link = f'<link rel="canonical" href="{canonical}" />' if canonical else ""
    return (f'<!doctype html><html lang="{language}" class="a-no-js" data-19ax5a9jf="dingo"><head>'
            f'<meta charset="utf-8"/><title>{escape(title)}</title>{link}</head><body><div id="a-page">'
            f"{_nav(market)}{body}</div></body></html>\n<!-- sp:eh:sample -->\n").encode()


def render_grid_page(market: str, group: Group, slug: str, rows: list[SampleRow[GlobalSong]], page: int,
                     hashes: dict[str, str] | None = None, cards: int = CARDS_PER_PAGE) -> bytes:
    """Page `page` of a category's grid: ranks (page-1)*50+1 .. in the JSON list, the first `cards` of
    them as cards. `rows` is the whole list (`sample_rows`); a list of 50 or fewer has no page 2 link."""
    found = page_category(market, group, slug)
    path = category_path(market, group, slug)
    start = (page - 1) * PAGE_SIZE
    page_rows = rows[start:start + PAGE_SIZE]
    products = [(row.rank, product(market, found, row.song)) for row in page_rows]
    cells = "".join(grid_card(market, path, rank, item, hashes or HASHES) for rank, item in products[:cards])
    host = marketplace(market).host
    heading = _heading(market, found.name)
    pagination = _pagination(market, path, page) if len(rows) > PAGE_SIZE else ""
    body = (
        f'<div id="zg"><div class="a-section"><h1 class="a-size-large a-spacing-medium a-text-bold">{escape(heading)}'
        f'</h1><div class="p13n-desktop-grid" data-client-recs-list="{recs_list([(r, p.asin) for r, p in products])}"'
        f' data-index-offset="{min(cards, len(products))}" data-reftag="{_ref(path)}" data-offset="{len(products)}"'
        f' data-faceoutkataname="GeneralFaceout"><ol class="a-ordered-list a-vertical p13n-gridRow '
        f'{(hashes or HASHES)["grid-row"]}">\n{cells}</ol></div>{pagination}</div></div>'
    )
    title = f"Amazon.{host.split('.amazon.')[-1]}: {heading}" if ".amazon." in host else heading
    return _document(market, title, f"https://{host}/gp/bestsellers/{path}", body)


def grid_replies(market: str, group: Group, slug: str, variant: int = 0, *, size: int = 100,
                 hashes: dict[str, str] | None = None) -> dict[ReplayKey, Reply]:
    """Replies to both grid requests of a category (page 2 only when the list is longer than 50)."""
    rows = sample_rows(market, group, slug, variant, size)
    path = category_path(market, group, slug)
    pages = 2 if len(rows) > PAGE_SIZE else 1
    return {request_key(grid_request(market, path, page)):
            Reply(render_grid_page(market, group, slug, rows, page, hashes), 200, CONTENT_TYPE)
            for page in range(1, pages + 1)}


# --- landing pages ----------------------------------------------------------------------------------------


def landing_categories(market: str) -> list[Category]:
    """The carousels our landing pages show: the digital lists and CDs & Vinyl the marketplace has."""
    wanted = [category("retail-digital", "digital-albums"), category("retail-digital", "digital-songs"),
              category("retail-physical", "cds-vinyl")]
    return [c for c in wanted if market in c.paths]


def _carousel_card(market: str, ref: str, rank: int, product_: SampleProduct) -> str:
    """One landing card in the capture's markup (no price, empty data-asin)."""
    query = f"pd_rd_w=Sampl&amp;pf_rd_p=00000000-0000-0000-0000-000000000000&amp;pd_rd_i={product_.asin}"
    href = f"/{_slug(product_.title)}/dp/{product_.asin}/ref={ref}_d_sccl_{rank}/000-0000000-0000000?{query}&amp;psc=1"
    title = escape(product_.title)
    stars = ""
    if product_.rating is not None:
        shown = escape(product_.rating_text or "")
        stars = (f'<div class="a-row"><div class="a-icon-row"><a class="a-link-normal" title="{shown}"'
                 f' href="/product-reviews/{product_.asin}/ref={ref}_d_sccl_{rank}_cr/000-0000000-0000000?{query}">'
                 f'<i class="a-icon a-icon-star-small a-star-small-{int(product_.rating)} aok-align-top">'
                 f'<span class="a-icon-alt">{shown}</span></i> '
                 f'<span class="a-size-small">{product_.review_text}</span></a></div></div>')
    return (
        f'<li class="a-carousel-card" style="width:225px" role="listitem"><div data-asin="">'
        f'<div class="a-section zg-bdg-ctr"><div class="a-section zg-bdg-body zg-bdg-clr-body aok-float-left">'
        f'<span class="zg-bdg-text">#{rank}</span></div><div class="a-section zg-bdg-tri zg-bdg-clr-tri '
        f'aok-float-left"></div></div><div class="zg-carousel-general-faceout">'
        f'<div class="p13n-sc-uncoverable-faceout">'
        f'<a class="a-link-normal" tabindex="-1" href="{href}" role="link"><div class="a-section a-spacing-mini '
        f'{HASHES["noop"]}"><img alt="{title}" src="{product_.image}" class="a-dynamic-image p13n-sc-dynamic-image '
        f'p13n-product-image" height="160px" style="max-width:225px;max-height:160px"/></div></a>'
        f'<a class="a-link-normal" href="{href}" role="link"><span><div class="p13n-sc-truncate '
        f'p13n-sc-truncate-desktop-type2 p13n-sc-line-clamp-5" aria-hidden="true" data-rows="5">{title}</div>'
        f"</span></a>{stars}</div></div>"
        f'<div class="watch-button-placeholder aok-hidden"></div></div></li>'
    )


def render_carousel(market: str, found: Category, rows: list[SampleRow[GlobalSong]], index: int) -> str:
    """One category carousel: 6 cards and the list of 20 double-encoded in the options."""
    path = found.paths[market]
    ref = f"zg_bs_c_{path.replace('/', '_')}"
    products = [(row.rank, product(market, found, row.song)) for row in rows[:CAROUSEL_SIZE]]
    id_list = [json.dumps({"id": p.asin, "metadataMap": {"render.zg.rank": str(r)},
                           "linkParameters": {"pd_rd_i": p.asin}, "contextLinks": []}, separators=(",", ":"))
               for r, p in products]
    name = f"p13n-sc-shoveler_{stable_hex(market, path, str(index), digits=10)}"
    options = {"ajax": {"id_list": id_list}, "autoAdjustHeightFreescroll": True, "first_item_flush_left": False,
               "initThreshold": 100, "loadingThresholdPixels": 100, "name": name, "nextRequestSize": 6,
               "set_size": len(products)}
    heading = f"Bestsellers in {found.name}" if _language(market) == "en" else _heading(market, found.name)
    cards = "".join(_carousel_card(market, ref, r, p) for r, p in products[:CAROUSEL_CARDS])
    options_attr = escape(json.dumps(options, separators=(",", ":")), quote=True)
    return (
        f'<div data-a-carousel-options="{options_attr}" data-amabotslotname="zeitgeist-lists" data-faceoutSpecs="{{}}" '
        f'data-individuals="0" data-language="{marketplace(market).language.split(",")[0]}" '
        f'data-name="{name}" data-offset="{CAROUSEL_CARDS}" data-reftagprefix="{ref}" '
        f'class="a-begin a-carousel-container a-carousel-static a-carousel-display-swap a-carousel-transition-swap '
        f'p13n-sc-shoveler"><input type="hidden" autoComplete="on" class="a-carousel-firstvisibleitem"/> '
        f'<div class="a-row a-carousel-header-row a-size-large"><div class="a-column a-span8">'
        f'<h2 class="a-carousel-heading a-inline-block">{escape(heading)}</h2><div class="a-size-base a-inline-block">'
        f'<span class="a-letter-space"></span><a aria-label="{escape(heading)} - See More" class="a-link-normal" '
        f'href="/gp/bestsellers/{path}/ref=zg_bs_{path.replace("/", "_")}_sm">See More</a></div></div></div>'
        f'<div class="a-row a-carousel-controls a-carousel-row a-carousel-has-buttons">'
        f'<div class="a-carousel-row-inner">'
        f'<div class="a-carousel-col a-carousel-center"><div class="a-carousel-viewport"><ol class="a-carousel" '
        f'role="list">{cards}</ol></div></div></div></div></div>'
    )


def render_landing(market: str, variant: int = 0) -> bytes:
    """The marketplace's `/gp/bestsellers/` page: one carousel per `landing_categories`."""
    host = marketplace(market).host
    carousels = []
    for index, found in enumerate(landing_categories(market)):
        rows = sample_rows(market, found.group, found.slug, variant, CAROUSEL_SIZE)
        carousels.append(render_carousel(market, found, rows, index))
    body = (f'<div id="zg"><div class="a-section"><h1 class="_p13n-zg-banner-landing-page-header_style_zgH1Tag__pZ3k3">'
            f"Bestsellers</h1></div>{''.join(carousels)}</div>")
    return _document(market, f"Amazon.{host.split('.amazon.')[-1]} Bestsellers: The most popular items on Amazon",
                     f"https://{host}/gp/bestsellers", body)


def landing_replies(market: str, variant: int = 0) -> dict[ReplayKey, Reply]:
    return {request_key(landing_request(market)): Reply(render_landing(market, variant), 200, CONTENT_TYPE)}


# --- refusal pages ----------------------------------------------------------------------------------------


def render_robot_check(market: str) -> bytes:
    """The robot check: a captcha form posting to /errors/validateCaptcha."""
    host = marketplace(market).host
    body = (
        '<div class="a-container a-padding-double-large" style="min-width:350px;padding:44px 0 !important">'
        '<div class="a-row a-spacing-double-large" style="width: 350px; margin: 0 auto">'
        '<div class="a-row a-spacing-medium a-text-center"><i class="a-icon a-logo"></i></div>'
        '<div class="a-box a-alert a-alert-info a-spacing-base"><div class="a-box-inner">'
        '<i class="a-icon a-icon-alert"></i><h4>Enter the characters you see below</h4>'
        "<p class=\"a-last\">Sorry, we just need to make sure you're not a robot. For best results, please make sure "
        "your browser is accepting cookies.</p></div></div>"
        '<div class="a-section"><div class="a-box a-color-offset-background"><div class="a-box-inner '
        'a-padding-extra-large"><form method="get" action="/errors/validateCaptcha" name="">'
        '<input type=hidden name="amzn" value="sample" /><input type=hidden name="amzn-r" value="&#047;" />'
        '<div class="a-row a-spacing-large"><div class="a-box"><div class="a-box-inner"><h4>Type the characters you '
        'see in this image:</h4><div class="a-row a-text-center"><img src="https://images-na.ssl-images-amazon.com/'
        'captcha/sample/Captcha_sample.jpg"></div><div class="a-row a-spacing-base"><input autocomplete="off" '
        'spellcheck="false" placeholder="Type characters" id="captchacharacters" name="field-keywords" '
        'type="text"></div></div></div></div><div class="a-section a-spacing-extra-large"><span class="a-button '
        'a-button-primary a-span12"><span class="a-button-inner"><button type="submit" class="a-button-text">'
        "Continue shopping</button></span></span></div></form></div></div></div></div></div>"
        f'<div class="a-text-center a-size-mini"><a href="https://{host}/gp/help/customer/display.html/ref=footer_cou">'
        "Conditions of Use</a></div>"
    )
    page = (f'<!doctype html><html lang="en" class="a-no-js" data-19ax5a9jf="dingo"><head><meta charset="utf-8"/>'
            f'<title dir="ltr">Amazon.{host.split(".amazon.")[-1]}</title></head><body>{body}</body></html>\n'
            "<!-- To discuss automated access to Amazon data please contact api-services-support@amazon.com. -->\n")
    return page.encode("utf-8")


def render_sorry_page(market: str) -> bytes:
    """The "Sorry! Something went wrong!" page Amazon answers with HTTP 503 (the dogs of Amazon)."""
    host = marketplace(market).host
    return (
        '<!DOCTYPE html>\n<html lang="en-us"><head><meta charset="utf-8"><title>Sorry! Something went wrong!</title>'
        "</head><body><div style=\"text-align:center\">"
        '<a href="/ref=cs_503_logo"><img src="https://images-na.ssl-images-amazon.com/images/G/01/error/'
        'logo._TTD_.png"'
        f' alt="Amazon.{host.split(".amazon.")[-1]}"></a>'
        '<p class="a-text-center"><a href="/ref=cs_503_link"><b>Sorry! Something went wrong on our end. Please go '
        "back and try again or go to Amazon's home page.</b></a></p>"
        '<a href="/dogsofamazon/ref=cs_503_d"><img src="https://images-na.ssl-images-amazon.com/images/G/01/error/'
        '120._TTD_.jpg" alt="Dogs of Amazon"></a></div></body></html>\n'
    ).encode()


def render_sign_in(market: str) -> bytes:
    """The sign-in wall: the `signIn` form posting to /ap/signin."""
    host = marketplace(market).host
    return (
        '<!doctype html><html lang="en-us" class="a-no-js" data-19ax5a9jf="dingo"><head><meta charset="utf-8"/>'
        '<title dir="ltr">Amazon Sign-In</title></head><body><div id="a-page"><div class="a-section a-padding-medium '
        'auth-workflow"><div class="a-section a-spacing-none auth-pagelet-container"><div class="a-box"><div '
        'class="a-box-inner a-padding-extra-large"><h1 class="a-spacing-small">Sign in</h1>'
        f'<form name="signIn" method="post" novalidate action="https://{host}/ap/signin" class="auth-validate-form '
        'auth-real-time-validation a-spacing-none"><input type="hidden" name="appActionToken" value="sample" />'
        '<label for="ap_email" class="a-form-label">Email or mobile phone number</label><input type="email" '
        'maxlength="128" id="ap_email" name="email" class="a-input-text a-span12 auth-autofocus '
        'auth-required-field"><span id="continue" class="a-button a-button-span12 a-button-primary"><span '
        'class="a-button-inner"><input id="continue" class="a-button-input" type="submit"><span '
        'class="a-button-text" aria-hidden="true">Continue</span></span></span></form></div></div></div></div>'
        "</div></body></html>\n"
    ).encode()


REFUSALS = {"robot_check": (render_robot_check, 503), "sorry_503": (render_sorry_page, 503),
            "sign_in": (render_sign_in, 200)}
"""Refusal kind -> (renderer, the HTTP status Amazon sends it with). The robot check comes with 503 or 200."""


def refusal_replies(market: str, group: Group, slug: str, kind: str) -> dict[ReplayKey, Reply]:
    """Both grid requests of a category answered by refusal page `kind` (robot_check, sorry_503, sign_in)."""
    render, status = REFUSALS[kind]
    path = category_path(market, group, slug)
    return {request_key(grid_request(market, path, page)): Reply(render(market), status, CONTENT_TYPE)
            for page in (1, 2)}
