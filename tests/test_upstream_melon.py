"""Melon web chart parser: against the real 2018/2020 captures, our rendered pages, and small
snippets in the real row markup for each trap (hidden duplicate artists, rank bullets, dates)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from chartgw.demo.samples import sample_rows
from chartgw.demo.samples.melon import render
from chartgw.store.records import KoreaEntry
from chartgw.upstreams import UpstreamFormatError, melon

KST = ZoneInfo("Asia/Seoul")
REALTIME_2018 = "melon/chart-index_realtime_2018-01-25_KBSure-Crawler.html"
MONTH_2020 = "melon/chart-month_2020_Suhhye-kang-Pandas.html"

STATIC = """<span title="순위 동일" class="rank_wrap">
	<span class="bullet_icons rank_static"><span class="none">순위 동일</span></span>
	<span class="none">0</span>
</span>"""


def _row(
    rank: int = 1,
    *,
    song_id: str = "30755375",
    title: str = "그날처럼",
    artists: tuple[tuple[str, str], ...] = (("829211", "장덕철"),),
    album: tuple[str, str] = ("10115186", "그날처럼"),
    wrap: str = STATIC,
    img: str = "http://cdnimg.melon.co.kr/cm/album/images/101/15/186/10115186_500.jpg/melon/resize/120/quality/80/optimize",
    badge: str = "",
    artist_href: str = "javascript:melon.link.goArtistDetail('{}');",
) -> str:
    """One chart row trimmed from the real 2018 capture (rank 1, 그날처럼 / 장덕철), fields swappable."""
    links = ", ".join(
        f'<a href="{artist_href.format(i)}" title="{n} - 페이지 이동" >{n}</a>' for i, n in artists
    )
    lst = "lst50" if rank <= 50 else "lst100"
    return f"""<tr class="{lst}" id="{lst}"  data-song-no="{song_id}">
<td><div class="wrap t_right"><input type="checkbox" title="{title} 곡 선택" class="input_check "  name="input_check" value="{song_id}"></div></td>
<td><div class="wrap t_center"><span class="rank ">{rank}</span><span class="none">위</span></div></td>
<!-- 차트순위 추가 -->
<td><div class="wrap">
	{wrap}
</div></td>
<td><div class="wrap">
	<a href="javascript:melon.link.goAlbumDetail('{album[0]}');" title="{album[1]}" class="image_typeAll">
		<img onerror="WEBPOCIMG.defaultAlbumImg(this);" width="60" height="60" src="{img}" alt="{album[1]} - 페이지 이동"/>
		<span class="bg_album_frame"></span>
	</a>
</div></td>
<td><div class="wrap">
	<div class="wrap_song_info">
		<div class="ellipsis rank01"><span>
			{badge}
			<a href="javascript:melon.play.playSong('19030101',{song_id});" title="{title} 재생">{title}</a>
		</span></div><br>
		<div class="ellipsis rank02">
			{links}<span class="checkEllipsis" style="display:none">{links}</span>
		</div>
	</div>
</div></td>
<td><div class="wrap">
	<div class="wrap_song_info">
		<div class="ellipsis rank03">
			<a href="javascript:melon.link.goAlbumDetail('{album[0]}');" title="{album[1]} - 페이지 이동">{album[1]}</a>
		</div>
	</div>
</div></td>
</tr>"""


def _page(*rows: str, calendar: str = "") -> bytes:
    """A chart page around rows: the calendar block, then the song table as on the real pages."""
    return f"""<!DOCTYPE html><html lang="ko"><head><meta charset="utf-8"/>
