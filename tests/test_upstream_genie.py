"""Genie: top200 web page and app JSON API parsers, against the real captured app item, snippets in the real
row markup (traps: TITLE badge, t_point, one-string multi-artist, rank markers) and our rendered samples."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from chartgw.demo.samples import SampleRow, sample_rows, song_pool
from chartgw.demo.samples import genie as sample_genie
from chartgw.store.records import KoreaEntry
from chartgw.upstreams import UpstreamFormatError, genie

KST = timezone(timedelta(hours=9))
WHEN = datetime(2026, 1, 2, 15, 0, tzinfo=KST)
CAPTURE = "genie/genie-app-api-item_2023-09-06_Melon-Shake-API.json"


def _page(*rows: str) -> bytes:
    """A minimal top200 page around real-format rows."""
    body = "".join(rows)
    return (
        '<html><head><meta charset="UTF-8"><title>지니차트>실시간 - 지니</title></head><body>'
        '<div id="body-content"><div class="newest-list"><div class="music-list-wrap">'
        f'<table class="list-wrap"><tbody>{body}</tbody></table></div></div></div></body></html>'
    ).encode()


def _row(
    songid: str = "97209570",
    number: str = "72",
    marker: str = '<span class="rank-up">15<span\n class="hide">상승</span></span>',
    title: str = "\n                                                POP!",
    artist: str = "나연 (TWICE)",
    artist_id: str = "80468933",
    album_id: str = "82781282",
) -> str:
    """One `tr.list` row in the markup pasted from the real page (IM NAYEON row, 2022)."""
    return f"""
<tr class="list" songid="{songid}">
    <td class="check"><input type="checkbox" class="select-check" title="POP!" /></td>
    <td class="number">{number}
        <span class="rank">
                <span class="rank">{marker}</span>
        </span>
    </td>
    <td><a href="#" class="cover" onclick="fnViewAlbumLayer('{album_id}');return false;"><span class="mask"></span><img src="//image.genie.co.kr/Y/IMAGE/IMG_ALBUM/082/781/282/82781282_1656034600098_1_140x140.JPG/dims/resize/Q_80,0" onerror="this.src='//image.genie.co.kr/imageg/web/common/blank_68.gif';" alt="IM NAYEON" /></a></td>
    <td class="link"><a href="#" class="btn-basic btn-info" onclick="fnViewSongInfo('{songid}');return false;">곡 제목 정보 페이지</a></td>
    <td class="info">
        <a href="#" class="title ellipsis" title="재생" onclick="fnPlaySong('{songid}','1');return false;">{title}</a>
            <a href="#" class="artist ellipsis" onclick="fnViewArtist('{artist_id}');return false;">{artist}</a>
            <div class="toggle-button-box" >
                <button type="button" class="btn artist-etc" onclick="fnRelationArtistList('{songid}');">외</button>
                <ul class="list" id="RelationArtist_{songid}"></ul>
            </div>
            <i class="bar">|</i>
            <a href="#" class="albumtitle ellipsis" onclick="fnViewAlbumLayer('{album_id}');return false;">IM NAYEON</a>
    </td>
