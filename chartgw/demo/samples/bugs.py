"""Bugs sample bodies: the track chart page (100 rows, one request) from sample rows.

Rows copy the real `tr` printed in a notebook (~2020) and a project's JS fixture: camelCase `albumId artistId mvId
trackId multiArtist rowType` attributes, hidden `_isStream`/`_isDown` inputs, `div.ranking` with `strong` and
`p.change`, `a.thumbnail` image on image.bugsm.co.kr, `p.title` with `adult_yn`, `p.artist` links, `a.album`,
the action buttons and `a.btnActions` with `artist_disp_nm`. Multi-artist rows get `multiArtist="Y"` and one
`a` per artist. Not from a capture (guessed): the `p.change.new` / up / down wording and the
`time[datetime]` chart stamp ("YYYY.MM.DD", plus " HH:00" on the realtime page).
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from chartgw.demo.samples import SampleRow
from chartgw.demo.samples.bodies import html_page
from chartgw.upstreams import bugs

_NAMES = {"realtime": "실시간", "daily": "일간", "weekly": "주간"}
_SECTIONS = {"realtime": "CHARTrealtime", "daily": "CHARTday", "weekly": "CHARTweek"}

_HEAD = """<meta charset="utf-8">
<title>벅스 - {name} 차트</title>
"""
_BODY = """<div id="container">
<section class="sectionPadding chartSection">
    <header class="pgTitle chartTitle">
        <h1>{name} 차트</h1>
        <div class="chartDate"><time datetime="{stamp}">{stamp}</time></div>
    </header>
    <div id="{section}">
    <table class="list trackList byChart">
        <caption>곡 목록</caption>
        <thead>
            <tr>
                <th scope="col" class="check"></th>
                <th scope="col" class="ranking"><span>순위</span></th>
                <th scope="col" class="albumArt"></th>
                <th scope="col" class="trackInfo"></th>
                <th scope="col" class="title"><span>곡</span></th>
                <th scope="col" class="artist"><span>아티스트</span></th>
                <th scope="col" class="album"><span>앨범</span></th>
                <th scope="col" class="action play"><span>듣기</span></th>
                <th scope="col" class="action add01"><span>재생목록</span></th>
                <th scope="col" class="action add02"><span>내앨범</span></th>
                <th scope="col" class="action download"><span>다운</span></th>
                <th scope="col" class="action mv"><span>영상</span></th>
                <th scope="col" class="action etc"><span>기타</span></th>
            </tr>
        </thead>
        <tbody>
{rows}        </tbody>
    </table>
    </div>
</section>
</div>
"""


def _change(row: SampleRow[Any]) -> str:
    change = row.rank_change
    if change is None:
        return '<p class="change new"><em>NEW</em><span>신규 진입</span></p>'
    if change > 0:
        return f'<p class="change up"><em>{change}</em><span>계단 상승</span></p>'
    if change < 0:
        return f'<p class="change down"><em>{-change}</em><span>계단 하락</span></p>'
    return '<p class="change none"><em>0</em><span>변동없음</span></p>'


def _image(album_id: str) -> str:
    """image.bugsm.co.kr/album/images/50/<id // 100>/<id>.jpg?version=..., as on the real page."""
    return f"https://image.bugsm.co.kr/album/images/50/{int(album_id) // 100}/{album_id}.jpg?version=20260101000000.0"