<title>멜론차트>멜론 TOP 100>실시간>멜론</title></head><body><div id="conts">{calendar}
<div id="tb_list"><form id="frm"><div class="service_list_song type02 d_song_list"><table><thead><tr>
<th scope="col"><div class="wrap t_center"><span class="rank">순위</span></div></th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></div></form></div></div></body></html>""".encode()


def _one(row: str, calendar: str = "") -> KoreaEntry:
    (entry,) = melon.parse("realtime", [_page(row, calendar=calendar)]).entries
    return entry


# --- requests ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chart_type", "path", "params"),
    [
        ("realtime", "/chart/index.htm", ()),
        ("hot100_d100", "/chart/hot100/index.htm", (("chartType", "D100"),)),
        ("hot100_d30", "/chart/hot100/index.htm", (("chartType", "D30"),)),
        ("daily", "/chart/day/index.htm", ()),
        ("weekly", "/chart/week/index.htm", ()),
    ],
)
def test_requests_for_each_chart_type(chart_type: str, path: str, params: tuple[tuple[str, str], ...]) -> None:
    (request,) = melon.requests_for(chart_type)
    assert (request.upstream, request.method, request.path, request.params) == ("MELON", "GET", path, params)
    headers = dict(request.headers)
    assert headers["User-Agent"].startswith("Mozilla/5.0")
    assert headers["Referer"] == "https://www.melon.com/"
    assert "Accept" in headers and headers["Accept-Language"].startswith("ko")


def test_unknown_chart_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="monthly"):
        melon.requests_for("monthly")
    with pytest.raises(ValueError):
        melon.parse("top200", [b""])


# --- real captures -------------------------------------------------------------------------------


def test_real_realtime_2018(shared_upstream: Path) -> None:
    chart = melon.parse("realtime", [(shared_upstream / REALTIME_2018).read_bytes()])
    assert (chart.chart_date, chart.chart_hour) == ("2018-01-25", 15)
    assert [e.rank for e in chart.entries] == list(range(1, 101))
    first = chart.entries[0]
    assert (first.title, first.artist, first.artists, first.album) == ("그날처럼", "장덕철", ["장덕철"], "그날처럼")
    assert (first.song_id, first.album_id, first.artist_ids) == ("30755375", "10115186", ["829211"])
    assert (first.rank_change, first.rank_status) == (0, "same")
    assert first.image_url == (
        "http://cdnimg.melon.co.kr/cm/album/images/101/15/186/10115186_500.jpg/melon/resize/120/quality/80/optimize"
    )
    by_rank = {e.rank: e for e in chart.entries}
    assert (by_rank[18].artist, by_rank[18].artist_ids) == ("민서, 윤종신", ["906283", "437"])
    assert by_rank[72].artists == ["소유 (SOYOU)", "성시경"]
    assert (by_rank[24].title, by_rank[24].rank_change, by_rank[24].rank_status) == ("Beautiful", -4, "down")
    assert (by_rank[50].title, by_rank[50].rank_change, by_rank[50].rank_status) == ("짙어져", 11, "up")
    assert (by_rank[100].title, by_rank[100].rank_change, by_rank[100].rank_status) == ("Twilight", None, "new")
    # The 19금 badge span beside the title link is not part of the title.
    assert by_rank[93].title == "노땡큐 (Feat. MINO, 사이먼 도미닉, 더콰이엇)"
    assert Counter(e.rank_status for e in chart.entries) == {"up": 42, "down": 32, "same": 25, "new": 1}
    # No artist read twice from the hidden span.checkEllipsis copy.
    assert sum(len(e.artists) for e in chart.entries) == 103
    assert all(len(e.artist_ids) == len(e.artists) == len(set(e.artists)) for e in chart.entries)


def test_real_monthly_2020(shared_upstream: Path) -> None:
    """Monthly layout: same rows, period "2020.08" read as the first of the month, no hour."""
    chart = melon.parse("daily", [(shared_upstream / MONTH_2020).read_bytes()])
    assert (chart.chart_date, chart.chart_hour) == ("2020-08-01", None)
    assert len(chart.entries) == 100
    first = chart.entries[0]
    # One artist whose own name contains commas: never split names on ", ".
    assert first.artists == ["싹쓰리 (유두래곤, 린다G, 비룡)"]
    assert (first.title, first.song_id, first.album_id, first.artist_ids) == (
        "다시 여기 바닷가", "32790516", "10462799", ["2879819"]
    )
    assert (first.rank_change, first.rank_status) == (5, "up")
    assert first.image_url is not None and first.image_url.startswith("https://cdnimg.melon.co.kr/cm2/album/images/")
    e63 = chart.entries[62]
    assert e63.artists == ["식케이 (Sik-K)", "pH-1", "박재범", "김하온 (HAON)"]
    assert e63.artist_ids == ["786648", "943511", "443420", "2112493"]
    assert e63.rank_change == -35
    assert Counter(e.rank_status for e in chart.entries) == {"down": 71, "new": 14, "up": 13, "same": 2}


# --- our rendered pages --------------------------------------------------------------------------


@pytest.mark.parametrize("chart_type", melon.CHART_TYPES)
def test_rendered_pages_round_trip(chart_type: str) -> None:
    rows = sample_rows("melon", chart_type)
    when = datetime(2026, 5, 18, 21, 0, tzinfo=KST)
    bodies = render(chart_type, rows, when)
    assert len(bodies) == len(melon.requests_for(chart_type)) == 1
    chart = melon.parse(chart_type, bodies)
    got = [
        (e.rank, e.title, tuple(e.artists), e.album, e.song_id, e.album_id, tuple(e.artist_ids), e.rank_change)
        for e in chart.entries
    ]
    want = [
        (r.rank, r.song.title, r.song.artists, r.song.album, r.song.song_id, r.song.album_id, r.song.artist_ids,
         r.rank_change)
        for r in rows
    ]
    assert got == want
    assert chart.chart_date == "2026-05-18"
    assert chart.chart_hour == (21 if chart_type in ("realtime", "hot100_d100", "hot100_d30") else None)
    assert all(e.artist == ", ".join(e.artists) for e in chart.entries)


def test_rendered_page_keeps_the_real_traps() -> None:
    rows = sample_rows("melon", "realtime")
    html = render("realtime", rows, datetime(2026, 1, 2, 9, tzinfo=KST))[0].decode()
    assert html.count('<tr class="lst50"') == 50 and html.count('<tr class="lst100"') == 50
    assert html.index('<tr class="lst100"') > html.rindex('<tr class="lst50"')
    # Every artist link is written twice: once visible, once in the hidden checkEllipsis span.
    links = sum(len(r.song.artists) for r in rows)
    assert html.count("goArtistDetail(") == 2 * links
    assert html.count('class="checkEllipsis" style="display:none"') == 100
    assert '<span class="year">2026.01.02</span>' in html and '<span class="hour">09:00</span>' in html
    multi = next(r for r in rows if len(r.song.artists) > 1)
    entry = melon.parse("realtime", [html.encode()]).entries[multi.rank - 1]
    assert len(entry.artists) > 1 and entry.artists == list(multi.song.artists)
    assert entry.artist == ", ".join(multi.song.artists)
    assert sum(e.rank_status == "new" for e in melon.parse("realtime", [html.encode()]).entries) == sum(
        r.previous_rank is None for r in rows
    )


def test_rendered_weekly_states_a_range() -> None:
    html = render("weekly", sample_rows("melon", "weekly"), datetime(2024, 5, 6, 12, tzinfo=KST))[0].decode()
    assert "2024.05.06 ~ 2024.05.12" in html


# --- traps in hand-written rows ------------------------------------------------------------------


def test_hidden_duplicate_artists_and_multi_artist_row() -> None:
    entry = _one(_row(artists=(("3305", "성시경"), ("490981", "소유 (SOYOU)"), ("597451", "Ariana Grande"))))
    assert entry.artists == ["성시경", "소유 (SOYOU)", "Ariana Grande"]
    assert entry.artist == "성시경, 소유 (SOYOU), Ariana Grande"
    assert entry.artist_ids == ["3305", "490981", "597451"]


def test_artist_ids_from_plain_artist_links() -> None:
    """Some current parsers see /artist/detail.htm?artistId=N links instead of goArtistDetail('N')."""
    entry = _one(_row(artists=(("1", "PLAVE"),), artist_href="/artist/detail.htm?artistId={}"))
    assert (entry.artists, entry.artist_ids) == (["PLAVE"], ["1"])


@pytest.mark.parametrize(
    ("wrap", "change", "status"),
    [
        (STATIC, 0, "same"),
        ('<span title="7단계 상승" class="rank_wrap"><span class="bullet_icons rank_up"><span class="none">단계 상승'
         '</span></span><span class="up">7</span></span>', 7, "up"),
        ('<span title="3단계 하락" class="rank_wrap"><span class="bullet_icons rank_down"><span class="none">단계 하락'
         '</span></span><span class="down">3</span></span>', -3, "down"),
        ('<span title="순위 진입" class="rank_wrap"><span class="bullet_icons rank_new"><span class="none">순위 진입'
         '</span></span></span>', None, "new"),
        # Amount only in the title: still read.
        ('<span title="12단계 하락" class="rank_wrap"><span class="bullet_icons rank_down"></span></span>', -12, "down"),
    ],
)
def test_rank_change_bullets(wrap: str, change: int | None, status: str) -> None:
    entry = _one(_row(wrap=wrap))
    assert (entry.rank_change, entry.rank_status) == (change, status)


def test_title_badge_is_not_part_of_the_title() -> None:
    badge = '<span title="19세 미만 청소년 이용불가" class="bullet_icons age_19"><span class="none">19금</span></span>'
    entry = _one(_row(title="노땡큐 (Feat. MINO, 사이먼 도미닉, 더콰이엇)", badge=badge))
    assert entry.title == "노땡큐 (Feat. MINO, 사이먼 도미닉, 더콰이엇)"


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("http://cdnimg.melon.co.kr/cm/album/images/1.jpg", "http://cdnimg.melon.co.kr/cm/album/images/1.jpg"),
        ("https://cdnimg.melon.co.kr/cm2/album/images/2.jpg", "https://cdnimg.melon.co.kr/cm2/album/images/2.jpg"),
        ("//cdnimg.melon.co.kr/cm2/album/images/3.jpg", "https://cdnimg.melon.co.kr/cm2/album/images/3.jpg"),
    ],
)
def test_image_url_protocol(src: str, want: str) -> None:
    assert _one(_row(img=src)).image_url == want


def test_ids_and_latin_names() -> None:
    entry = _one(
        _row(
            rank=57,
            song_id="37102809",
            title="Die With A Smile",
            artists=(("2830430", "Lady Gaga"), ("7863866", "Bruno Mars")),
            album=("10446926", "Die With A Smile"),
        )
    )
    assert (entry.rank, entry.song_id, entry.album_id, entry.album) == (57, "37102809", "10446926", "Die With A Smile")
    assert entry.artist == "Lady Gaga, Bruno Mars"


def test_whitespace_is_collapsed() -> None:
    entry = _one(_row(title="  모든 날,\n\t 모든 순간  ", album=("1", " 키스  먼저 할까요? ")))
    assert (entry.title, entry.album) == ("모든 날, 모든 순간", "키스 먼저 할까요?")


# --- dates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("calendar", "date", "hour"),
    [
        ('<div class="calendar_prid"><span class="yyyymmdd"><span class="year">2018.01.25</span></span>'
         '<span class="hhmm"><span class="hour">15:00</span></span></div>', "2018-01-25", 15),
        ('<div class="calendar_prid"><span class="yyyymmdd"><span class="year">2024.05.12</span></span></div>',
         "2024-05-12", None),
        ('<div class="calendar_prid"><span class="yyyymmdd">\n 2024.05.06 ~ 2024.05.12 \n</span></div>',
         "2024-05-06", None),
        ('<div class="calendar_prid"><span class="yyyymmdd">2020.08</span></div>', "2020-08-01", None),
        ("", None, None),
    ],
)
def test_chart_date(calendar: str, date: str | None, hour: int | None) -> None:
    chart = melon.parse("daily", [_page(_row(), calendar=calendar)])
    assert (chart.chart_date, chart.chart_hour) == (date, hour)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        "<html><head><title>Melon - 일시적인 오류</title></head><body><div id='conts' data-targetId='x'>"
        "요청하신 페이지를 찾을 수 없습니다.</div></body></html>".encode(),
        _page(),  # the chart table with no rows
    ],
)
def test_pages_without_rows_are_format_errors(body: bytes) -> None:
    with pytest.raises(UpstreamFormatError, match="no chart rows"):
        melon.parse("realtime", [body])


def test_no_bodies_is_a_format_error() -> None:
    with pytest.raises(UpstreamFormatError):
        melon.parse("weekly", [])


def test_row_without_title_or_rank_is_a_format_error() -> None:
    with pytest.raises(UpstreamFormatError, match="title"):
        melon.parse("realtime", [_page(_row(title=" "))])
    with pytest.raises(UpstreamFormatError, match="rank"):
        melon.parse("realtime", [_page(_row().replace('<span class="rank ">1</span>', '<span class="rank "></span>'))])