</tr>"""


def _envelope(*items: dict[str, Any], chart_time: str = "15:00") -> bytes:
    return json.dumps(
        {
            "Result": {"RetCode": "0", "RetMsg": ""},
            "PageInfo": {"ChartTime": chart_time},
            "DataSet": {"DATA": list(items)},
        },
        ensure_ascii=False,
    ).encode()


@pytest.fixture
def app_item(shared_upstream: Path) -> dict[str, Any]:
    """The one real DataSet.DATA element captured from the app API (Love Lee, 2023-09-06)."""
    return json.loads((shared_upstream / CAPTURE).read_text("utf-8"))


# --- requests ---------------------------------------------------------------------------------------------


def test_web_requests_are_two_pages_with_the_source_parameters() -> None:
    expected = {
        "realtime": (("ditc", "D"), ("rtm", "Y")),
        "daily": (("ditc", "D"), ("rtm", "N")),
        "weekly": (("ditc", "W"), ("rtm", "N")),
    }
    for chart_type, params in expected.items():
        requests = genie.requests_for(chart_type)
        assert [r.params for r in requests] == [(*params, ("pg", "1")), (*params, ("pg", "2"))]
        assert {r.path for r in requests} == {"/chart/top200"}
        assert {r.upstream for r in requests} == {"GENIE"}
        assert all(r.method == "GET" and dict(r.headers)["User-Agent"].startswith("Mozilla/5.0") for r in requests)
    with pytest.raises(ValueError):
        genie.requests_for("monthly")


def test_app_requests_post_forms_to_the_app_origin() -> None:
    (realtime,) = genie.requests_for_app("realtime")
    assert (realtime.upstream, realtime.method, realtime.path) == (
        "GENIE_APP",
        "POST",
        "/chart/j_RealTimeRankSongList.json",
    )
    assert realtime.form == (("pg", "1"), ("pgSize", "100"))
    (daily,) = genie.requests_for_app("daily")
    (weekly,) = genie.requests_for_app("weekly")
    assert daily.path == weekly.path == "/chart/j_RankSongList.json"
    assert dict(daily.form or ())["ditc"] == "D" and dict(weekly.form or ())["ditc"] == "W"
    assert dict(daily.headers)["Content-Type"] == "application/x-www-form-urlencoded"


# --- app API against the real captured item ----------------------------------------------------------------


def test_real_app_item_parses_with_unquoted_names_and_image(app_item: dict[str, Any]) -> None:
    chart = genie.parse_app("realtime", [_envelope(app_item, chart_time="14:00")])
    assert chart.chart_hour == 14 and chart.chart_date is None
    (entry,) = chart.entries
    assert entry.rank == 1
    assert entry.title == "Love Lee"
    assert entry.artist == "AKMU (악뮤)"
    assert entry.artists == ["AKMU (악뮤)"]
    assert entry.album == "Love Lee"
    assert entry.song_id == "103151984"
    assert entry.album_id == "84181610"
    assert entry.artist_ids == ["80197389"]
    assert entry.image_url == (
        "https://image.genie.co.kr/Y/IMAGE/IMG_ALBUM/084/181/610/84181610_1692585955705_1_140x140.JPG"
        "/dims/resize/Q_80,0"
    )
    assert (entry.rank_change, entry.rank_status) == (0, "same")  # PRE_RANK_NO "1" → RANK_NO "1"


def test_real_app_item_rank_change_from_pre_rank_no(app_item: dict[str, Any]) -> None:
    moved = {**app_item, "RANK_NO": "3", "PRE_RANK_NO": "7"}
    fell = {**app_item, "RANK_NO": "4", "PRE_RANK_NO": "2"}
    new = {**app_item, "RANK_NO": "5", "PRE_RANK_NO": "0"}
    blank = {**app_item, "RANK_NO": "6", "PRE_RANK_NO": ""}
    entries = genie.parse_app("daily", [_envelope(moved, fell, new, blank)]).entries
    assert [(e.rank, e.rank_change, e.rank_status) for e in entries] == [
        (3, 4, "up"),
        (4, -2, "down"),
        (5, None, "new"),
        (6, None, "new"),
    ]


def test_app_chart_time_is_not_an_hour_for_daily(app_item: dict[str, Any]) -> None:
    assert genie.parse_app("daily", [_envelope(app_item)]).chart_hour is None


def test_app_error_payloads(app_item: dict[str, Any]) -> None:
    failed = json.dumps({"Result": {"RetCode": "1", "RetMsg": "잘못된 요청"}}).encode()
    with pytest.raises(UpstreamFormatError, match="잘못된 요청"):
        genie.parse_app("realtime", [failed])
    with pytest.raises(UpstreamFormatError, match="DATA"):
        genie.parse_app("realtime", [_envelope()])
    with pytest.raises(UpstreamFormatError, match="not JSON"):
        genie.parse_app("realtime", [b"<html><body>error</body></html>"])
    with pytest.raises(UpstreamFormatError, match="Result"):
        genie.parse_app("realtime", [b"{}"])
    with pytest.raises(UpstreamFormatError, match="SONG_NAME"):
        genie.parse_app("realtime", [_envelope({**app_item, "SONG_NAME": ""})])
    with pytest.raises(UpstreamFormatError, match="RANK_NO"):
        genie.parse_app("realtime", [_envelope({k: v for k, v in app_item.items() if k != "RANK_NO"})])


# --- web page: real row markup and its traps --------------------------------------------------------------


def test_real_format_row() -> None:
    (entry,) = genie.parse("realtime", [_page(_row())]).entries
    assert (entry.rank, entry.title, entry.artist, entry.artists) == (72, "POP!", "나연 (TWICE)", ["나연 (TWICE)"])
    assert (entry.song_id, entry.album_id, entry.artist_ids) == ("97209570", "82781282", ["80468933"])
    assert entry.album == "IM NAYEON"
    assert entry.image_url == (
        "https://image.genie.co.kr/Y/IMAGE/IMG_ALBUM/082/781/282/82781282_1656034600098_1_140x140.JPG"
        "/dims/resize/Q_80,0"
    )
    assert (entry.rank_change, entry.rank_status) == (15, "up")


def test_rank_markers() -> None:
    rows = [
        _row(songid="1", number="1", marker='<span class="rank-none"><span class="hide">유지</span></span>'),
        _row(songid="2", number="2", marker='<span class="rank-down">3<span class="hide">하강</span></span>'),
        _row(songid="3", number="3", marker='<span class="rank-new"><span class="hide">신규</span></span>'),
        _row(songid="4", number="4", marker='<span class="rank-re"><span class="hide">재진입</span></span>'),
        _row(songid="5", number="5", marker=""),
        _row(songid="6", number="6", marker="<span class=' rank-up '>2<span class=\"hide\">상승</span></span>"),
    ]
    entries = genie.parse("daily", [_page(*rows)]).entries
    assert [(e.rank, e.rank_change, e.rank_status) for e in entries] == [
        (1, 0, "same"),
        (2, -3, "down"),
        (3, None, "new"),
        (4, None, "new"),
        (5, None, "new"),
        (6, 2, "up"),
    ]


def test_title_badge_is_stripped_but_t_point_text_is_kept() -> None:
    badge = _row(title='<span class="icon icon-title">TITLE</span> Whiplash ')
    highlighted = _row(
        songid="2",
        title='<span class="icon icon-title">TITLE</span><span class="t_point">How We Came</span> (Feat. pH-1)',
    )
    adult = _row(songid="3", title='\n  <span class="icon icon-19">19금</span>\n   나쁜 X ')
    entries = genie.parse("realtime", [_page(badge, highlighted, adult)]).entries
    assert [e.title for e in entries] == ["Whiplash", "How We Came (Feat. pH-1)", "나쁜 X"]


def test_multi_artist_row_keeps_genie_text_as_one_artist() -> None:
    row = _row(artist="Marshmello &amp; Anne-Marie", artist_id="80619304")
    (entry,) = genie.parse("weekly", [_page(row)]).entries
    assert entry.artist == "Marshmello & Anne-Marie"
    assert entry.artists == ["Marshmello & Anne-Marie"]
    assert entry.artist_ids == ["80619304"]


def test_unquoted_handler_arguments_and_korean_latin_names() -> None:
    row = _row(artist="AKMU (악뮤)").replace("fnViewAlbumLayer('82781282')", "fnViewAlbumLayer(84181610)")
    (entry,) = genie.parse("realtime", [_page(row)]).entries
    assert entry.album_id == "84181610"
    assert entry.artist == "AKMU (악뮤)"


def test_web_error_pages() -> None:
    error = "<html><body><div class='error'>페이지를 찾을 수 없습니다</div></body></html>".encode()
    with pytest.raises(UpstreamFormatError, match="page 1"):
        genie.parse("realtime", [error])
    with pytest.raises(UpstreamFormatError, match="page 2"):
        genie.parse("realtime", [_page(_row()), error])
    with pytest.raises(UpstreamFormatError, match="title"):
        genie.parse("realtime", [_page(_row(title='<span class="icon icon-title">TITLE</span>'))])
    with pytest.raises(UpstreamFormatError, match="rank"):
        genie.parse("realtime", [_page(_row(number=""))])
    with pytest.raises(UpstreamFormatError):
        genie.parse("realtime", [])


def test_page_declaring_euc_kr_is_decoded_with_it() -> None:
    page = _page(_row(artist="아이유")).decode().replace('charset="UTF-8"', 'charset="euc-kr"')
    body = page.replace("POP!", "좋은 날").encode("euc-kr", errors="replace")
    (entry,) = genie.parse("realtime", [body]).entries
    assert (entry.title, entry.artist) == ("좋은 날", "아이유")


# --- our renderer round-trips --------------------------------------------------------------------------------


def _with_multi_artist_rows(rows: list[SampleRow]) -> list[SampleRow]:
    """The sample rows with rows 2 and 3 replaced by multi-artist songs (one new, one moved down)."""
    multi = [s for s in song_pool("melon") if len(s.artists) > 1]
    assert len(multi) >= 2
    out = list(rows)
    out[1] = SampleRow(rank=2, previous_rank=None, song=multi[0])
    out[2] = SampleRow(rank=3, previous_rank=1, song=multi[1])
    return out


def _expected(row: SampleRow) -> tuple[object, ...]:
    """What Genie shows of a sample row: its artists as one "A & B" string with the first artist's id."""
    text = sample_genie.artist_text(row.song.artists)
    song = row.song
    return (row.rank, song.title, text, [text], song.album, song.song_id, song.album_id, [song.artist_ids[0]],
            row.rank_change)