def _row(row: SampleRow[Any]) -> str:
    song = row.song
    tid, aid = song.song_id, song.album_id
    title, album = escape(song.title), escape(song.album)
    multi = "Y" if len(song.artists) > 1 else "N"
    artist_links = ",\n    ".join(
        f'<a href="https://music.bugs.co.kr/artist/{artist_id}?wl_ref=list_tr_10_chart" onclick="\n    " '
        f'title="{escape(name)}">{escape(name)}</a>'
        for name, artist_id in zip(song.artists, song.artist_ids, strict=True)
    )
    display = escape(", ".join(song.artists))
    return f"""<tr albumId="{aid}" artistId="{song.artist_ids[0]}" mvId="0" trackId="{tid}" multiArtist="{multi}" rowType="track">
    <input name="_isStream" type="hidden" value="{tid}"/>
    <input name="_isDown" type="hidden" value="{tid}"/>
    <td class="check"><input buyminquality="T" disc_id="1" name="check" title="{title}" type="checkbox" value="{tid}"/></td>
    <td>
    <div class="ranking">
    <strong>{row.rank}</strong>
    {_change(row)}
    </div>
    </td>
    <td>
    <a class="thumbnail" href="https://music.bugs.co.kr/album/{aid}?wl_ref=list_tr_07_chart" onclick="
    ">
    <span class="mask"></span>
    <img alt="{album} 대표이미지" onerror="bugs.utils.imgError(this);" src="{_image(aid)}"/>
    </a>
    </td>
    <td>
    <a class="trackInfo" href="https://music.bugs.co.kr/track/{tid}?wl_ref=list_tr_08_chart" onclick="
    ">곡정보</a>
    </td>
    <th scope="row">
    <p adult_yn="N" class="title">
    <a adultcheckval="1" aria-label="새창" href="javascript:;" onclick="bugs.wiselog.area('list_tr_09_chart');bugs.music.listen('{tid}',true);
    " title="{title}">{title}</a>
    </p>
    </th>
    <td class="left">
    <p class="artist">
    {artist_links}
    </p>
    </td>
    <td class="left">
    <a class="album" href="https://music.bugs.co.kr/album/{aid}?wl_ref=list_tr_11_chart" onclick="
    " title="{album}">{album}</a>
    </td>
    <td>
    <a adultcheckval="1" aria-label="새창" class="btn play" href="javascript:;" onclick="bugs.wiselog.area('list_tr_12_chart');bugs.music.listen('{tid}',true);
    ">듣기</a>
    </td>
    <td>
    <a adultcheckval="1" aria-label="새창" class="btn addPlaylist" href="javascript:;" onclick="bugs.wiselog.area('list_tr_13_chart');bugs.music.listen('{tid}');
    ">재생목록에 추가</a>
    </td>
    <td>
    <a class="btn addAlbum" href="javascript:;" onclick="bugs.wiselog.area('list_tr_14_chart');bugs.music.addTrackToMyAlbum(this,'{tid}');
    " track_title="{title}">내 앨범에 담기</a>
    </td>
    <td>
    <a adultcheckval="1" aria-label="새창" class="btn download flac" href="javascript:;" onclick="bugs.wiselog.area('list_tr_15_chart');bugs.layermenu.down(this,'{tid}','true','true','44.1','true','48', null );
    "><em class="flac">flac </em>다운로드</a>
    </td>
    <td>
    <a aria-label="새창" class="btn viewMV" href="javascript:;" onclick="bugs.wiselog.area('list_tr_16_chart');
    ">영상 재생</a>
    </td>
    <td>
    <a artist_disp_nm="{display}" artist_id="{song.artist_ids[0]}" class="btnActions" href="javascript:;" layer_type="CHART" layerpositiontarget="td" onclick="bugs.wiselog.area('list_tr_17_chart');
    bugs.layermenu.trackMoreAction(this,'{tid}','0','{aid}','bugs.music.listenRadioFromSeed(\\'{tid}\\',\\'track\\');','N', 'Y', '_chart');
    " track_title="{title}">기타 기능</a>
    </td>
    </tr>
"""


def render(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """The one chart page of `bugs.requests_for(chart_type)`, stamped with `when` (KST)."""
    name = _NAMES[chart_type]
    stamp = when.strftime("%Y.%m.%d %H:00" if chart_type == "realtime" else "%Y.%m.%d")
    bodies: list[bytes] = []
    for _request in bugs.requests_for(chart_type):
        body = _BODY.format(
            name=name,
            stamp=stamp,
            section=_SECTIONS[chart_type],
            rows="".join(_row(row) for row in rows),
        )
        bodies.append(html_page(_HEAD.format(name=name), body))
    return bodies
