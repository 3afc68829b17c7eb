"""Billboard: the chart-page parser against both real captures and our rendered pages (2021-2024 and post-2024
markup), the billboard.py dump parser against its four reference dumps, the chart-week arithmetic, the sample
weeks' consistency, and every refusal (empty, robot check, paywall, changed layout, truncated, short, wrong chart)."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from itertools import pairwise
from pathlib import Path

import msgspec
import pytest

from chartgw.demo.replay import request_key
from chartgw.demo.samples import billboard as samples
from chartgw.upstreams import ORIGINS, UpstreamFormatError, billboard
from chartgw.upstreams.billboard import ChartWeek, RankingEntry, RankingEntryWithRaw, RawEntry

HOT_100_2021 = "billboard/hot-100_2021-11-27_rikesahn-SongRecommender.html"
HOT_100_2024 = "billboard/hot-100_2024-12-07_browser-saved_Sadavar-si206.html"
DUMPS = "billboard/billboard-py-reference"


def _e(rank: int, title: str | None, artist: str, image: str | None, last_week: int | None, peak: int | None,
       weeks: int | None, is_new: bool | None = False, is_reentry: bool | None = False) -> RankingEntry:
    return RankingEntry(rank=rank, title=title, artist=artist, image=image, last_week=last_week, peak=peak,
                        weeks_on_chart=weeks, is_new=is_new, is_reentry=is_reentry)


def _img(path: str) -> str:
    return f"https://charts-static.billboard.com/img/{path}"


# --- requests and the chart table ----------------------------------------------------------------------------


def test_upstream_is_declared_with_the_real_origin() -> None:
    assert billboard.UPSTREAM == "BILLBOARD"
    assert ORIGINS["BILLBOARD"] == "https://www.billboard.com"


def test_latest_and_dated_requests_use_the_sites_paths() -> None:
    (latest,) = billboard.requests_for("hot-100")
    assert (latest.upstream, latest.method, latest.path, latest.params) == ("BILLBOARD", "GET", "/charts/hot-100/", ())
    assert dict(latest.headers)["User-Agent"].startswith("Mozilla/5.0")
    (week,) = billboard.requests_for("billboard-200", date(2024, 12, 7))
    assert week.path == "/charts/billboard-200/2024-12-07/"
    # Any day asks for the chart date of its week, so one week is always one URL.
    (midweek,) = billboard.requests_for("billboard-200", date(2024, 12, 3))
    assert midweek.path == "/charts/billboard-200/2024-12-07/"


@pytest.mark.parametrize("slug", ["", "Hot-100", "hot 100", "../etc", "hot-100/", "-hot"])
def test_bad_slugs_are_refused(slug: str) -> None:
    with pytest.raises(ValueError):
        billboard.requests_for(slug)
    with pytest.raises(ValueError):
        billboard.parse(slug, b"<html></html>")


def test_default_chart_table() -> None:
    for slug in ("hot-100", "billboard-200", "artist-100", "billboard-global-200", "billboard-global-excl-us",
                 "hot-country-songs", "hot-r-and-b-hip-hop-songs", "hot-rock-alternative-songs", "hot-latin-songs",
                 "dance-electronic-songs"):
        assert slug in billboard.DEFAULT_SLUGS
    sizes = {slug: billboard.expected_size(slug) for slug in billboard.DEFAULT_SLUGS}
    assert (sizes["hot-100"], sizes["billboard-200"], sizes["artist-100"]) == (100, 200, 100)
    assert sizes["billboard-global-200"] == sizes["billboard-global-excl-us"] == 200
    assert sizes["hot-country-songs"] == 50 and sizes["hot-rap-songs"] == 25
    assert billboard.expected_size("no-such-chart") is None
    kinds = {chart.slug: chart.kind for chart in billboard.CHARTS}
    assert (kinds["hot-100"], kinds["billboard-200"], kinds["artist-100"]) == ("songs", "albums", "artists")
    assert billboard.chart_info("hot-100") == billboard.ChartInfo("hot-100", "Billboard Hot 100", "songs", 100)


# --- chart weeks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("day", "chart_date"),
    [
        (date(2024, 12, 7), date(2024, 12, 7)),  # a Saturday is its own chart date
        (date(2024, 12, 1), date(2024, 12, 7)),  # Sunday starts the week dated the next Saturday
        (date(2024, 12, 3), date(2024, 12, 7)),  # Tuesday, the publication day
        (date(2024, 12, 8), date(2024, 12, 14)),
        (date(2024, 12, 29), date(2025, 1, 4)),  # across a year
        (date(1958, 8, 4), date(1958, 8, 4)),  # the first Hot 100, a Monday
        (date(1958, 8, 5), date(1958, 8, 11)),
        (date(1961, 12, 25), date(1961, 12, 25)),  # the last Monday chart
        (date(1961, 12, 26), date(1962, 1, 6)),  # no chart dated 1961-12-30
        (date(1962, 1, 6), date(1962, 1, 6)),
    ],
)
def test_chart_date_for(day: date, chart_date: date) -> None:
    assert billboard.chart_date_for(day) == chart_date
    assert billboard.is_chart_date(chart_date)
    assert billboard.is_chart_date(day) == (day == chart_date)


def test_every_day_snaps_to_the_saturday_of_its_week() -> None:
    day = date(2019, 1, 1)
    while day < date(2026, 1, 1):
        snapped = billboard.chart_date_for(day)
        assert snapped.weekday() == 5 and timedelta(0) <= snapped - day <= timedelta(days=6)
        day += timedelta(days=1)


def test_previous_and_next_chart_dates() -> None:
    assert billboard.previous_chart_date(date(2024, 12, 7)) == date(2024, 11, 30)
    assert billboard.previous_chart_date(date(2024, 12, 4)) == date(2024, 11, 30)  # the week of a Wednesday
    assert billboard.next_chart_date(date(2024, 12, 7)) == date(2024, 12, 14)
    assert billboard.previous_chart_date(date(1962, 1, 6)) == date(1961, 12, 25)
    assert billboard.next_chart_date(date(1961, 12, 25)) == date(1962, 1, 6)
    assert billboard.previous_chart_date(date(1958, 8, 11)) == date(1958, 8, 4)
    # Walking back and forth is lossless across the 1962 change of weekday.
    week = date(1962, 2, 3)
    for _ in range(10):
        assert billboard.next_chart_date(billboard.previous_chart_date(week)) == week
        week = billboard.previous_chart_date(week)
    assert week == date(1961, 11, 20)


# --- real captures -------------------------------------------------------------------------------------------


def test_real_hot_100_2021(shared_upstream: Path) -> None:
    chart = billboard.parse("hot-100", (shared_upstream / HOT_100_2021).read_bytes())
    assert (chart.slug, chart.title, chart.chart_date, chart.layout) == ("hot-100", "The Hot 100", "2021-11-27", "2021")
    assert (chart.previous_date, chart.next_date) == (None, None)
    assert [e.rank for e in chart.entries] == list(range(1, 101)) and len(chart.raw) == 100
    by_rank = {e.rank: e for e in chart.entries}
    assert by_rank[1] == _e(1, "All Too Well (Taylor's Version)", "Taylor Swift",
                            _img("2021/11/taylor-swift-5wo-all-too-well-taylors-version-q6v-180x180.jpg"),
                            None, 1, 1, is_new=True)
    assert by_rank[2] == _e(2, "Easy On Me", "Adele", _img("2021/10/adele-v39-easy-on-me-zy9-180x180.jpg"), 1, 1, 6)
    assert by_rank[3] == _e(3, "Stay", "The Kid LAROI & Justin Bieber",
                            _img("2021/07/the-kid-laroi-qev-stay-ens-180x180.jpg"), 2, 1, 19)
    assert by_rank[36] == _e(36, "All I Want For Christmas Is You", "Mariah Carey",
                             _img("1994/12/mariah-carey-99g-all-i-want-for-christmas-is-you-3w0-180x180.jpg"),
                             None, 1, 45, is_reentry=True)
    assert by_rank[50] == _e(50, "Same Boat", "Zac Brown Band",
                             _img("2021/06/zac-brown-band-tn8-same-boat-egx-180x180.jpg"), 51, 48, 9)
    assert by_rank[99] == _e(99, "Take My Breath", "The Weeknd",
                             _img("2021/08/the-weeknd-uyi-take-my-breath-gke-180x180.jpg"), 70, 6, 15)
    assert by_rank[100] == _e(100, "For Tonight", "Giveon", _img("2021/10/giveon-gpd-for-tonight-u6x-180x180.jpg"),
                              92, 80, 7)
    assert Counter((e.is_new, e.is_reentry) for e in chart.entries) == {(False, False): 64, (True, False): 34,
                                                                         (False, True): 2}
    assert [e.rank for e in chart.entries if e.is_reentry] == [36, 75]
    # What the page said, verbatim: the 2021 badge spelling, the "-" of a re-entry's last week.
    assert chart.raw[35] == RawEntry(rank="36", title="All I Want For Christmas Is You", artist="Mariah Carey",
                                     image=by_rank[36].image, last_week="-", peak="1", weeks_on_chart="45",
                                     marker="RE-\nENTER")
    assert chart.raw[1].marker is None and chart.raw[0].marker == "NEW"


def test_real_hot_100_2024_browser_saved(shared_upstream: Path) -> None:
    chart = billboard.parse("hot-100", (shared_upstream / HOT_100_2024).read_bytes())
    assert (chart.slug, chart.title, chart.chart_date, chart.layout) == (
        "hot-100", "Billboard Hot 100™", "2024-12-07", "2021")
    assert [e.rank for e in chart.entries] == list(range(1, 101))
    by_rank = {e.rank: e for e in chart.entries}
    # Images the browser saved to disk are local files, not the row's image: null, the raw value kept.
    assert by_rank[1] == _e(1, "Squabble Up", "Kendrick Lamar", None, None, 1, 1, is_new=True)
    assert chart.raw[0].image == "billboard_hot_100_files/kendrick-lamar-1hw-180x180.jpg"
    assert by_rank[2] == _e(2, "TV Off", "Kendrick Lamar Featuring Lefty Gunplay", None, None, 2, 1, is_new=True)
    assert by_rank[3] == _e(3, "Luther", "Kendrick Lamar & SZA", None, None, 3, 1, is_new=True)
    assert by_rank[19] == _e(19, "Jingle Bell Rock", "Bobby Helms", None, None, 3, 57, is_reentry=True)
    assert chart.raw[18].marker == "RE-\nENTRY"
    assert by_rank[50] == _e(50, "Bed Chem", "Sabrina Carpenter", _img("2014/06/sabrina-carpenter-3b3-180x180.jpg"),
                             28, 14, 14)
    assert by_rank[99] == _e(99, "Apple", "Charli xcx", _img("2012/06/charli-xcx-cvd-87x87.jpg"), 89, 51, 19)
    assert by_rank[100] == _e(100, "Wondering Why", "The Red Clay Strays",
                              _img("2023/11/theredclaystrays-xuz-wonderingwhy-3s6-180x180.jpg"), 95, 71, 17)
    assert Counter((e.is_new, e.is_reentry) for e in chart.entries) == {(False, False): 71, (True, False): 22,
                                                                         (False, True): 7}
    assert [e.rank for e in chart.entries if e.is_reentry] == [19, 39, 41, 42, 43, 46, 48]
    assert sum(e.image is None for e in chart.entries) == 31


def test_real_page_of_another_chart_is_refused(shared_upstream: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="'hot-100' chart"):
        billboard.parse("billboard-200", (shared_upstream / HOT_100_2021).read_bytes())


def test_real_page_truncated_is_refused(shared_upstream: Path) -> None:
    body = (shared_upstream / HOT_100_2021).read_bytes()
    with pytest.raises(UpstreamFormatError, match="truncated"):
        billboard.parse("hot-100", body[: len(body) * 2 // 3])


def test_real_page_passes_the_size_check(shared_upstream: Path) -> None:
    chart = billboard.parse("hot-100", (shared_upstream / HOT_100_2024).read_bytes())
    assert billboard.require_size(chart, "hot-100") is chart
    with pytest.raises(UpstreamFormatError, match="100 of 200"):
        billboard.require_size(chart, "hot-100", size=200)


# --- billboard.py dumps --------------------------------------------------------------------------------------


def test_dump_1979_hot_100(shared_upstream: Path) -> None:
    chart = billboard.parse_billboard_py_json((shared_upstream / DUMPS / "1979-08-04-hot-100.json").read_bytes(),
                                              "hot-100")
    assert (chart.slug, chart.title, chart.chart_date, chart.previous_date, chart.next_date, chart.layout) == (
        "hot-100", "Billboard Hot 100™", "1979-08-04", "1979-07-28", "1979-08-11", "billboard.py")
    assert [e.rank for e in chart.entries] == list(range(1, 101))
    assert chart.entries[0] == _e(1, "Bad Girls", "Donna Summer", None, 1, 1, 11)
    assert chart.entries[1] == _e(2, "Good Times", "Chic", None, 3, 2, 8)
    assert chart.entries[40] == _e(41, "Don't Bring Me Down", "Electric Light Orchestra", None, None, 41, 1,
                                   is_new=True)
    assert chart.entries[-1] == _e(100, "You're The Only One", "Dolly Parton", None, 71, 59, 6)
    assert sum(bool(e.is_new) for e in chart.entries) == 7
    assert chart.raw[40] == RawEntry(rank="41", title="Don't Bring Me Down", artist="Electric Light Orchestra",
                                     image=None, last_week="0", peak="41", weeks_on_chart="1", marker="true")


def test_dump_2006_jazz_albums_derives_reentries(shared_upstream: Path) -> None:
    body = (shared_upstream / DUMPS / "2006-08-05-traditional-jazz-albums.json").read_bytes()
    chart = billboard.parse_billboard_py_json(body)
    assert (chart.slug, chart.title, chart.chart_date, len(chart.entries)) == (
        "traditional-jazz-albums", "Traditional Jazz Albums", "2006-08-05", 25)
    assert chart.entries[0] == _e(1, "It's Time", "Michael Buble",
                                  _img("2005/02/michael-buble-000-its-time-36m-53x53.jpg"), 1, 1, 76)
    assert chart.entries[9] == _e(
        10, "Dear Mr. Sinatra", "John Pizzarelli With The Clayton-Hamilton Jazz Orchestra",
        _img("2006/08/john-pizzarelli-with-the-clayton-hamilton-jazz-orchestra-000-dear-mr-sinatra-f29-53x53.jpg"),
        None, 10, 1, is_new=True)
    # Not new, no last week, four weeks on: a re-entry (derived; billboard.py does not keep the badge).
    assert chart.entries[11] == _e(12, "Sophie Milman", "Sophie Milman",
                                   _img("2006/04/sophie-milman-kax-sophie-milman-eos-53x53.jpg"), None, 12, 4,
                                   is_reentry=True)
    assert chart.entries[-1] == _e(25, "I'll Be Seeing You", "Regina Carter",
                                   _img("2006/07/regina-carter-kjt-ill-be-seeing-you-frs-53x53.jpg"), 22, 18, 6)


def test_dump_2014_artist_100_has_no_titles(shared_upstream: Path) -> None:
    chart = billboard.parse_billboard_py_json((shared_upstream / DUMPS / "2014-08-02-artist-100.json").read_bytes(),
                                              "artist-100")
    assert (chart.title, chart.chart_date, len(chart.entries)) == ("Billboard Artist 100", "2014-08-02", 100)
    assert chart.entries[0] == _e(1, None, "Sam Smith", _img("2014/07/sam-smith-9q2-53x53.jpg"), 1, 1, 3)
    assert chart.entries[-1] == _e(100, None, "The Black Keys", _img("2010/12/the-black-keys-3bo-53x53.jpg"),
                                   91, 88, 3)
    assert all(e.title is None for e in chart.entries)
    assert sum(bool(e.is_new) for e in chart.entries) == 17
    assert chart.raw[0].title == ""


def test_dump_2016_old_schema_with_change(shared_upstream: Path) -> None:
    chart = billboard.parse_billboard_py_json((shared_upstream / DUMPS / "2016-02-13-output.json").read_bytes())
    assert (chart.slug, chart.title, chart.chart_date, chart.previous_date, chart.next_date, chart.layout) == (
        "hot-100", None, "2016-02-13", "2016-02-06", None, "billboard.py-2016")
    assert chart.entries[0] == _e(1, "Love Yourself", "Justin Bieber", None, 2, 1, 11)
    assert chart.raw[0].marker == "+1"
    assert chart.entries[8] == _e(9, "Work", "Rihanna Featuring Drake", None, None, 7, 1, is_new=True)
    assert chart.raw[8].marker == "Hot Shot Debut"
    assert chart.entries[-1] == _e(100, "Snapback", "Old Dominion", None, None, 88, 1, is_new=True)
    assert sum(bool(e.is_new) for e in chart.entries) == 10
    assert not any(e.is_reentry for e in chart.entries)


def test_dump_of_another_chart_is_refused(shared_upstream: Path) -> None:
    with pytest.raises(UpstreamFormatError, match="asked for 'billboard-200'"):
        billboard.parse_billboard_py_json((shared_upstream / DUMPS / "1979-08-04-hot-100.json").read_bytes(),
                                          "billboard-200")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "not JSON"),
        (b"<html><body>Just a moment...</body></html>", "not JSON"),
        (b"[]", "no `entries`"),
        (b'{"name": "hot-100", "date": "2024-12-07", "entries": []}', "no entries"),
        (b'{"name": "hot-100", "entries": [{"rank": 1}]}', "no `date`"),
        (b'{"name": "hot-100", "date": "2024-12-07", "entries": [{"rank": 2, "title": "A", "artist": "B"}]}',
         "ranks are not 1..1"),
        (b'{"name": "hot-100", "date": "2024-12-07", "entries": [{"rank": "1", "title": "A", "artist": "B"}]}',
         "rank is not an integer"),
        (b'{"name": "hot-100", "date": "2024-12-07", "entries": [{"rank": 1, "title": "", "artist": "B"}]}',
         "empty title"),
    ],
)
def test_dump_refusals(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        billboard.parse_billboard_py_json(body)


# --- the post-2024 layout: rows trimmed from the re-branded page (dataquestio/web-scraping-pages) --------------

_LABEL = '<span class="c-span  a-font-secondary u-color-grey-141 u-font-size-12">\n\n\t{}\n</span>\n'
_VALUE = ('<li class="o-chart-results-list__item // a-chart-color lrv-u-flex u-hidden@mobile-max">\n'
          '<span class="c-label  u-font-family-basic@tablet u-font-size-12" >\n\t\n\t{}\n</span>\n</li>\n')


def _stats_2025(*pairs: tuple[str, str]) -> str:
    cells = "".join(_LABEL.format(label) + _VALUE.format(value) for label, value in pairs)
    return (f'<div class="lrv-u-flex@desktop lrv-u-flex-direction-column u-padding-t-6">{cells}</div>\n'
            f'<li class="o-chart-results-list__item // u-width-62 u-hidden@mobile-max">'
            f'<div class="a-chart-plus-minus-icon"></div></li>\n'
            f'<li class="lrv-u-width-100p u-hidden@tablet"><ul class="lrv-a-unstyle-list lrv-u-flex">'
            f'<div class="lrv-u-flex">{cells}</div></ul></li>\n')


def _row_2025(rank: int, title: str, credit: str, image: str, stats: str, badge: str = "") -> str:
    """One row in the markup of the re-branded page (rank cell, image, badge/arrow, title block, labelled stats)."""
    mobile_badge = (f'<span class="c-label  u-width-40 a-font-secondary-fancy u-font-size-9 a-hidden@tablet" >\n\t\n'
                    f'\t{badge}\n</span>' if badge else '<div class="c-svg u-hidden@tablet"><svg></svg></div>')
    side = (f'<span class="c-label  u-width-40 a-font-basic-fancy u-transform-rotate-n90deg" >\n\t\n\t{badge}\n'
            f'</span>' if badge else '<div class="c-svg u-margin-l-1px"><svg></svg></div>')
    return f"""<div class="o-chart-results-list-row-container">
