"""Amazon best sellers: requests per marketplace, the real amazon.in landing capture (exact rows, also with
its hashed class names rotated), grid and landing pages our renderer writes (round trip, rotated
hashes, short lists, page 2), and every refusal with its own reason."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import pytest

from chartgw.demo.replay import request_key
from chartgw.demo.samples import amazon as samples
from chartgw.upstreams import ORIGINS, UpstreamFormatError, amazon
from chartgw.upstreams.amazon import AmazonPageError, RetailEntry, RetailRaw
from chartgw.upstreams.fields import clean

CAPTURE = "amazon/amazon-in-bestsellers-2024.html"
PHYSICAL: tuple[amazon.Group, str] = ("retail-physical", "cds-vinyl")
SONGS: tuple[amazon.Group, str] = ("retail-digital", "digital-songs")


def _pages(market: str, group: amazon.Group, slug: str, variant: int = 0, size: int = 100,
           hashes: dict[str, str] | None = None) -> list[bytes]:
    rows = samples.sample_rows(market, group, slug, variant, size)
    pages = 2 if size > amazon.PAGE_SIZE else 1
    return [samples.render_grid_page(market, group, slug, rows, page, hashes) for page in range(1, pages + 1)]


def _reason(exc: pytest.ExceptionInfo[AmazonPageError]) -> str:
    assert isinstance(exc.value, UpstreamFormatError)
    return exc.value.reason


# --- requests --------------------------------------------------------------------------------------------


def test_one_upstream_per_marketplace_with_its_real_origin() -> None:
    assert ORIGINS["AMAZON_US"] == "https://www.amazon.com"
    assert ORIGINS["AMAZON_GB"] == "https://www.amazon.co.uk"
    assert ORIGINS["AMAZON_DE"] == "https://www.amazon.de"
    assert ORIGINS["AMAZON_JP"] == "https://www.amazon.co.jp"
    assert ORIGINS["AMAZON_IN"] == "https://www.amazon.in"
    assert {m.currency for m in amazon.MARKETPLACES.values()} == {"USD", "GBP", "EUR", "JPY", "CAD", "INR"}
    assert set(amazon.DEFAULT_MARKETS) <= set(amazon.MARKETPLACES)


def test_grid_requests_pages_1_and_2() -> None:
    first, second = amazon.grid_requests("us", "retail-physical", "rock")
    assert (first.upstream, first.method, first.path, first.params) == ("AMAZON_US", "GET",
                                                                        "/gp/bestsellers/music/40/", ())
    assert (second.path, second.params) == ("/gp/bestsellers/music/40/", (("pg", "2"),))
    headers = dict(first.headers)
    assert headers["User-Agent"].startswith("Mozilla/5.0") and "Chrome/" in headers["User-Agent"]
    assert headers["Accept"].startswith("text/html") and headers["Accept-Language"] == "en-US,en;q=0.9"
    (jp,) = amazon.grid_requests("jp", "retail-music", "top-songs", pages=1)
    assert (jp.upstream, jp.path) == ("AMAZON_JP", "/gp/bestsellers/dmusic/digital-music-track/")
    assert dict(jp.headers)["Accept-Language"].startswith("ja-JP")


def test_headers_are_replaceable_and_localised() -> None:
    custom = (("User-Agent", "Custom/1.0"), ("Accept-Language", "xx"))
    assert amazon.browser_headers("de", custom) == (("User-Agent", "Custom/1.0"), ("Accept-Language",
                                                                                   "de-DE,de;q=0.9,en;q=0.8"))
    request = amazon.grid_request("gb", "music", 2, headers=custom)
    assert (request.upstream, request.headers, request.params) == ("AMAZON_GB", custom, (("pg", "2"),))


def test_landing_requests() -> None:
    assert amazon.landing_request("in").path == "/gp/bestsellers/"
    assert amazon.landing_request("us", "dmusic").path == "/gp/bestsellers/dmusic/"


def test_unknown_market_category_page_and_missing_path() -> None:
    with pytest.raises(ValueError, match="unknown marketplace 'br'"):
        amazon.grid_requests("br", *PHYSICAL)
    with pytest.raises(ValueError, match="known: cds-vinyl, vinyl, rock"):
        amazon.grid_requests("us", "retail-physical", "polka")
    with pytest.raises(ValueError, match="no known de path"):
        amazon.grid_requests("de", "retail-physical", "rock")
    with pytest.raises(ValueError, match="pages are 1 and 2"):
        amazon.grid_request("us", "music", 3)


def test_category_tables() -> None:
    assert [c.slug for c in amazon.categories("retail-music")] == ["top-songs"]
    physical = {c.slug: c for c in amazon.categories("retail-physical")}
    assert {"cds-vinyl", "vinyl", "rock", "pop", "jazz", "classical", "rap-hip-hop", "country"} <= set(physical)
    assert physical["cds-vinyl"].paths["in"] == "music" and not physical["cds-vinyl"].guessed
    assert physical["vinyl"].guessed == frozenset({"de"})
    digital = {c.slug: c for c in amazon.categories("retail-digital")}
    assert digital["digital-albums"].paths["us"] == "dmusic/digital-music-album"
    assert "us" not in digital["digital-albums"].guessed and "in" not in digital["digital-songs"].paths
    assert amazon.category_for_path("us", "/dmusic/digital-music-track/") is digital["digital-songs"]
    assert amazon.category_for_path("us", "dmusic/digital-music-track", "retail-music") is amazon.category(
        "retail-music", "top-songs")
    assert amazon.category_for_path("us", "music/999") is None


# --- field readers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "comma", "amount"), [
    ("$12.99", False, 12.99), ("$1,299.00", False, 1299.0), ("₹599.00", False, 599.0), ("￥2,547", False, 2547.0),
    ("12,99\u00a0€", True, 12.99), ("1.234,56 €", True, 1234.56), ("1\u00a0234,56\u00a0€", True, 1234.56),
    ("£7.99 - £19.99", False, 7.99), ("", False, None), ("Free", False, None),
])
def test_parse_amount(text: str, comma: bool, amount: float | None) -> None:
    assert amazon.parse_amount(text, comma) == amount


@pytest.mark.parametrize(("text", "rating"), [
    ("4.7 out of 5 stars", 4.7), ("5.0 out of 5 stars", 5.0), ("4,5 von 5 Sternen", 4.5),
    ("4,5 sur 5\u00a0étoiles", 4.5), ("5つ星のうち4.0", 4.0), ("5つ星のうち5.0", 5.0), ("", None),
])
def test_parse_rating(text: str, rating: float | None) -> None:
    assert amazon.parse_rating(text) == rating


@pytest.mark.parametrize(("text", "count"), [("18,665", 18665), ("1.234", 1234), ("59\u00a0368", 59368),
                                             ("530", 530), (None, None)])
def test_parse_count(text: str | None, count: int | None) -> None:
    assert amazon.parse_count(text) == count


# --- the real landing capture ----------------------------------------------------------------------------

IN_HREF_QUERY = ("000-0000000-0000000?pd_rd_w=4J1tX&content-id=amzn1.sym.cde02f8b-0594-439d-9e93-f4cced7ce3ce"
                 "&pf_rd_p=cde02f8b-0594-439d-9e93-f4cced7ce3ce&pf_rd_r=4XWK5K7NYPWDVYN4M9GY&pd_rd_wg=6hwTb"
                 "&pd_rd_r=5e6637e6-b42f-4b1e-9091-ace780014147")


def _list_only(market: str, rank: int, asin: str) -> RetailEntry:
    host = amazon.MARKETPLACES[market].host
    return RetailEntry(rank=rank, asin=asin, title=None, artist=None, format=None, price=None, price_text=None,
                       currency=None, rating=None, review_count=None, image=None, url=f"https://{host}/dp/{asin}",
                       has_card=False, raw=RetailRaw(badge=None, href=None, rating_text=None, review_text=None,
                                                     list_metadata={"render.zg.rank": str(rank)}))


def _check_capture(page: amazon.LandingPage) -> None:
    assert page.market == "in"
    assert [(c.category_path, c.heading, c.name) for c in page.carousels] == [
        ("musical-instruments", "Bestsellers in Musical Instruments", "Musical Instruments"),
        ("automotive", "Bestsellers in Car & Motorbike", "Car & Motorbike"),
        ("apparel", "Bestsellers in Clothing & Accessories", "Clothing & Accessories"),
        ("beauty", "Bestsellers in Beauty", "Beauty"),
        ("toys", "Bestsellers in Toys & Games", "Toys & Games"),
        ("industrial", "Bestsellers in Industrial & Scientific", "Industrial & Scientific"),
    ]
    for carousel in page.carousels:
        assert [e.rank for e in carousel.entries] == list(range(1, 21))
        assert [e.has_card for e in carousel.entries] == [True] * 6 + [False] * 14
        assert all(e.price is None and e.artist is None and e.rating is not None for e in carousel.entries[:6])
    music = page.carousels[0].entries
    assert [e.asin for e in music] == [
        "B08SCG35MG", "B017NPCSLI", "B076B8G5D8", "B072FH5KLJ", "B09ZV5JHVR", "B07T35ZBHB", "B0716FQ7SP",
        "B088KRHPG5", "B07JF9B592", "B09V2JZ439", "B08K43SPQ1", "B08MVZGGW4", "B0C2W41YKK", "B073B6TQQY",
        "B0C16R98ZZ", "B0B8DF9H2R", "B0002LI658", "B01L77Z7WK", "B0BLNTN3YP", "B01ALJRCBE"]
    assert music[0] == RetailEntry(
        rank=1, asin="B08SCG35MG",
        title="JBL Commercial CSLM20 Auxiliary Omnidirectional Lavalier Microphone, Earphone For calls, Video "
              "Conferences, And Monitoring, Black, Small",
        artist=None, format=None, price=None, price_text=None, currency=None, rating=3.9, review_count=18665,
        image="https://images-eu.ssl-images-amazon.com/images/I/61y2VvrVsoL._AC_UL225_SR225,160_.jpg",
        url="https://www.amazon.in/dp/B08SCG35MG", has_card=True,
        raw=RetailRaw(badge="#1", href="/JBL-Commercial-Omnidirectional-Microphone-Conferences/dp/B08SCG35MG/"
                                       f"ref=zg_bs_c_musical-instruments_d_sccl_1/{IN_HREF_QUERY}&pd_rd_i=B08SCG35MG"
                                       "&psc=1",
                      rating_text="3.9 out of 5 stars", review_text="18,665", list_metadata={"render.zg.rank": "1"}))
    sixth = music[5]
    assert (sixth.asin, sixth.title, sixth.rating, sixth.review_count, sixth.image, sixth.raw.badge) == (
        "B07T35ZBHB",
        "Radhe Flutes | Right Handed C Natural With Velvet Cover | Tuned With Tanpura A=440Hz | PVC Fiber",
        4.2, 5849, "https://images-eu.ssl-images-amazon.com/images/I/51n19GeyNcL._AC_UL225_SR225,160_.jpg", "#6")
    assert music[6] == _list_only("in", 7, "B0716FQ7SP")
    assert music[19] == _list_only("in", 20, "B01ALJRCBE")
    industrial = page.carousels[-1].entries
    assert (industrial[0].asin, industrial[0].rating, industrial[0].review_count) == ("B01LZSWXWI", 4.0, 24665)
    assert industrial[0].title is not None and industrial[0].title.startswith("Pidilite Roff Cera Clean")
    assert (industrial[5].asin, industrial[5].rating, industrial[5].review_count) == ("B0C1T1M5XW", 4.1, 980)
    assert industrial[19] == _list_only("in", 20, "B00016ZLDY")
    assert sum(len(c.entries) for c in page.carousels) == 120


def test_real_landing_capture(shared_upstream: Path) -> None:
    _check_capture(amazon.parse_landing((shared_upstream / CAPTURE).read_bytes(), "in"))


def test_real_landing_capture_with_rotated_class_names(shared_upstream: Path) -> None:
    """Every hashed class (`_cDEzb_noop_3Xbw5`, `_p13n-zg-..._style_..__pZ3k3`) renamed: same rows."""
    text = (shared_upstream / CAPTURE).read_text("utf-8")
    rotated, count = re.subn(r"_cDEzb_([A-Za-z0-9-]+)_[A-Za-z0-9_-]{5}(?![A-Za-z0-9_-])", r"_Zq9x1_\1_Rt7u2", text)
    rotated, more = re.subn(r"(_style_[A-Za-z-]+)__[A-Za-z0-9]{5}", r"\1__Yy0y0", rotated)
    assert count > 30 and more > 30 and "_cDEzb_" not in rotated
    _check_capture(amazon.parse_landing(rotated.encode(), "in"))


def test_real_capture_is_not_a_grid_page(shared_upstream: Path) -> None:
    with pytest.raises(AmazonPageError, match="no ranked list") as exc:
        amazon.parse_grid_page((shared_upstream / CAPTURE).read_bytes(), "in")
    assert _reason(exc) == "layout_gone"


def test_real_capture_cut_short_is_truncated(shared_upstream: Path) -> None:
    body = (shared_upstream / CAPTURE).read_bytes()
    with pytest.raises(AmazonPageError) as exc:
        amazon.parse_landing(body[: len(body) // 2], "in")
    assert _reason(exc) == "truncated"


# --- rendered grid pages ---------------------------------------------------------------------------------


def _expect_card(entry: RetailEntry, expected: samples.SampleProduct, currency: str) -> None:
    assert (entry.asin, entry.title, entry.artist, entry.format) == (expected.asin, expected.title, expected.artist,
                                                                     expected.format)
    assert (entry.price, entry.price_text, entry.currency) == (expected.price, clean(expected.price_text) or None,
                                                               currency if expected.price_text else None)
    assert (entry.rating, entry.review_count, entry.image) == (expected.rating, expected.review_count, expected.image)
    assert (entry.raw.rating_text, entry.raw.review_text) == (clean(expected.rating_text) or None,
                                                              clean(expected.review_text) or None)
    assert entry.has_card and entry.raw.badge == f"#{entry.rank}"


@pytest.mark.parametrize("market", ["us", "gb", "de", "fr", "jp", "in", "ca"])
def test_grid_round_trip(market: str) -> None:
    rows = samples.sample_rows(market, *PHYSICAL)
    chart = amazon.parse_grid(market, _pages(market, *PHYSICAL), expected_path="music")
    assert (chart.market, chart.category_path, len(chart.entries)) == (market, "music", 100)
    assert [e.rank for e in chart.entries] == list(range(1, 101))
    carded = [e.rank for e in chart.entries if e.has_card]
    assert carded == list(range(1, 31)) + list(range(51, 81))
    found = samples.page_category(market, *PHYSICAL)
    currency = amazon.MARKETPLACES[market].currency
    for entry, row in zip(chart.entries, rows, strict=True):
        expected = samples.product(market, found, row.song)
        if entry.has_card:
            _expect_card(entry, expected, currency)
        else:
            assert entry == _list_only_with_metadata(market, entry.rank, expected.asin, entry.raw.list_metadata)
            assert entry.raw.list_metadata["render.zg.rank"] == str(entry.rank)
    assert len({e.asin for e in chart.entries}) == 100


def _list_only_with_metadata(market: str, rank: int, asin: str, metadata: dict[str, str]) -> RetailEntry:
    entry = _list_only(market, rank, asin)
    entry.raw.list_metadata = metadata
    return entry


def test_grid_page_fields_in_every_spelling() -> None:
    """Spot values: prices, ratings and counts as each marketplace prints them."""
    de = amazon.parse_grid_page(_pages("de", *PHYSICAL)[0], "de", page=1)
    assert de.category_name == "Bestseller in CDs & Vinyl" and de.cards == 30 and de.page == 1
    first = de.entries[0]
    assert (first.price_text, first.price, first.currency) == ("18,99 €", 18.99, "EUR")  # NBSP read as a space
    assert (first.raw.rating_text, first.rating, first.raw.review_text, first.review_count) == (
        "3,6 von 5 Sternen", 3.6, "9.613", 9613)
    jp = amazon.parse_grid_page(_pages("jp", *PHYSICAL)[0], "jp").entries[0]
    assert (jp.title, jp.artist, jp.format) == ("Daylight [Vinyl]", "David Kushner", "Vinyl")
    assert (jp.price_text, jp.price, jp.raw.rating_text, jp.rating) == ("￥5,250", 5250.0, "5つ星のうち3.5", 3.5)
    assert (jp.url, jp.review_count) == (f"https://www.amazon.co.jp/dp/{jp.asin}", 46198)


def test_offers_from_cards_and_cards_without_rating() -> None:
    chart = amazon.parse_grid("us", _pages("us", *PHYSICAL))
    found = amazon.category(*PHYSICAL)
    rows = {row.rank: row for row in samples.sample_rows("us", *PHYSICAL)}
    products = {e.rank: samples.product("us", found, rows[e.rank].song) for e in chart.entries if e.has_card}
    offers = [r for r, p in products.items() if p.offers is not None]
    unrated = [r for r, p in products.items() if p.rating is None]
    assert offers and unrated
    for rank in offers:
        entry = chart.entries[rank - 1]
        assert entry.format in ("Audio CD", "Vinyl") and entry.price == products[rank].price
    for rank in unrated:
        assert chart.entries[rank - 1].rating is None and chart.entries[rank - 1].review_count is None


def test_rotated_hash_classes_read_the_same() -> None:
    plain = amazon.parse_grid("us", _pages("us", *SONGS, variant=2))
    rotated_hashes = samples.rotated_hashes("build-2027")
    assert all(rotated_hashes[k] != v for k, v in samples.HASHES.items())
    rotated_pages = _pages("us", *SONGS, variant=2, hashes=rotated_hashes)
    assert b"_cDEzb_" not in rotated_pages[0] and rotated_hashes["price"].encode() in rotated_pages[0]
    assert amazon.parse_grid("us", rotated_pages) == plain
    assert all(e.format == "MP3 Music" for e in plain.entries if e.has_card)


def test_variants_move_ranks() -> None:
    before = amazon.parse_grid("gb", _pages("gb", *PHYSICAL, variant=0)).entries
    after = amazon.parse_grid("gb", _pages("gb", *PHYSICAL, variant=1)).entries
    assert [e.asin for e in before] != [e.asin for e in after]
    assert len({e.asin for e in before} & {e.asin for e in after}) >= 90
    again = amazon.parse_grid("gb", _pages("gb", *PHYSICAL, variant=1)).entries
    assert again == after


def test_short_list_and_page_one_only() -> None:
    short = _pages("us", "retail-physical", "jazz", size=45)
    assert len(short) == 1 and b'aria-label="pagination"' not in short[0]
    chart = amazon.parse_grid("us", short, expected_path="music/34")
    assert [e.rank for e in chart.entries] == list(range(1, 46))
    top50 = amazon.parse_grid("us", _pages("us", *PHYSICAL)[:1])
    assert [e.rank for e in top50.entries] == list(range(1, 51))


def test_page_two_holds_ranks_51_to_100() -> None:
    second = amazon.parse_grid_page(_pages("us", *PHYSICAL)[1], "us", page=2, expected_path="music")
    assert (second.page, second.cards, second.entries[0].rank, second.entries[-1].rank) == (2, 30, 51, 100)


# --- rendered landing pages ------------------------------------------------------------------------------


def test_landing_round_trip() -> None:
    page = amazon.parse_landing(samples.render_landing("us", variant=3), "us")
    assert [c.category_path for c in page.carousels] == ["dmusic/digital-music-album", "dmusic/digital-music-track",
                                                         "music"]
    for carousel in page.carousels:
        found = amazon.category_for_path("us", carousel.category_path)
        assert found is not None and carousel.name == found.name
        rows = samples.sample_rows("us", found.group, found.slug, 3, samples.CAROUSEL_SIZE)
        assert [e.asin for e in carousel.entries] == [samples.product("us", found, r.song).asin for r in rows]
        assert [e.has_card for e in carousel.entries] == [True] * 6 + [False] * 14
        first = samples.product("us", found, rows[0].song)
        assert (carousel.entries[0].title, carousel.entries[0].rating, carousel.entries[0].price) == (
            first.title, first.rating, None)
    india = amazon.parse_landing(samples.render_landing("in"), "in")
    assert [c.category_path for c in india.carousels] == ["music"]


def test_landing_items_may_be_plain_objects() -> None:
    """The id list read both double-encoded (the capture) and as plain objects (the grid's form)."""
    body = samples.render_landing("gb").decode()
    plain = re.sub(r'data-a-carousel-options="([^"]*)"', _decode_id_list, body)
    assert plain != body
    assert amazon.parse_landing(plain.encode(), "gb") == amazon.parse_landing(body.encode(), "gb")


def _decode_id_list(match: re.Match[str]) -> str:
    from html import unescape

    options = json.loads(unescape(match.group(1)))
    options["ajax"]["id_list"] = [json.loads(item) for item in options["ajax"]["id_list"]]
    return f'data-a-carousel-options="{escape(json.dumps(options), quote=True)}"'


# --- replay tables ---------------------------------------------------------------------------------------


def test_replay_tables_answer_the_real_requests() -> None:
    replies = samples.grid_replies("de", "retail-digital", "digital-songs", variant=1)
    requests = amazon.grid_requests("de", "retail-digital", "digital-songs")
    assert set(replies) == {request_key(r) for r in requests}
    chart = amazon.parse_grid("de", [replies[request_key(r)].body for r in requests])
    assert len(chart.entries) == 100 and chart.category_path == "dmusic/digital-music-track"
    (landing,) = samples.landing_replies("jp").values()
    assert landing.status == 200 and amazon.parse_landing(landing.body, "jp").carousels
    refused = samples.refusal_replies("us", *PHYSICAL, "sorry_503")
    assert {r.status for r in refused.values()} == {503} and set(refused) == {
        request_key(r) for r in amazon.grid_requests("us", *PHYSICAL)}


# --- refusals --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "status"), [("robot_check", 503), ("robot_check", 200), ("sorry_503", 503),
                                              ("sorry_503", None), ("sign_in", 200)])