def _got(entry: KoreaEntry) -> tuple[object, ...]:
    return (entry.rank, entry.title, entry.artist, entry.artists, entry.album, entry.song_id, entry.album_id,
            entry.artist_ids, entry.rank_change)


@pytest.mark.parametrize("chart_type", genie.CHART_TYPES)
def test_rendered_web_pages_round_trip(chart_type: str) -> None:
    rows = _with_multi_artist_rows(sample_rows("melon", f"GENIE/{chart_type}"))
    bodies = sample_genie.render(chart_type, rows, WHEN)
    assert len(bodies) == len(genie.requests_for(chart_type)) == 2
    assert b'class="icon icon-title"' in b"".join(bodies)  # the badge trap is in the sample
    chart = genie.parse(chart_type, bodies)
    assert [_got(e) for e in chart.entries] == [_expected(r) for r in rows]
    assert chart.chart_date is None and chart.chart_hour is None
    assert chart.entries[1].artist == "로제 (ROSÉ) & Bruno Mars"
    assert all(e.image_url and e.image_url.startswith("https://image.genie.co.kr/") for e in chart.entries)


@pytest.mark.parametrize("chart_type", genie.CHART_TYPES)
def test_rendered_app_payloads_round_trip(chart_type: str) -> None:
    rows = _with_multi_artist_rows(sample_rows("melon", f"GENIE/{chart_type}"))
    bodies = sample_genie.render_app(chart_type, rows, WHEN)
    assert len(bodies) == len(genie.requests_for_app(chart_type)) == 1
    assert "%28ROS" in bodies[0].decode()  # percent-encoded like the real API
    chart = genie.parse_app(chart_type, bodies)
    assert [_got(e) for e in chart.entries] == [_expected(r) for r in rows]
    assert chart.chart_hour == (15 if chart_type == "realtime" else None)
