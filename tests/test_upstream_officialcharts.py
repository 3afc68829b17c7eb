"""Official Charts Company parser: against the four real captures (new layout 2024 singles and albums and 1952 singles,
old layout 2018 dance singles), our rendered pages in both layouts, and small pages in the real row markup for each
refusal (robot check, consent wall, changed layout, truncated, short, wrong chart, bad ranks)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from chartgw.demo.replay import request_key
from chartgw.demo.samples import officialcharts as samples
from chartgw.upstreams import ORIGINS, UpstreamFormatError, officialcharts
from chartgw.upstreams.officialcharts import UkChartEntry, UkChartWeek

SINGLES_2024 = "officialcharts/uk-singles-20240503.html"
ALBUMS_2024 = "officialcharts/uk-albums-20240503.html"
SINGLES_1952 = "officialcharts/uk-singles-19521114.html"
DANCE_2018 = "officialcharts/dance-singles-chart_2018-09-21_old-layout_ben04rogers.html"

MZ = "https://is1-ssl.mzstatic.com/image/thumb/"
BACKSTAGE = "https://backstage.officialcharts.com/sites/default/files/styles/charted_item_artwork_medium/public/"
CHARTSDB = "http://live.chartsdb.officialcharts.com/img/small?url="


def _entry(rank: int, title: str, artist: str, last_week: int | None, peak: int | None, weeks: int | None,
           is_new: bool | None, is_reentry: bool | None, image: str | None, label: str | None = None) -> UkChartEntry:
    return UkChartEntry(rank=rank, title=title, artist=artist, last_week=last_week, peak=peak, weeks_on_chart=weeks,
                        label=label, is_new=is_new, is_reentry=is_reentry, image=image)


def _capture(shared_upstream: Path, name: str) -> bytes:
    return (shared_upstream / name).read_bytes()


# --- requests, chart table, weeks ------------------------------------------------------------------------------


def test_upstream_is_declared_with_the_real_origin() -> None:
    assert officialcharts.UPSTREAM == "OFFICIALCHARTS"
    assert ORIGINS["OFFICIALCHARTS"] == "https://www.officialcharts.com"


@pytest.mark.parametrize(
    ("key", "week", "path"),
    [
        ("singles", None, "/charts/singles-chart/"),
        ("singles", date(2024, 5, 3), "/charts/singles-chart/20240503/7501/"),
        ("singles", date(2024, 5, 9), "/charts/singles-chart/20240503/7501/"),  # Thursday: same week
        ("singles", date(2024, 5, 10), "/charts/singles-chart/20240510/7501/"),  # Friday: next week
        ("albums", date(2024, 5, 5), "/charts/albums-chart/20240503/7502/"),
        ("dance-singles", date(2018, 9, 27), "/charts/dance-singles-chart/20180921/104/"),
        ("singles", date(1952, 11, 14), "/charts/singles-chart/19521114/7501/"),
        ("scottish-singles", None, "/charts/scottish-singles-chart/"),
    ],
)
def test_requests_for_latest_and_a_given_week(key: str, week: date | None, path: str) -> None:
    (request,) = officialcharts.requests_for(key, week)
    assert (request.upstream, request.method, request.path, request.params) == ("OFFICIALCHARTS", "GET", path, ())
    headers = dict(request.headers)
    assert headers["User-Agent"].startswith("Mozilla/5.0")
    assert headers["Accept-Language"].startswith("en-GB")


def test_unknown_chart_key_is_rejected() -> None:
    with pytest.raises(ValueError, match="hot-100"):
        officialcharts.requests_for("hot-100")
    with pytest.raises(ValueError, match="known: singles"):
        officialcharts.parse("hot-100", b"<html></html>")


def test_chart_table_covers_the_families_with_unique_keys_paths_and_ids() -> None:
    keys = [chart.key for chart in officialcharts.CHARTS]
    assert len(set(keys)) == len(keys)
    assert len({chart.path for chart in officialcharts.CHARTS}) == len(keys)
    assert len({chart.chart_id for chart in officialcharts.CHARTS}) == len(keys)
    for family in ("singles", "albums", "dance-singles", "dance-albums", "indie-singles", "indie-albums",
                   "rnb-singles", "rnb-albums", "rock-metal-singles", "rock-metal-albums", "compilations",
                   "vinyl-singles", "vinyl-albums", "downloads-singles", "downloads-albums", "streaming",
                   "scottish-singles", "scottish-albums"):
        assert family in officialcharts.DEFAULT_KEYS
    assert officialcharts.check_key("singles") == officialcharts.ChartInfo(
        "singles", "singles-chart", "7501", "Official Singles Chart Top 100", "singles", 100)
    assert officialcharts.expected_size("singles") == officialcharts.expected_size("albums") == 100
    assert officialcharts.expected_size("dance-singles") == officialcharts.expected_size("rock-metal-albums") == 40
    assert officialcharts.expected_size("nope") is None
    assert officialcharts.chart_info("nope") is None
    assert officialcharts.key_for_path("albums-chart") == "albums"
    assert officialcharts.key_for_path("r-and-b-singles-chart") == "rnb-singles"
    assert officialcharts.key_for_path("film-chart") is None


@pytest.mark.parametrize("offset", range(7))
def test_every_day_of_a_chart_week_snaps_to_its_friday_and_thursday(offset: int) -> None:
    day = date(2024, 5, 3) + timedelta(days=offset)
    assert officialcharts.week_start_for(day) == date(2024, 5, 3)
    assert officialcharts.week_end_for(day) == date(2024, 5, 9)
    assert officialcharts.chart_week(day) == (date(2024, 5, 3), date(2024, 5, 9))
    assert officialcharts.previous_week_start(day) == date(2024, 4, 26)
    assert officialcharts.next_week_start(day) == date(2024, 5, 10)


def test_week_snapping_across_years_and_the_first_chart() -> None:
    assert officialcharts.week_start_for(date(2025, 1, 1)) == date(2024, 12, 27)
    assert officialcharts.week_end_for(date(2024, 12, 27)) == date(2025, 1, 2)
    assert officialcharts.week_start_for(officialcharts.FIRST_CHART_WEEK) == date(1952, 11, 14)
    assert officialcharts.week_start_for(date(1952, 11, 20)) == date(1952, 11, 14)


# --- real captures ---------------------------------------------------------------------------------------------


def _head(chart: UkChartWeek) -> tuple[object, ...]:
    return (chart.chart_key, chart.chart_path, chart.chart_id, chart.title, chart.week_start, chart.week_end,
            chart.previous_week_start, chart.next_week_start, chart.layout, len(chart.entries))


def test_real_singles_2024_new_layout(shared_upstream: Path) -> None:
    chart = officialcharts.parse("singles", _capture(shared_upstream, SINGLES_2024))
    assert _head(chart) == ("singles", "singles-chart", "7501", "Official Singles Chart Top 100", "2024-05-03",
                            "2024-05-09", "2024-04-26", None, "new", 100)
    entries = chart.entries
    assert entries[0] == _entry(
        1, "ESPRESSO", "SABRINA CARPENTER", 5, 1, 3, False, False,
        MZ + "Music211/v4/cb/64/8c/cb648cf7-e7bb-bd00-efe0-d744312c29a8/24UMGIM32304.rgb.jpg/247x247bb.jpg")
    assert entries[1] == _entry(
        2, "FORTNIGHT", "TAYLOR SWIFT FT POST MALONE", 1, 1, 2, False, False,
        MZ + "Music221/v4/6b/7d/61/6b7d61e4-e6f1-83bc-d645-463aa06b33c4/24UMGIM29563.rgb.jpg/247x247bb.jpg")
    assert entries[7] == _entry(
        8, "I CAN DO IT WITH A BROKEN HEART", "TAYLOR SWIFT", None, 8, 1, True, False,
        MZ + "Music221/v4/6b/7d/61/6b7d61e4-e6f1-83bc-d645-463aa06b33c4/24UMGIM29563.rgb.jpg/247x247bb.jpg")
    assert entries[12] == _entry(
        13, "SCARED TO START", "MICHAEL MARCAGI", 13, 9, 16, False, False, entries[12].image)
    assert entries[48] == _entry(
        49, "TEARS DRY ON THEIR OWN", "AMY WINEHOUSE", None, 16, 30, False, True,
        "https://m.media-amazon.com/images/I/410Cu8-c+sL._SL500_.jpg")
    assert entries[83] == _entry(
        84, "FEATHER", "SABRINA CARPENTER", None, 19, 15, False, True,
        MZ + "Music126/v4/c4/7e/22/c47e22bf-0d2b-e211-815c-39c41428c6a4/23UMGIM16392.rgb.jpg/247x247bb.jpg")
    assert entries[99] == _entry(
        100, "SOMEONE YOU LOVED", "LEWIS CAPALDI", None, 1, 234, False, True,
        BACKSTAGE + "2023-12/Someone%20You%20Loved%20-%20Lewis%20Capaldi.png?itok=iyzQsTeE")
    assert [e.rank for e in entries] == list(range(1, 101))
    assert (sum(bool(e.is_new) for e in entries), sum(bool(e.is_reentry) for e in entries)) == (6, 5)
    assert all(e.label is None for e in entries)
    assert officialcharts.require_size(chart, "singles") is chart


def test_real_albums_2024_new_layout(shared_upstream: Path) -> None:
    chart = officialcharts.parse("albums", _capture(shared_upstream, ALBUMS_2024))
    assert _head(chart) == ("albums", "albums-chart", "7502", "Official Albums Chart Top 100", "2024-05-03",
                            "2024-05-09", "2024-04-26", None, "new", 100)
    entries = chart.entries
    assert entries[0] == _entry(
        1, "THE TORTURED POETS DEPARTMENT", "TAYLOR SWIFT", 1, 1, 2, False, False,
        BACKSTAGE + "2024-02/taylor-swift-the-tortured-poets-department-album.jpg?itok=5-f4oL14")
    assert entries[33] == _entry(
        34, "HYPERDRAMA", "JUSTICE", None, 34, 1, True, False,
        MZ + "Music126/v4/c2/19/4b/c2194bc8-63e2-b31f-b872-9611aa5fcded/5056556135845_cover.jpg/247x247bb.jpg")
    assert entries[76] == _entry(
        77, "HAPPIER THAN EVER", "BILLIE EILISH", None, 1, 103, False, True,
        MZ + "Music115/v4/2d/f3/c9/2df3c9fd-e0eb-257c-c035-b04f05a66580/21UMGIM36691.rgb.jpg/247x247bb.jpg")
    assert entries[80].title == "=" and entries[80].artist == "ED SHEERAN"
    assert entries[99] == _entry(
        100, "THE SINGLES", "PHIL COLLINS", 98, 2, 243, False, False,
        MZ + "Music71/v4/36/d4/03/36d40372-673f-c025-d459-f84ab8b6630a/dj.qqfzgcpy.jpg/247x247bb.jpg")
    assert [e.rank for e in entries] == list(range(1, 101))


def test_real_singles_1952_first_chart_with_ties_and_no_movement(shared_upstream: Path) -> None:
    chart = officialcharts.parse("singles", _capture(shared_upstream, SINGLES_1952))
    assert _head(chart) == ("singles", "singles-chart", "7501", "Official Singles Chart", "1952-11-14",
                            "1952-11-20", None, "1952-11-21", "new", 15)
    entries = chart.entries
    assert entries[0] == _entry(
        1, "HERE IN MY HEART", "AL MARTINO", None, 1, 1, None, None,
        BACKSTAGE + "2023-09/Here%20In%20My%20Heart%20-%20Al%20Martino.jpg?itok=F10qDU3G")
    assert entries[2] == _entry(3, "SOMEWHERE ALONG THE WAY", "NAT 'KING' COLE", None, 3, 1, None, None, None)
    assert entries[6] == _entry(7, "FORGET ME NOT", "VERA LYNN", None, 7, 1, None, None, None)
    assert entries[7] == _entry(
        7, "HIGH NOON (DO NOT FORSAKE ME)", "FRANKIE LAINE", None, 7, 1, None, None,
        "http://coverartarchive.org/release/17811857-256e-4b59-9aa0-1b1de2b1864b/30403015695-250.jpg")
    assert entries[8] == _entry(8, "SUGARBUSH", "DORIS DAY AND FRANKIE LAINE", None, 8, 1, None, None, None)
    assert entries[14] == _entry(12, "WALKIN' MY BABY BACK HOME", "JOHNNIE RAY", None, 12, 1, None, None, None)
    assert [e.rank for e in entries] == [1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 9, 10, 11, 11, 12]
    # A 1952 week is legitimately short: only a current-week crawl applies the size check.
    with pytest.raises(UpstreamFormatError, match="short page, 15 of 100 rows"):
        officialcharts.require_size(chart, "singles")
    assert officialcharts.require_size(chart, "singles", size=12) is chart


def test_real_dance_singles_2018_old_layout(shared_upstream: Path) -> None:
    chart = officialcharts.parse("dance-singles", _capture(shared_upstream, DANCE_2018))
    assert _head(chart) == ("dance-singles", "dance-singles-chart", "104", "Official Dance Singles Chart Top 40",
                            "2018-09-21", "2018-09-27", "2018-09-14", "2018-09-28", "old", 40)
    entries = chart.entries
    assert entries[0] == _entry(
        1, "PROMISES", "CALVIN HARRIS & SAM SMITH", 1, 1, 5, False, False,
        CHARTSDB + "/images/artwork/883f77dd5577fbee3640c6478861e494.jpg", label="COLUMBIA")
    assert entries[3] == _entry(
        4, "ONE KISS", "CALVIN HARRIS & DUA LIPA", 4, 1, 24, False, False,
        CHARTSDB + "/images/artwork/b29b955f50bf992a5e958bc40ecb929d.jpg", label="COLUMBIA/WARNER BROS")
    assert entries[9] == _entry(
        10, "SOMETHING JUST LIKE THIS", "CHAINSMOKERS & COLDPLAY", 11, 1, 83, False, False,
        CHARTSDB + "https://images-eu.ssl-images-amazon.com/images/I/51F0ZZQum-L.jpg", label="DISRUPTOR")
    assert entries[11] == _entry(
        12, "LET ME LIVE", "RUDIMENTAL/MAJOR LAZER/ANNE", 10, 7, 14, False, False,
        CHARTSDB + "/images/artwork/b3767daeb2f5b72482d9c0dc48355ee7.jpg", label="ASYLUM")
    assert entries[12] == _entry(13, "SAY MY NAME", "DAVID GUETTA/BEBE REXHA/BALVIN", None, 13, 1, True, False, None,
                                 label="PARLOPHONE")
    assert entries[27] == _entry(
        28, "LIKE I DO", "GUETTA/GARRIX/BROOKS", None, 3, 25, False, True,
        CHARTSDB + "/images/artwork/8a9693569f50ce5b9e940f1ee38ed881.jpg", label="PARLOPHONE")
    assert entries[39] == _entry(
        40, "LEVELS", "AVICII", None, 1, 133, False, True,
        CHARTSDB + "http://ecx.images-amazon.com/images/I/51f-o3jhRML.jpg", label="ISLAND")
    assert [e.rank for e in entries] == list(range(1, 41))
    assert officialcharts.require_size(chart, "dance-singles") is chart


def test_real_page_of_another_chart_is_refused(shared_upstream: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="the page is the 'singles-chart' chart"):
        officialcharts.parse("albums", _capture(shared_upstream, SINGLES_2024))
    with pytest.raises(UpstreamFormatError, match="'dance-singles-chart'"):
        officialcharts.parse("singles", _capture(shared_upstream, DANCE_2018))


def test_real_page_with_renamed_rows_is_a_changed_layout(shared_upstream: Path) -> None:
    body = _capture(shared_upstream, SINGLES_2024).replace(b"chart-item", b"chart-entry")
    with pytest.raises(UpstreamFormatError, match="no chart rows .*layout changed"):
        officialcharts.parse("singles", body)


def test_real_page_cut_short_is_a_truncated_page(shared_upstream: Path) -> None:
    body = _capture(shared_upstream, SINGLES_2024)
    with pytest.raises(UpstreamFormatError, match="truncated page"):
        officialcharts.parse("singles", body[: len(body) // 2])


def test_real_page_without_its_week_line_falls_back_to_the_heading(shared_upstream: Path) -> None:
    body = _capture(shared_upstream, SINGLES_2024).replace(b"text-brand-cobalt text-sm", b"intro text-sm")
    chart = officialcharts.parse("singles", body)
    assert (chart.week_start, chart.week_end) == ("2024-05-03", "2024-05-09")


# --- refusals on small pages -----------------------------------------------------------------------------------

ITEM = """<div class="chart-item relative text-right" data-item="item-1-{i}"><div class="chart-item-content relative \
flex w-full"><div class="position"><span class="digits1 chart-key font-bold"><span class="sr-only">Number </span>\
<strong>{rank}</strong></span><div class="chart-image"><img alt="X cover art" loading="lazy" class="chart-image-small \
rounded-md shadow-sm" src="/fallback/artwork-pink.svg" width="80" height="80"></div></div><div class="description \
block"><p><a href="/songs/x/" class="chart-name font-bold inline-block"><!----><span class="movement-icon"></span>\
<span>{title}</span></a><br>{artist}</p><div class="stats"><ol class="text-2xs sm:text-sm"><li class="movement px-2 \
py-1 rounded-md inline-block mr-1 sm:mr-2"><!--[--><span title="Last week">LW: <span class="text-brand-pink \
font-bold">{lw}</span></span><!--]--></li><li class="peak px-2">Peak: <span class="text-brand-cobalt font-bold">\
{peak}</span><span>, </span></li><li class="weeks px-2">Weeks: <span class="text-brand-pink font-bold">2</span>\
</li></ol></div></div></div></div>"""
ARTIST_LINK = '<a href="/artist/1/x/" class="chart-artist text-lg inline-block"><span>{}</span></a>'


def _item(i: int, rank: int | str, title: str = "SONG", artist: str | None = None, lw: str = "3",
          peak: str = "1") -> str:
    credit = artist if artist is not None else ARTIST_LINK.format(f"ARTIST {i}")
    return ITEM.format(i=i, rank=rank, title=title, artist=credit, lw=lw, peak=peak)


def _page(*items: str, week: str = "3 May 2024<span> - 9 May 2024</span>") -> bytes:
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Official Singles Chart Top 100 | \
Official Charts</title></head><body><div class="flex"><a href="/charts/singles-chart/20240426/7501/" class="btn \
chevron rotate-180"><span class="sr-only">Previous</span></a><a href="/charts/singles-chart/20240510/7501/" \
class="btn chevron"><span class="sr-only">Next</span></a></div><div class="prose"><h1>Official Singles Chart Top 100\
<span class="sr-only"> on 3/5/2024</span></h1><p class="text-brand-cobalt font-bold">{week}</p></div><div \
class="no-intro chart-items">{"".join(items)}</div></body></html>""".encode()


