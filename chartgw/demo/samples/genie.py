"""Genie sample bodies: the top200 web page (two pages of 50 rows) and the app JSON API, from sample rows.

Web rows copy the real `tr.list` markup pasted in several projects (template whitespace, the nested `span.rank`,
the hidden change word, protocol-relative cover, `fnViewAlbumLayer`/`fnViewArtist`/`fnPlaySong` handlers, the
"외" related-artist box), and put the `icon icon-title` TITLE badge in front of title tracks (title == album).
Multi-artist rows are one `a.artist` "A & B" with the first artist's id, as Genie prints them; so those rows
parse back as one artist string (see `artist_text`), not as the sample's tuple.
The web page states no chart date we know of, so `when` only shows in the app API's `PageInfo.ChartTime`.
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Any

from chartgw.demo.samples import SampleRow
from chartgw.demo.samples.bodies import html_page, stable_number
from chartgw.upstreams import genie

ARTIST_JOIN = " & "

_HEAD = """<meta charset="UTF-8">
<title>{title}</title>
"""
_LIST_HEAD = """<div id="wrap">
<div id="body-content">
    <div class="newest-list">
        <div class="music-list-wrap">
            <table class="list-wrap">
                <caption>곡 리스트</caption>
                <thead>
                    <tr>
                        <th scope="col"><input type="checkbox" class="all-check" title="전체 선택" /></th>
                        <th scope="col">순위</th>
                        <th scope="col">앨범</th>
                        <th scope="col">곡정보</th>
                        <th scope="col">곡명/아티스트/앨범</th>
                        <th scope="col">듣기</th>
                        <th scope="col">재생목록</th>
                        <th scope="col">내 리스트</th>
                        <th scope="col">다운</th>
                        <th scope="col">뮤비</th>
                        <th scope="col">더보기</th>
                    </tr>
                </thead>
                <tbody>
"""
_LIST_TAIL = """                </tbody>
            </table>
        </div>
        <div class="page-nav rank-page-nav">
{nav}
        </div>
    </div>
</div>
</div>
"""
_TITLES = {"realtime": "지니차트>실시간 - 지니", "daily": "지니차트>일간 - 지니", "weekly": "지니차트>주간 - 지니"}


def artist_text(artists: tuple[str, ...] | list[str]) -> str:
    """How Genie prints a row's artists in its single artist link/field."""
    return ARTIST_JOIN.join(artists)


def _rank_marker(row: SampleRow[Any]) -> str:
    change = row.rank_change
    if change is None:
        inner = '<span class="rank-new">new<span class="hide">신규</span></span>'
    elif change > 0:
        inner = f'<span class="rank-up">{change}<span\n                                                        class="hide">상승</span></span>'
    elif change < 0:
        inner = f'<span class="rank-down">{-change}<span\n                                                        class="hide">하강</span></span>'
    else:
        inner = '<span class="rank-none"><span class="hide">유지</span></span>'
    return f'<span class="rank">{inner}</span>'


def _cover(album_id: str) -> str:
    """Genie's album image path: id zero-padded to 9 digits in 3/3/3 folders, a stamp, 140x140."""
    padded = album_id.zfill(9)
    stamp = 1_600_000_000_000 + stable_number(album_id) % 100_000_000_000
    return (
        f"//image.genie.co.kr/Y/IMAGE/IMG_ALBUM/{padded[:3]}/{padded[3:6]}/{padded[6:]}/"
        f"{album_id}_{stamp}_1_140x140.JPG/dims/resize/Q_80,0"
    )


def _row(row: SampleRow[Any]) -> str:
    song = row.song
    sid, aid = song.song_id, song.album_id
    title = escape(song.title)
    badge = '<span class="icon icon-title">TITLE</span>' if song.title == song.album else ""
    relation = (
        f"""
                                        <div class="toggle-button-box" >
                                            <button type="button" class="btn artist-etc" onclick="fnRelationArtistList('{sid}');">외</button>
                                            <ul class="list" id="RelationArtist_{sid}"></ul>
                                        </div>
                                        """
        if len(song.artists) > 1
        else ""
    )
    return f"""                            <tr class="list" songid="{sid}">
                                <td class="check"><input type="checkbox" class="select-check" title="{title}" /></td>
                                <td class="number">{row.rank}
                                        
                                    <span class="rank">
                                        
                                                {_rank_marker(row)}
                                            
                                    </span>
                                </td>
                                <td><a href="#" class="cover" onclick="fnViewAlbumLayer('{aid}');return false;"><span class="mask"></span><img src="{_cover(aid)}" onerror="this.src='//image.genie.co.kr/imageg/web/common/blank_68.gif';" alt="{escape(song.album)}" /></a></td>
                                <td class="link"><a href="#" class="btn-basic btn-info" onclick="fnViewSongInfo('{sid}');return false;">곡 제목 정보 페이지</a></td>
                                <td class="info">
                                    
                                    
                                    <a href="#" class="title ellipsis" title="재생" onclick="fnPlaySong('{sid}','1');return false;">
                                        
                                            {badge}
                                        
                                                {title}</a>

                                        <a href="#" class="artist ellipsis" onclick="fnViewArtist('{song.artist_ids[0]}');return false;">{escape(artist_text(song.artists))}</a>
                                        {relation}
                                        <i class="bar">|</i>
                                        <a href="#" class="albumtitle ellipsis" onclick="fnViewAlbumLayer('{aid}');return false;">{escape(song.album)}</a>
                                </td>
                                        <td class="btns"><a href="#" class="btn-basic btn-listen" title="재생" onclick="fnPlaySong('{sid};' ,'1'); return false;">듣기</a></td>
                                        <td class="btns"><a href="#" class="btn-basic btn-add" title="추가" onclick="fnPlaySong('{sid};' ,'3'); return false;">재생목록에 추가</a></td>
                                <td class="btns"><button type="button" class="btn-basic btn-album" songId="{sid}" id="add_my_album_{sid}" onclick="fnAddMyAlbumForm('#add_my_album_{sid}' , '{sid}' ,10, 10);return false;">플레이리스트에 담기</button></td>
                                        <td class="btns"><a href="#" class="btn-basic btn-down" title="다운" onclick="fnDownSong('{sid}');return false;">다운로드</a></td>
                                <td class="more">
                                    <div class="toggle-button-box">
                                        <button type="button" class="btn btn-basic btn-more">더보기</button>
                                        <ul class="list">
                                                    <li><a href="#" class="item" title="공유" onclick="shareDo('{sid}');return false;">공유하기/음악나누기</a></li>
                                                    <li><a href="#" class="item" title="선물" onclick="fnGiftSong('{sid}');return false;">선물하기</a></li>
                                        </ul>
                                    </div>
                                </td>
                            </tr>
"""


