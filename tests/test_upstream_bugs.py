"""Bugs: chart page parser against the real row markup (camelCase attributes, change markers, multi-artist
variants, time[datetime]), error pages, and our rendered samples."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from chartgw.demo.samples import SampleRow, sample_rows, song_pool
from chartgw.demo.samples import bugs as sample_bugs
from chartgw.store.records import KoreaEntry
from chartgw.upstreams import UpstreamFormatError, bugs

KST = timezone(timedelta(hours=9))
WHEN = datetime(2026, 1, 2, 15, 0, tzinfo=KST)


def _page(*rows: str, stamp: str | None = None) -> bytes:
    """A minimal chart page around real-format rows, optionally with a `time[datetime]` stamp."""
    time = f'<time datetime="{stamp}">{stamp}</time>' if stamp else ""
    return (
        f'<html><head><meta charset="utf-8"><title>벅스</title></head><body>{time}'
        f'<table class="list trackList byChart"><caption>곡 목록</caption><tbody>{"".join(rows)}</tbody></table>'
        "</body></html>"
    ).encode()


def _row(
    track_id: str = "6065263",
    rank: str = "1",
    change: str = '<p class="change none"><em>0</em><span>변동없음</span></p>',
    artists: str = (
        '<a href="https://music.bugs.co.kr/artist/80049126?wl_ref=list_tr_10_chart" onclick="\n    " '
        'title="아이유(IU)">아이유(IU)</a>'
    ),
    multi: str = "N",
    title: str = "Celebrity",
) -> str:
    """The Celebrity row as printed from the real page (~2020), with the real camelCase attribute names."""
    return f"""