def test_refusal_pages_have_their_own_reason(kind: str, status: int | None) -> None:
    render, _ = samples.REFUSALS[kind]
    for parse in (lambda b: amazon.parse_grid_page(b, "us", status=status),
                  lambda b: amazon.parse_landing(b, "us", status=status),
                  lambda b: amazon.parse_grid("us", [b])):
        with pytest.raises(AmazonPageError) as exc:
            parse(render("us"))
        assert _reason(exc) == kind and kind in str(exc.value)
    assert kind in amazon.BLOCKING_REASONS


def test_empty_bodies() -> None:
    for body, status, reason in ((b"", 200, "empty"), (b"  \n", None, "empty"), (b"", 503, "sorry_503")):
        with pytest.raises(AmazonPageError) as exc:
            amazon.parse_grid_page(body, "us", status=status)
        assert _reason(exc) == reason
    with pytest.raises(AmazonPageError) as exc:
        amazon.parse_grid("us", [])
    assert _reason(exc) == "empty"


def test_words_in_titles_and_the_nav_sign_in_link_are_not_refusals() -> None:
    """A product called "Robot Check" or "Captcha" and the header's /ap/signin link are normal pages."""
    page = _pages("us", *PHYSICAL)[0].decode()
    assert "/ap/signin" in page
    first = amazon.parse_grid_page(page.encode(), "us").entries[0]
    assert first.title is not None
    renamed = page.replace(escape(first.title), "Robot Check (Captcha Remix) Sorry! Something went wrong")
    entry = amazon.parse_grid_page(renamed.encode(), "us").entries[0]
    assert entry.title == "Robot Check (Captcha Remix) Sorry! Something went wrong"