\t<ul class="o-chart-results-list-row // lrv-a-unstyle-list lrv-u-flex a-chart-has-chart-detail lrv" data-detail-target="{rank}" data-ajax="">
\t\t<li class="o-chart-results-list__item // lrv-u-color-black u-width-60 lrv-u-flex">
<span class="c-label  a-font-basic u-font-size-22@desktop u-line-height-33px" >\n\t\n\t{rank}\n</span>
{mobile_badge}
\t\t</li>
\t\t<li class="o-chart-results-list__item // u-width-100 u-width-80px@mobile-max">
<div class="c-lazy-image  lrv-u-width-100"><div class="lrv-a-crop-1x1" style="">
<img class="c-lazy-image__img lrv-u-width-100p" {image}>
</div></div>
\t\t</li>
\t\t<li class="o-chart-results-list__item // lrv-u-flex u-width-50 u-hidden@mobile-max">{side}</li>
\t\t<li class="lrv-u-width-100p a-chart-result-item-container">
\t\t\t<ul class="lrv-a-unstyle-list lrv-u-flex lrv-u-height-100p">
\t\t\t\t<li class="o-chart-results-list__item // lrv-u-flex-grow-1 u-max-width-397">
<h3 id="title-of-a-story" class="c-title  a-font-basic u-letter-spacing-0010 u-max-width-397">\n\n\t\n\t\n\t\t\n\t\t\t\t\t{title}\t\t\n\t\n</h3>
\t\t\t\t\t<span class="
\t\t\t\t\t\t\tc-label a-no-trucate
\t\t\t\t\t\t\ta-font-secondary u-font-size-15
\t\t\t\t\t\t">
\t\t\t\t\t\t\t{credit}\t\t\t\t\t\t</span>
\t\t\t\t</li>
\t\t\t\t<li class="o-chart-results-list__item // a-chart-bg-color a-chart-color u-width-72 u-hidden@mobile-max"></li>
{stats}\t\t\t</ul>
\t\t</li>
\t</ul>
<div class="charts-result-detail // lrv-a-hidden" data-detail="{rank}"><div class="o-chart-position-stats__peak">
<span class="c-label  a-font-secondary-fancy-xxl" >1</span></div></div>
</div>
"""


def _page_2025(rows: str, *, picker: str = '<div id="chart-date-picker" data-date="2022-06-11" '
               'data-link="https://www.billboard.com/charts/hot-100/2022-06-08/" data-chart-code="HSI"></div>') -> bytes:
    return f"""<!DOCTYPE html><html lang="en-US"><head><meta charset="UTF-8" />