<tr albumId="4027185" artistId="80049126" mvId="585654" trackId="{track_id}" multiArtist="{multi}" rowType="track">
<input name="_isStream" type="hidden" value="{track_id}"/>
<td class="check"><input buyminquality="T" disc_id="1" name="check" title="{title}" type="checkbox" value="{track_id}"/></td>
<td>
<div class="ranking">
<strong>{rank}</strong>
{change}
</div>
</td>
<td>
<a class="thumbnail" href="https://music.bugs.co.kr/album/4027185?wl_ref=list_tr_07_chart" onclick="
">
<span class="mask"></span>
<img alt="Celebrity 대표이미지" onerror="bugs.utils.imgError(this);" src="https://image.bugsm.co.kr/album/images/50/40271/4027185.jpg?version=20210127180636.0"/>
</a>
</td>
<th scope="row">
<p adult_yn="N" class="title">
<a adultcheckval="1" aria-label="새창" href="javascript:;" onclick="bugs.music.listen('{track_id}',true);
" title="{title}">{title}</a>
</p>
</th>
<td class="left">
<p class="artist">
{artists}
</p>
</td>
<td class="left">
<a class="album" href="https://music.bugs.co.kr/album/4027185?wl_ref=list_tr_11_chart" onclick="
" title="Celebrity">Celebrity</a>
</td>
<td>
<a artist_disp_nm="아이유(IU)" artist_id="80049126" class="btnActions" href="javascript:;" track_title="{title}">기타 기능</a>
</td>
</tr>"""


def test_requests_are_one_page_per_chart() -> None:
    paths = {t: [(r.upstream, r.path, r.params, r.method) for r in bugs.requests_for(t)] for t in bugs.CHART_TYPES}
    assert paths == {
        "realtime": [("BUGS", "/chart/track/realtime/total", (), "GET")],
        "daily": [("BUGS", "/chart/track/day/total", (), "GET")],
        "weekly": [("BUGS", "/chart/track/week/total", (), "GET")],
    }
    assert dict(bugs.requests_for("daily")[0].headers)["User-Agent"].startswith("Mozilla/5.0")
    with pytest.raises(ValueError):
        bugs.requests_for("monthly")


def test_real_format_row_with_camel_case_attributes() -> None:
    body = _page(_row())
    assert b'trackId="6065263"' in body and b'rowType="track"' in body  # the trap: camelCase in the real HTML
    chart = bugs.parse("realtime", [body])
    (entry,) = chart.entries
    assert (entry.rank, entry.title, entry.artist, entry.artists) == (1, "Celebrity", "아이유(IU)", ["아이유(IU)"])
    assert (entry.song_id, entry.album_id, entry.artist_ids) == ("6065263", "4027185", ["80049126"])
    assert entry.album == "Celebrity"
    assert entry.image_url == "https://image.bugsm.co.kr/album/images/50/40271/4027185.jpg?version=20210127180636.0"
    assert (entry.rank_change, entry.rank_status) == (0, "same")
    assert chart.chart_date is None and chart.chart_hour is None


def test_change_markers() -> None:
    rows = [
        _row(track_id="1", rank="1", change='<p class="change up"><em>4</em><span>계단 상승</span></p>'),
        _row(track_id="2", rank="2", change='<p class="change down"><em>7</em><span>계단 하락</span></p>'),
        _row(track_id="3", rank="3", change='<p class="change new"><em>NEW</em></p>'),
        _row(track_id="4", rank="4", change='<p class="change duration"><em>6일</em></p>'),
        _row(track_id="5", rank="5", change='<p class="change reentry"><em>RE</em></p>'),
        _row(track_id="6", rank="6", change=""),
    ]
    entries = bugs.parse("daily", [_page(*rows)]).entries
    assert [(e.rank, e.rank_change, e.rank_status) for e in entries] == [
        (1, 4, "up"),
        (2, -7, "down"),
        (3, None, "new"),
        (4, 0, "same"),
        (5, None, "new"),
        (6, None, "new"),
    ]


def test_multi_artist_row_with_one_link_per_artist() -> None:
    links = (
        '<a href="https://music.bugs.co.kr/artist/80145437?wl_ref=list_tr_10_chart" title="로제 (ROSÉ)">로제 (ROSÉ)</a>,\n'
        '<a href="https://music.bugs.co.kr/artist/1201?wl_ref=list_tr_10_chart" title="Bruno Mars">Bruno Mars</a>'
    )
    (entry,) = bugs.parse("realtime", [_page(_row(artists=links, multi="Y", title="APT."))]).entries
    assert entry.title == "APT."
    assert entry.artists == ["로제 (ROSÉ)", "Bruno Mars"]
    assert entry.artist == "로제 (ROSÉ), Bruno Mars"
    assert entry.artist_ids == ["80145437", "1201"]


def test_multi_artist_row_with_a_single_link_keeps_its_text() -> None:
    one = '<a href="javascript:;" onclick="bugs.layermenu.multiArtist(this);" title="정국, Latto">정국, Latto</a>'
    (entry,) = bugs.parse("realtime", [_page(_row(artists=one, multi="Y"))]).entries
    assert entry.artists == ["정국, Latto"]
    assert entry.artist == "정국, Latto"
    assert entry.artist_ids == ["80049126"]  # from the row's artistId


def test_chart_date_from_time_datetime() -> None:
    daily = bugs.parse("daily", [_page(_row(), stamp="2025.10.27")])
    assert (daily.chart_date, daily.chart_hour) == ("2025-10-27", None)
    realtime = bugs.parse("realtime", [_page(_row(), stamp="2026.01.02 15:00")])
    assert (realtime.chart_date, realtime.chart_hour) == ("2026-01-02", 15)
    weekly = bugs.parse("weekly", [_page(_row(), stamp="2026.01.02 15:00")])
    assert (weekly.chart_date, weekly.chart_hour) == ("2026-01-02", None)


def test_error_pages_and_missing_fields() -> None:
    error = "<html><body><p>요청하신 페이지를 찾을 수 없습니다.</p></body></html>".encode()
    with pytest.raises(UpstreamFormatError, match="not a chart page"):
        bugs.parse("daily", [error])
    # rows outside table.trackList (e.g. some other list) are not chart rows
    with pytest.raises(UpstreamFormatError):
        bugs.parse("daily", [f"<table class='other'>{_row()}</table>".encode()])
    with pytest.raises(UpstreamFormatError, match="rank"):
        bugs.parse("daily", [_page(_row(rank=""))])
    with pytest.raises(UpstreamFormatError, match="title"):
        bugs.parse("daily", [_page(_row(title=""))])
    with pytest.raises(UpstreamFormatError):
        bugs.parse("daily", [])


def _with_multi_artist_rows(rows: list[SampleRow]) -> list[SampleRow]:
    """The sample rows with rows 4 and 5 replaced by multi-artist songs (one new, one moved up)."""
    multi = [s for s in song_pool("bugs") if len(s.artists) > 1]
    out = list(rows)
    out[3] = SampleRow(rank=4, previous_rank=None, song=multi[0])
    out[4] = SampleRow(rank=5, previous_rank=9, song=multi[1])
    return out


def _got(entry: KoreaEntry) -> tuple[object, ...]:
    return (entry.rank, entry.title, entry.artists, entry.album, entry.song_id, entry.album_id, entry.artist_ids,
            entry.rank_change)


@pytest.mark.parametrize("chart_type", bugs.CHART_TYPES)
def test_rendered_pages_round_trip(chart_type: str) -> None:
    rows = _with_multi_artist_rows(sample_rows("bugs", f"BUGS/{chart_type}"))
    bodies = sample_bugs.render(chart_type, rows, WHEN)
    assert len(bodies) == len(bugs.requests_for(chart_type)) == 1
    assert b'rowType="track"' in bodies[0] and b'multiArtist="Y"' in bodies[0]
    chart = bugs.parse(chart_type, bodies)
    expected = [
        (r.rank, r.song.title, list(r.song.artists), r.song.album, r.song.song_id, r.song.album_id,
         list(r.song.artist_ids), r.rank_change)
        for r in rows
    ]
    assert [_got(e) for e in chart.entries] == expected
    assert chart.chart_date == "2026-01-02"
    assert chart.chart_hour == (15 if chart_type == "realtime" else None)
    assert chart.entries[3].artist == ", ".join(rows[3].song.artists)
    assert [e.rank_status for e in chart.entries[3:5]] == ["new", "up"]