def render(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """One top200 page per request of `genie.requests_for` (rows 1-50, 51-100)."""
    requests = genie.requests_for(chart_type)
    bodies: list[bytes] = []
    for index, _request in enumerate(requests):
        page_rows = rows[index * genie.PAGE_SIZE : (index + 1) * genie.PAGE_SIZE]
        nav = "\n".join(
            f'            <a href="#" class="{"current" if n == index + 1 else ""}" onclick="fnGoPage({n});return false;">'
            f"<span>{(n - 1) * genie.PAGE_SIZE + 1} ~ {n * genie.PAGE_SIZE}위</span></a>"
            for n in range(1, len(requests) + 1)
        )
        listing = _LIST_HEAD + "".join(_row(row) for row in page_rows) + _LIST_TAIL.format(nav=nav)
        bodies.append(html_page(_HEAD.format(title=_TITLES[chart_type]), listing))
    return bodies


def app_quote(text: str) -> str:
    """Genie app string encoding as in the captured item: ASCII punctuation %XX, letters/space/Hangul kept."""
    return "".join(
        ch if ch.isalnum() or ch in " -_." or ord(ch) > 127 else "".join(f"%{b:02X}" for b in ch.encode())
        for ch in text
    )


def _app_item(row: SampleRow[Any]) -> dict[str, str]:
    """A DataSet.DATA element with the captured item's keys, all strings."""
    song = row.song
    image = app_quote("https:" + _cover(song.album_id))
    return {
        "ROWNUM": str(row.rank),
        "SONG_ID": song.song_id,
        "DLM_SONG_LID": str(int(song.song_id) + 1_590_003),
        "SONG_NAME": app_quote(song.title),
        "ARTIST_ID": song.artist_ids[0],
        "ARTIST_NAME": app_quote(artist_text(song.artists)),
        "ALBUM_ID": song.album_id,
        "ALBUM_NAME": app_quote(song.album),
        "ALBUM_IMG_PATH": image,
        "THUMBNAIL_IMG_PATH": image,
        "SONG_ADLT_YN": "N",
        "MV_ADLT_YN": "N",
        "MV_SERVICE_CNT": "1",
        "REP_YN": "Y" if song.title == song.album else "N",
        "LYRICS_YN": "Y",
        "FULL_STM_YN": "Y",
        "STM_YN": "Y",
        "DOWN_YN": "Y",
        "DOWN_MP3_YN": "Y",
        "RANK_NO": str(row.rank),
        # Assumed encoding of a new entry (no capture shows one): previous rank "0".
        "PRE_RANK_NO": str(row.previous_rank or 0),
        "HOLD_BACK": "N",
        "DURATION": str(150 + stable_number(song.song_id) % 120),
        "MV_SERVICE_YN": "Y",
        "SONG_PAID": "0",
    }


def render_app(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """One app JSON body per request of `genie.requests_for_app`, in the Result/PageInfo/DataSet envelope."""
    bodies: list[bytes] = []
    for index, _request in enumerate(genie.requests_for_app(chart_type)):
        page_rows = rows[index * genie.APP_PAGE_SIZE : (index + 1) * genie.APP_PAGE_SIZE]
        # Only ChartTime is known of PageInfo (read by projects for the realtime chart).
        page_info = {"ChartTime": when.strftime("%H:00")} if chart_type == "realtime" else {}
        payload = {
            "Result": {"RetCode": "0", "RetMsg": ""},  # success RetMsg text is unknown
            "PageInfo": page_info,
            "DataSet": {"DATA": [_app_item(row) for row in page_rows]},
        }
        bodies.append(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
    return bodies