<title>Billboard Hot 100™ – Billboard</title><meta property="og:title" content="Billboard Hot 100™" />
<meta property="og:url" content="https://www.billboard.com/charts/hot-100/" /></head><body>
<span class="c-span  lrv-u-whitespace-nowrap a-font-accent">\n\n\tWeek of June 11, 2022\n</span>
{picker}
<div class="pmc-paywall"><div class="chart-results-container"><div class="chart-results // lrv-a-wrapper">
<div class="u-max-width-970"><div class="chart-results-list // a-become-full-width@mobile-max">
{rows}</div></div></div></div></div></body></html>""".encode()


# Values of rows 1, 13 and 100 of the real page (week of 2022-06-11), renumbered 1-3 so the ranks run 1..n.
POST_2024_ROWS = (
    _row_2025(1, "As It Was", '<a href="https://www.billboard.com/artist/harry-styles/">Harry Styles</a>',
              'src="https://charts-static.billboard.com/img/2022/04/harry-styles-tuw-asitwas-po3-180x180.jpg" '
              'alt="" srcset="" sizes="" height="" width="" decoding="sync"',
              _stats_2025(("LW", "1"), ("PEAK", "1"), ("WEEKS AT NO. 1", "7"), ("WEEKS", "9")))
    + _row_2025(2, "Wasted On You", '<a href="https://www.billboard.com/artist/morgan-wallen/">Morgan Wallen</a>',
                'src="https://www.billboard.com/wp-content/themes/vip/pmc-billboard-2021/assets/public/'
                'lazyload-fallback.gif" data-lazy-src="https://charts-static.billboard.com/img/2021/01/'
                'morgan-wallen-eos-wastedonyou-32x-180x180.jpg" alt="" decoding="async"',
                _stats_2025(("LW", "23"), ("PEAK", "9"), ("WEEKS", "29")))
    + _row_2025(3, "Until I Found You", "Stephen Sanchez",
                'src="https://www.billboard.com/wp-content/themes/vip/pmc-billboard-2021/assets/public/'
                'lazyload-fallback.gif" data-lazy-src="https://charts-static.billboard.com/img/2022/03/'
                'stephensanchez-1xg-untilifoundyou-6xd-180x180.jpg" alt="" decoding="async"',
                _stats_2025(("LW", "-"), ("PEAK", "100"), ("WEEKS", "1")), badge="NEW")
)


def test_post_2024_layout_reads_stats_by_label() -> None:
    chart = billboard.parse("hot-100", _page_2025(POST_2024_ROWS))
    assert (chart.slug, chart.title, chart.chart_date, chart.layout) == (
        "hot-100", "Billboard Hot 100™", "2022-06-11", "post-2024")
    assert chart.entries == [
        _e(1, "As It Was", "Harry Styles", _img("2022/04/harry-styles-tuw-asitwas-po3-180x180.jpg"), 1, 1, 9),
        _e(2, "Wasted On You", "Morgan Wallen", _img("2021/01/morgan-wallen-eos-wastedonyou-32x-180x180.jpg"),
           23, 9, 29),
        _e(3, "Until I Found You", "Stephen Sanchez",
           _img("2022/03/stephensanchez-1xg-untilifoundyou-6xd-180x180.jpg"), None, 100, 1, is_new=True),
    ]
    # The extra "WEEKS AT NO. 1" stat shifts nothing; raw keeps the values as printed.
    assert chart.raw[0] == RawEntry(rank="1", title="As It Was", artist="Harry Styles",
                                    image=_img("2022/04/harry-styles-tuw-asitwas-po3-180x180.jpg"),
                                    last_week="1", peak="1", weeks_on_chart="9", marker=None)
    assert chart.raw[2].marker == "NEW" and chart.raw[2].last_week == "-"


def test_post_2024_date_falls_back_to_the_week_heading() -> None:
    chart = billboard.parse("hot-100", _page_2025(POST_2024_ROWS, picker=""))
    assert chart.chart_date == "2022-06-11"


def test_page_week_links_are_read_when_present() -> None:
    picker = ('<div id="charts" data-chart-prev-date="2022-06-04" data-chart-next-date="2022-06-18"></div>'
              '<div id="chart-date-picker" data-date="2022-06-11" data-link="https://www.billboard.com/charts/hot-100/">'
              '</div>')
    chart = billboard.parse("hot-100", _page_2025(POST_2024_ROWS, picker=picker))
    assert (chart.previous_date, chart.chart_date, chart.next_date) == ("2022-06-04", "2022-06-11", "2022-06-18")


# --- refusals ------------------------------------------------------------------------------------------------

ROBOT = (b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
         b'<div id="cf-chl-widget">Checking your browser</div></body></html>')


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty body"),
        (b"  \n ", "empty body"),
        (ROBOT, "robot check"),
        (b"<html><body><h1>Access Denied</h1>You don't have permission</body></html>", "robot check"),
        (b'<html><body><div class="pmc-paywall"><p>Subscribe to keep reading</p></div></body></html>', "paywall"),
        ((b'<html><head><title>The Hot 100</title></head><body><div id="chart-date-picker" data-date="2024-12-07">'
          b'</div><div class="chart-row">1 Squabble Up</div></body></html>'), "layout changed"),
        (b'{"error": "not found"}', "not an HTML page"),
    ],
)
def test_pages_without_rows_are_refused(body: bytes, reason: str) -> None:
    with pytest.raises(UpstreamFormatError, match=reason):
        billboard.parse("hot-100", body)


def _sample(slug: str = "hot-100", variant: int = 0, size: int | None = None) -> str:
    return samples.render_page(slug, date(2025, 1, 4), variant, size=size).decode()


def test_missing_row_gap_in_ranks_is_refused() -> None:
    head, *rows = _sample().split('<div class="o-chart-results-list-row-container">')
    body = head + "".join('<div class="o-chart-results-list-row-container">' + r for i, r in enumerate(rows) if i != 4)
    with pytest.raises(UpstreamFormatError, match="ranks are not 1..99 .first mismatch at row 5"):
        billboard.parse("hot-100", body.encode())


def test_page_without_chart_date_is_refused() -> None:
    page = _sample().replace('id="chart-date-picker"', 'id="picker"').replace("Week of", "Chart of")
    with pytest.raises(UpstreamFormatError, match="no chart date"):
        billboard.parse("hot-100", page.encode())


def test_non_numeric_stat_is_refused() -> None:
    page = _sample().replace('lrv-u-padding-tb-050@mobile-max">\n1\n</span>', 'lrv-u-padding-tb-050@mobile-max">\nx\n'
                             '</span>', 1)
    with pytest.raises(UpstreamFormatError, match="is not a number: 'x'"):
        billboard.parse("hot-100", page.encode())


def test_row_without_title_is_refused() -> None:
    page = _sample().replace('<h3 id="title-of-a-story"', '<h4 id="x"', 1)
    with pytest.raises(UpstreamFormatError, match="no h3#title-of-a-story"):
        billboard.parse("hot-100", page.encode())


def test_short_page_fails_the_size_check_only() -> None:
    chart = billboard.parse("hot-100", _sample(size=60).encode())
    assert len(chart.entries) == 60
    with pytest.raises(UpstreamFormatError, match="short page, 60 of 100 rows"):
        billboard.require_size(chart, "hot-100")
    assert billboard.require_size(chart, "no-such-chart") is chart  # unknown size: nothing to check


# --- our rendered pages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["2021", "post-2024"])
@pytest.mark.parametrize("slug", ["hot-100", "billboard-200", "artist-100", "billboard-global-excl-us",
                                  "hot-latin-songs", "hot-rap-songs"])
def test_rendered_pages_round_trip(slug: str, layout: samples.PageLayout) -> None:
    for variant in (0, 3):
        body = samples.render_page(slug, date(2025, 1, 1), variant, layout=layout)
        chart = billboard.parse(slug, body)
        expected = samples.sample_week(slug, variant)
        assert (chart.slug, chart.chart_date, chart.layout) == (slug, "2025-01-04", layout)
        assert chart.title == billboard.CHARTS_BY_SLUG[slug].title
        assert len(chart.entries) == billboard.expected_size(slug) == len(expected)
        billboard.require_size(chart, slug)
        for entry, sample in zip(chart.entries, expected):
            assert entry == _e(sample.rank, sample.title, sample.artist, sample.image, sample.last_week, sample.peak,
                               sample.weeks, is_new=sample.is_new, is_reentry=sample.is_reentry)
        if slug == "artist-100":
            assert all(e.title is None for e in chart.entries)


def test_sample_weeks_are_consistent_week_to_week() -> None:
    weeks = samples.sample_weeks("hot-100", 8)
    seen: set[str] = set()
    debuts = reentries = 0
    for before, after in pairwise(weeks):
        seen |= {e.artist + "|" + str(e.title) for e in before}
        previous = {e.artist + "|" + str(e.title): e for e in before}
        for entry in after:
            key = entry.artist + "|" + str(entry.title)
            old = previous.get(key)
            if old is not None:
                assert entry.last_week == old.rank
                assert entry.weeks == old.weeks + 1
                assert entry.peak == min(old.peak, entry.rank)
                assert not entry.is_new and not entry.is_reentry
            else:
                assert entry.last_week is None and (entry.is_new or entry.is_reentry)
                assert entry.is_new == (key not in seen) or entry.is_reentry
                assert not (entry.is_new and key in seen)
                assert entry.weeks == 1 if entry.is_new else entry.weeks > 1
            assert entry.peak <= entry.rank
        debuts += sum(e.is_new for e in after)
        reentries += sum(e.is_reentry for e in after)
    assert debuts > 0 and reentries > 0
    assert any(e.last_week is not None and e.last_week > e.rank for e in weeks[3])  # climbers for "gainers"
    assert weeks[0][0].weeks_at_no1 is not None and weeks[0][1].weeks_at_no1 is None


def test_week_replies_serve_consecutive_weeks_and_the_latest() -> None:
    replies = samples.week_replies("hot-100", date(2024, 11, 12), 4)
    dates = samples.week_dates(date(2024, 11, 12), 4)
    assert [d.isoformat() for d in dates] == ["2024-11-16", "2024-11-23", "2024-11-30", "2024-12-07"]
    for variant, when in enumerate(dates):
        (request,) = billboard.requests_for("hot-100", when)
        chart = billboard.parse("hot-100", replies[request_key(request)].body)
        assert chart.chart_date == when.isoformat()
        assert chart.entries[0].artist == samples.sample_week("hot-100", variant)[0].artist
    (latest,) = billboard.requests_for("hot-100")
    assert billboard.parse("hot-100", replies[request_key(latest)].body).chart_date == "2024-12-07"
    # A future week answers with the latest page: its own date wins over the one asked.
    (future,) = billboard.requests_for("hot-100", date(2024, 12, 14))
    assert billboard.parse("hot-100", replies[request_key(future)].body).chart_date == "2024-12-07"
    assert len(replies) == 6


def test_rendered_dump_round_trips() -> None:
    body = samples.render_billboard_py_json("artist-100", date(2014, 8, 2), 2)
    chart = billboard.parse_billboard_py_json(body, "artist-100")
    assert (chart.chart_date, chart.previous_date, chart.next_date, chart.title) == (
        "2014-08-02", "2014-07-26", "2014-08-09", "Billboard Artist 100")
    expected = samples.sample_week("artist-100", 2)
    assert [(e.rank, e.title, e.artist, e.last_week, e.peak, e.weeks_on_chart, e.is_new) for e in chart.entries] == [
        (s.rank, None, s.artist, s.last_week, s.peak, s.weeks, s.is_new) for s in expected]
    assert all(e.is_reentry == s.is_reentry for e, s in zip(chart.entries, expected))


def test_entries_with_raw_store_and_decode_both_ways() -> None:
    chart: ChartWeek = billboard.parse("hot-100", _page_2025(POST_2024_ROWS))
    stored = msgspec.json.encode(billboard.with_raw(chart))
    assert msgspec.json.decode(stored, type=list[RankingEntry]) == chart.entries
    full = msgspec.json.decode(stored, type=list[RankingEntryWithRaw])
    assert [item.raw for item in full] == chart.raw
    assert msgspec.json.decode(msgspec.json.encode(chart.entries[0])) == {
        "rank": 1, "title": "As It Was", "artist": "Harry Styles",
        "image": _img("2022/04/harry-styles-tuw-asitwas-po3-180x180.jpg"), "last_week": 1, "peak": 1,
        "weeks_on_chart": 9, "is_new": False, "is_reentry": False}


def test_all_week_replies_cover_every_default_chart() -> None:
    replies = samples.all_week_replies(date(2024, 11, 16), 2, ("hot-100", "artist-100"), layout="post-2024")
    assert len(replies) == 2 * (2 + 2)  # two weeks, the latest path and the future week, per chart
    (request,) = billboard.requests_for("artist-100", date(2024, 11, 23))
    chart = billboard.parse("artist-100", replies[request_key(request)].body)
    assert (chart.chart_date, chart.layout, len(chart.entries)) == ("2024-11-23", "post-2024", 100)