def test_truncated_page() -> None:
    body = _pages("us", *PHYSICAL)[0]
    for cut in (len(body) // 3, len(body) - 60):
        with pytest.raises(AmazonPageError) as exc:
            amazon.parse_grid_page(body[:cut], "us")
        assert _reason(exc) == "truncated"


def test_broken_list_json_is_truncated() -> None:
    page = _pages("us", *PHYSICAL)[0].decode()
    broken = re.sub(r'data-client-recs-list="([^"]{200})[^"]*"', r'data-client-recs-list="\1"', page)
    with pytest.raises(AmazonPageError, match="not valid JSON") as exc:
        amazon.parse_grid_page(broken.encode(), "us")
    assert _reason(exc) == "truncated"


def test_a_hole_in_the_ranked_list_is_truncated() -> None:
    page = _pages("us", *PHYSICAL)[0].decode()
    items = _recs(page)
    del items[40]
    with pytest.raises(AmazonPageError, match="not 1..49") as exc:
        amazon.parse_grid_page(_with_recs(page, items).encode(), "us")
    assert _reason(exc) == "truncated"


def _recs(page: str) -> list[dict[str, object]]:
    from html import unescape

    match = re.search(r'data-client-recs-list="([^"]*)"', page)
    assert match
    items: list[dict[str, object]] = json.loads(unescape(match.group(1)))
    return items


def _with_recs(page: str, items: list[dict[str, object]]) -> str:
    attr = escape(json.dumps(items), quote=True)
    return re.sub(r'data-client-recs-list="[^"]*"', lambda _: f'data-client-recs-list="{attr}"', page)


def test_layout_gone() -> None:
    page = _pages("us", *PHYSICAL)[0].decode()
    cases = {
        "no list": re.sub(r'data-client-recs-list="[^"]*"', "", page),
        "list of another kind": _with_recs(page, [{"id": "B0ABCDEFGH", "metadataMap": {}}]),
        "no badges": page.replace("zg-bdg-text", "badge-text"),
        "no cards": page.replace('id="gridItemRoot"', 'id="gridItem"'),
        "card and list disagree": _with_recs(page, [{**item, "id": "B0ZZZZZZZZ"} if i == 3 else item
                                                    for i, item in enumerate(_recs(page))]),
        "json body": '{"error": "gone"}',
        "blank page": "<!doctype html><html><head><title>Amazon.com</title></head><body></body></html>",
    }
    for name, body in cases.items():
        with pytest.raises(AmazonPageError) as exc:
            amazon.parse_grid_page(body.encode(), "us")
        assert _reason(exc) == "layout_gone", name
    with pytest.raises(AmazonPageError, match="no ranked carousels") as landing:
        amazon.parse_landing(cases["blank page"].encode(), "us")
    assert _reason(landing) == "layout_gone"


def test_wrong_page() -> None:
    first, second = _pages("us", *PHYSICAL)
    checks = (
        lambda: amazon.parse_grid("us", [second, first]),
        lambda: amazon.parse_grid_page(first, "us", page=2),
        lambda: amazon.parse_grid_page(first, "us", expected_path="music/40"),
        lambda: amazon.parse_grid("us", [first, _pages("us", "retail-physical", "rock")[1]]),
        lambda: amazon.parse_grid("us", [_pages("us", "retail-physical", "jazz", size=45)[0], second]),
        lambda: amazon.parse_grid_page(b'<html><head><title>Page Not Found</title></head><body><a href="/ref=cs_404'
                                       b'_logo">Amazon</a></body></html>', "us"),
    )
    for check in checks:
        with pytest.raises(AmazonPageError) as exc:
            check()
        assert _reason(exc) == "wrong_page"


def test_reasons_are_distinguishable() -> None:
    assert len(set(amazon.REASONS)) == len(amazon.REASONS) == 7
    error = AmazonPageError("robot_check", "jp", "x")
    assert isinstance(error, UpstreamFormatError) and (error.reason, error.market) == ("robot_check", "jp")
    assert str(error) == "amazon jp: robot_check: x"


def test_carousel_without_cards_is_layout_gone() -> None:
    body = samples.render_landing("us").decode().replace("a-carousel-card", "a-carousel-tile")
    with pytest.raises(AmazonPageError, match="no rendered cards") as exc:
        amazon.parse_landing(body.encode(), "us")
    assert _reason(exc) == "layout_gone"


@pytest.mark.parametrize(("location", "reason"), [
    ("https://www.amazon.com/ap/signin?openid.return_to=x", "sign_in"),
    ("/errors/validateCaptcha?amzn=1", "robot_check"),
    ("/gp/bestsellers/music/", None), (None, None),
])
def test_redirect_reason(location: str | None, reason: str | None) -> None:
    assert amazon.redirect_reason(location) == reason


def test_one_page_one_body_for_categories_sharing_a_list() -> None:
    """retail-music's top songs and retail-digital's songs read one page: the samples answer it alike."""
    songs = samples.grid_replies("us", "retail-digital", "digital-songs", variant=4)
    top = samples.grid_replies("us", "retail-music", "top-songs", variant=4)
    assert songs == top