def test_small_page_parses_with_both_week_links() -> None:
    chart = officialcharts.parse("singles", _page(_item(0, 1), _item(1, 2, lw="1")))
    assert _head(chart) == ("singles", "singles-chart", "7501", "Official Singles Chart Top 100", "2024-05-03",
                            "2024-05-09", "2024-04-26", "2024-05-10", "new", 2)
    assert chart.entries[1] == _entry(2, "SONG", "ARTIST 1", 1, 1, 2, False, False, None)


def test_artist_without_a_link_is_read_from_the_span() -> None:
    unlinked = '<span class="chart-artist text-lg inline-block"><span>VARIOUS ARTISTS</span></span>'
    (entry,) = officialcharts.parse("singles", _page(_item(0, 1, artist=unlinked))).entries
    assert entry.artist == "VARIOUS ARTISTS"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty body"),
        (b"  \n ", "empty body"),
        (b"<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>", "robot check"),
        (b"<html><body><h1>Are you a robot?</h1><div class='g-recaptcha'></div></body></html>", "robot check"),
        ((b"<html><head><title>Official Charts</title></head><body><div class='qc-cmp2-container'>We value your "
          b"privacy</div></body></html>"), "consent page"),
        (b'{"error": "not found"}', "not an HTML page"),
        (b"<html><body><h1>Page not found</h1></body></html>", "no chart rows"),
    ],
)
def test_pages_without_rows_are_refused_with_the_reason(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        officialcharts.parse("singles", body)


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ((_item(0, 2),), "ranks out of order at row 1"),
        ((_item(0, 1), _item(1, 3)), "ranks out of order at row 2"),
        ((_item(0, 1), _item(1, 2), _item(2, 1)), "ranks out of order at row 3"),
        ((_item(0, "one"),), "rank is not a number"),
        ((_item(0, 1, title=""),), "empty title"),
        ((_item(0, 1, artist=""),), "empty artist"),
        ((_item(0, 1, lw="up"),), "last week is not a number"),
        ((_item(0, 1, peak="n/a"),), "peak is not a number"),
    ],
)
def test_bad_rows_are_refused(items: tuple[str, ...], reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        officialcharts.parse("singles", _page(*items))


def test_page_without_a_week_is_refused() -> None:
    body = _page(_item(0, 1), week="").replace(b' on 3/5/2024', b"")
    with pytest.raises(UpstreamFormatError, match="no chart week printed"):
        officialcharts.parse("singles", body)


def test_a_short_current_page_is_refused_by_require_size() -> None:
    chart = officialcharts.parse("singles", _page(*(_item(i, i + 1) for i in range(99))))
    with pytest.raises(UpstreamFormatError, match="singles 2024-05-03: short page, 99 of 100 rows"):
        officialcharts.require_size(chart, "singles")


# --- our rendered pages ----------------------------------------------------------------------------------------

LATEST = date(2026, 11, 20)


@pytest.mark.parametrize("layout", ["new", "old"])
@pytest.mark.parametrize("key", ["singles", "albums", "dance-singles", "indie-albums", "scottish-singles",
                                 "rnb-singles"])
def test_rendered_pages_round_trip(key: str, layout: samples.Layout) -> None:
    for variant in range(3):
        week = LATEST - timedelta(days=7 * (2 - variant))
        body = samples.render(key, week + timedelta(days=2), variant, layout=layout, latest_week=LATEST)
        chart = officialcharts.parse(key, body)
        rows = samples.sample_week(key, variant)
        info = officialcharts.check_key(key)
        assert (chart.chart_key, chart.chart_path, chart.chart_id, chart.layout) == (key, info.path, info.chart_id,
                                                                                     layout)
        assert (chart.week_start, chart.week_end) == (week.isoformat(), (week + timedelta(days=6)).isoformat())
        assert chart.previous_week_start == (week - timedelta(days=7)).isoformat()
        assert chart.next_week_start == (None if variant == 2 else (week + timedelta(days=7)).isoformat())
        assert officialcharts.require_size(chart, key) is chart
        assert chart.entries == [
            UkChartEntry(
                rank=row.rank, title=row.title, artist=row.artist, last_week=row.last_week, peak=row.peak,
                weeks_on_chart=row.weeks, label=(row.song.label or "INDEPENDENT").upper() if layout == "old" else None,
                is_new=row.is_new, is_reentry=row.is_reentry,
                image=(samples.cover_url(row.song, 247) if layout == "new" else samples.old_cover_url(row.song)),
            )
            for row in rows
        ]


def test_rendered_title_line_and_ads_match_the_real_page() -> None:
    body = samples.render("singles", LATEST, 0)
    assert b"<title>Official Singles Chart Top 100 on 20&#x2F;11&#x2F;2026 | Official Charts</title>" in body
    assert b"20 November 2026<span> - 26 November 2026</span>" in body
    assert body.count(b"chart-ad") == 10  # one inside the #1 row, then one after every tenth row
    assert samples.render("singles", LATEST, 0) == body  # deterministic


def test_sample_weeks_are_consistent_from_week_to_week() -> None:
    for key in ("singles", "dance-singles", "albums"):
        weeks = samples.sample_weeks(key, 8)
        assert all(len(week) == officialcharts.expected_size(key) for week in weeks)
        for number, week in enumerate(weeks):
            assert any(row.is_new for row in week) or number == 7
            before = {row.song.title: row for row in weeks[number - 1]} if number else {}
            seen = {row.song.title for earlier in weeks[:number] for row in earlier}
            for row in week:
                assert row.peak <= row.rank and row.is_new == (row.weeks == 1)
                assert not (row.is_new and row.is_reentry)
                if number:
                    last = before.get(row.song.title)
                    assert row.last_week == (last.rank if last else None)
                    if last:
                        assert (row.weeks, row.peak) == (last.weeks + 1, min(last.peak, row.rank))
                    if row.song.title in seen:
                        assert not row.is_new
        assert sum(row.is_reentry for week in weeks for row in week) >= len(weeks)
        assert any(row.last_week and row.last_week > row.rank for row in weeks[-1])
        assert any(row.last_week and row.last_week < row.rank for row in weeks[-1])


def test_chart_replies_hold_consecutive_weeks_and_the_latest() -> None:
    replies = samples.chart_replies("singles", LATEST + timedelta(days=3), weeks=4)
    assert len(replies) == 5
    starts = []
    for back in range(4):
        week = LATEST - timedelta(days=7 * back)
        (request,) = officialcharts.requests_for("singles", week)
        chart = officialcharts.parse("singles", replies[request_key(request)].body)
        starts.append(chart.week_start)
        assert chart.entries[0].title == samples.sample_week("singles", 3 - back)[0].title
    assert starts == ["2026-11-20", "2026-11-13", "2026-11-06", "2026-10-30"]
    (latest,) = officialcharts.requests_for("singles")
    (dated,) = officialcharts.requests_for("singles", LATEST)
    assert replies[request_key(latest)] == replies[request_key(dated)]
    assert replies[request_key(latest)].content_type.startswith("text/html")


def test_all_replies_cover_every_chart_key() -> None:
    replies = samples.all_replies(LATEST, weeks=2, keys=("singles", "albums", "streaming"))
    assert len(replies) == 3 * 3
    for key in ("singles", "albums", "streaming"):
        (request,) = officialcharts.requests_for(key)
        chart = officialcharts.parse(key, replies[request_key(request)].body)
        assert chart.week_start == LATEST.isoformat()
        assert len(chart.entries) == officialcharts.expected_size(key)


def test_page_without_week_arrows_names_its_chart_from_og_url(shared_upstream: Path) -> None:
    body = _capture(shared_upstream, ALBUMS_2024).replace(b"chevron", b"arrow")
    chart = officialcharts.parse("albums", body)
    assert (chart.chart_key, chart.chart_path, chart.chart_id) == ("albums", "albums-chart", None)
    assert (chart.previous_week_start, chart.next_week_start) == (None, None)
    with pytest.raises(UpstreamFormatError, match="the page is the 'albums-chart' chart"):
        officialcharts.parse("singles", body)


def test_old_page_without_week_links_names_its_chart_from_the_date_form(shared_upstream: Path) -> None:
    body = _capture(shared_upstream, DANCE_2018).replace(b"chart-date-directions", b"directions")
    chart = officialcharts.parse("dance-singles", body)
    assert (chart.chart_key, chart.chart_path, chart.chart_id) == ("dance-singles", "dance-singles-chart", "104")
    assert (chart.previous_week_start, chart.next_week_start) == (None, None)


@pytest.mark.parametrize("key", officialcharts.DEFAULT_KEYS)
def test_every_chart_key_renders_a_full_page_that_parses(key: str) -> None:
    chart = officialcharts.parse(key, samples.render(key, LATEST, 1))
    assert chart.chart_key == key and chart.week_start == LATEST.isoformat()
    assert officialcharts.require_size(chart, key) is chart
    assert chart.title == officialcharts.check_key(key).title
