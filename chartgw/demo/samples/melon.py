"""Melon chart pages written from sample rows, in the markup of the real 2018 realtime capture
(melon/chart-index_realtime_2018-01-25_KBSure-Crawler.html): the same row cells, the hidden
`span.checkEllipsis` artist duplicates, `span.rank_wrap` bullets and the `div.calendar_prid` block.
Daily and weekly pages put the period straight in `#conts > div.calendar_prid`, as the real monthly
capture does; the weekly period is a range "YYYY.MM.DD ~ YYYY.MM.DD" starting on `when`'s day.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import urlencode

from chartgw.demo.samples import SampleRow
from chartgw.demo.samples.bodies import html_page
from chartgw.upstreams.melon import requests_for

MENU_ID = "19030101"  # the realtime chart's menu id in the 2018 capture, passed to playSong()

# (<title>, page heading) per chart type; realtime's title is the 2018 capture's, daily/weekly follow
# the real monthly page's "멜론차트>월간>장르종합>멜론".
PAGE_NAMES: dict[str, tuple[str, str]] = {
    "realtime": ("멜론차트>멜론 TOP 100>실시간>멜론", "멜론 TOP100"),
    "hot100_d100": ("멜론차트>HOT 100>100일>멜론", "HOT100"),
    "hot100_d30": ("멜론차트>HOT 100>30일>멜론", "HOT100"),
    "daily": ("멜론차트>일간>장르종합>멜론", "일간 차트"),
    "weekly": ("멜론차트>주간>장르종합>멜론", "주간 차트"),
}

TABS = (
    ("/chart/index.htm", "TOP100"),
    ("/chart/hot100/index.htm", "HOT100"),
    ("/chart/day/index.htm", "일간"),
    ("/chart/week/index.htm", "주간"),
    ("/chart/month/index.htm", "월간"),
)


def render(chart_type: str, rows: list[SampleRow[Any]], when: datetime) -> list[bytes]:
    """The one page requests_for(chart_type) fetches, stating `when` as its chart date (and hour for
    the hourly realtime/HOT100 charts)."""
    (request,) = requests_for(chart_type)
    title, heading = PAGE_NAMES[chart_type]
    url = "https://www.melon.com" + request.path + (f"?{urlencode(request.params)}" if request.params else "")
    on = ' class="on"'
    tabs = "\n".join(
        f'\t\t\t\t\t\t\t<li{on if path == request.path else ""}><a href="{path}" class="link_tab">'
        f'<span class="cntt">{name}</span></a></li>'
        for path, name in TABS
    )
    rows_html = "".join(_row(row) for row in rows)
    head = f"""	<meta http-equiv="Content-Type" content="text/html; charset=utf-8"/>
	<meta http-equiv="X-UA-Compatible" content="IE=edge,chrome=1" />
	<title>{escape(title)}</title>
	<meta property="og:title" content="Melon"/>
	<meta property="og:url" content="{escape(url)}"/>
	<meta property="og:type" content="website"/>
"""
    body = f"""<div id="wrap">
	<div id="cont_wrap" class="clfix">
		<div id="conts_section" class="my_fold">
			<!-- contents -->
				<div id="conts">
					<div class="page_header">
						<h2 class="title">{escape(heading)}</h2>
					</div>
					<div class="wrap_tabmenu01">
						<ul>
{tabs}
						</ul>
					</div>
{_calendar(chart_type, when)}
					<div id="tb_list">
<form id="frm" name="frm">
	<div class="service_list_song type02 d_song_list">
		<h3 class="none"></h3>
		<!-- 곡리스트 테이블 -->
		<table border="1" style="width:100%">
			<caption>이 표는 곡 리스트로 체크박스, 순위, 곡정보, 좋아요, 뮤비, 다운, 폰전송 내용을 포함하고 있으며 표 상 하단에 제공하는 전체선택, 듣기, 다운로드, 담기, 선물하기 기능을 이용하실 수 있습니다.</caption>
			<thead>
				<tr>
					<th scope="col"><div class="wrap t_right"><input type="checkbox" title="곡 목록 전체 선택" class="input_check d_checkall"></div></th>
					<th scope="col"><div class="wrap t_center"><span class="rank">순위</span></div></th>
					<th scope="col"><div class="wrap none">순위등락</div></th>
					<th scope="col"><div class="wrap none">앨범이미지</div></th>
					<th scope="col"><div class="wrap none">곡 상세가기</div></th>
					<th scope="col"><div class="wrap pd_l_12">곡정보</div></th>
					<th scope="col"><div class="wrap pd_l_12">앨범</div></th>
					<th scope="col"><div class="wrap pd_l_30">좋아요</div></th>
					<th scope="col"><div class="wrap t_center">듣기</div></th>
					<th scope="col"><div class="wrap t_center">담기</div></th>
					<th scope="col"><div class="wrap t_center">다운</div></th>
					<th scope="col"><div class="wrap t_center">뮤비</div></th>
					<th scope="col"><div class="wrap t_center">링/벨</div></th>
				</tr>
			</thead>
			<tbody>
{rows_html}			</tbody>
		</table>
	</div>
</form>
					</div>
				</div>
		</div>
	</div>
</div>
"""
    return [html_page(head, body)]


def _calendar(chart_type: str, when: datetime) -> str:
    """Hourly charts: date + hour inside #real_conts (2018 realtime); others: the period as text."""
    day = when.strftime("%Y.%m.%d")
    if chart_type in ("realtime", "hot100_d100", "hot100_d30"):
        hour = f"{when.hour:02d}:00"
        return f"""					<div id="real_conts">
<div class="multi_row">
	<div class="calendar_prid">
		<span class="yyyymmdd">
			<span class="year">{day}</span>
		</span>
		<span class="hhmm">
			<span class="hour">{hour}</span>
		</span>
		<div class="time_layer">
			<button title="시간선택" class="button_icons etc arrow_d" type="button" data-control="dropdown">
				<span class="none">시간선택</span>
			</button>
			<div class="l_popup" style="display: none;">
				<div class="box_scroll">
					<ul class="time_list">
									<li><a href="#" class="timelist" data-time-value="{when.strftime("%Y%m%d%H")}"><span class="time">{hour}</span></a></li>
					</ul>
				</div>
			</div>
		</div>
	</div>
</div>
					</div>"""
    if chart_type == "weekly":
        period = f"{day} ~ {(when + timedelta(days=6)).strftime('%Y.%m.%d')}"
    else:
        period = f'<span class="year">{day}</span>'
    return f"""					<div class="calendar_prid">
						<span class="yyyymmdd">
							{period}
						</span>
						<div class="time_layer">
							<button title="달력 레이어 팝업" class="button_icons etc arrow_d" type="button" data-control="dropdown">
								<span class="none">달력보기</span>
							</button>
						</div>
					</div>"""


def _rank_wrap(change: int | None) -> str:
    """The rank_wrap span exactly as the capture writes each kind."""
    if change is None:
        return """<span title="순위 진입" class="rank_wrap">
													<span class="bullet_icons rank_new"><span class="none">순위 진입</span></span>
												</span>"""
    if change == 0:
        return """<span title="순위 동일" class="rank_wrap">
													<span class="bullet_icons rank_static"><span class="none">순위 동일</span></span>
													<span class="none">0</span>
												</span>"""
    word, kind = ("상승", "up") if change > 0 else ("하락", "down")
    return f"""<span title="{abs(change)}단계 {word}" class="rank_wrap">
													<span class="bullet_icons rank_{kind}"><span class="none">단계 {word}</span></span>
													<span class="{kind}">{abs(change)}</span>
												</span>"""


def image_url(album_id: str) -> str:
    """A cdnimg album cover URL in the 2020s form (cm2/album/images/AAA/BB/CCC/<id>_500.jpg...)."""
    return (
        f"https://cdnimg.melon.co.kr/cm2/album/images/{album_id[:3]}/{album_id[3:5]}/{album_id[5:]}/"
        f"{album_id}_500.jpg/melon/resize/120/quality/80/optimize"
    )


def _row(row: SampleRow[Any]) -> str:
    song = row.song
    lst = "lst50" if row.rank <= 50 else "lst100"
    sid, aid = song.song_id, song.album_id
    title, album = escape(song.title), escape(song.album)
    artist_links = ", ".join(
        f"<a href=\"javascript:melon.link.goArtistDetail('{artist_id}');\" title=\"{escape(name)} - 페이지 이동\" >"
        f"{escape(name)}</a>"
        for name, artist_id in zip(song.artists, song.artist_ids, strict=True)
    )
    return f"""								<tr class="{lst}" id="{lst}"  data-song-no="{sid}">
									<td><div class="wrap t_right"><input type="checkbox" title="{title} 곡 선택" class="input_check "  name="input_check" value="{sid}"></div></td>
									<td><div class="wrap t_center"><span class="rank ">{row.rank}</span><span class="none">위</span></div></td>
										<!-- 차트순위 추가 -->
										<td><div class="wrap">
												{_rank_wrap(row.rank_change)}
										</div></td>
									<td><div class="wrap">
										<a href="javascript:melon.link.goAlbumDetail('{aid}');" title="{album}" class="image_typeAll">
											<img onerror="WEBPOCIMG.defaultAlbumImg(this);" width="60" height="60" src="{image_url(aid)}" alt="{album} - 페이지 이동"/>
											<span class="bg_album_frame"></span>
										</a>
									</div></td>
									<td><div class="wrap">
										<a href="javascript:melon.link.goSongDetail('{sid}');" title="{title} 곡정보" class="btn button_icons type03 song_info"><span class="none">곡정보</span></a>
									</div></td>
									<td><div class="wrap">
										<div class="wrap_song_info">
											<div class="ellipsis rank01"><span>
												<a href="javascript:melon.play.playSong('{MENU_ID}',{sid});" title="{title} 재생">{title}</a>
											</span></div><br>
											<div class="ellipsis rank02">
												{artist_links}<span class="checkEllipsis" style="display:none">{artist_links}</span>
											</div>
										</div>
									</div></td>
									<td><div class="wrap">
										<div class="wrap_song_info">
											<div class="ellipsis rank03">
												<a href="javascript:melon.link.goAlbumDetail('{aid}');" title="{album} - 페이지 이동">{album}</a>
											</div>
										</div>
									</div></td>
									<td><div class="wrap">
										<button type="button" class="button_etc like" title="{title} 좋아요" data-song-no="{sid}" data-song-menuid="{MENU_ID}">
											<span class="odd_span">좋아요</span>
											<span class="cnt">
												<span class="none">총건수</span>
												0
											</span>
										</button>
									</div></td>
									<td><div class="wrap t_center">
										<button type="button" title="듣기" class="button_icons play "  onClick="melon.play.playSong('{MENU_ID}',{sid});"><span class="none">듣기</span></button>
									</div></td>
									<td><div class="wrap t_center">
										<button type="button" title="담기" class="button_icons scrap "  onClick="melon.play.addPlayList('{sid}');"><span class="none">담기</span></button>
									</div></td>
									<td><div class="wrap t_center">
										<button type="button" title="다운로드" class="button_icons download "  onClick="melon.buy.goBuyProduct('frm', '{sid}', '3C0001', '','0', '{MENU_ID}');"><span class="none">다운로드</span></button>
									</div></td>
									<td><div class="wrap t_center">
										<button type="button" title="뮤직비디오" class="button_icons video "  onClick="melon.link.goMvDetail('{MENU_ID}', '{sid}','song');"><span class="none">뮤직비디오</span></button>
									</div></td>
									<td><div class="wrap t_center">
										<button type="button" title="링/벨" class="button_icons bell "  onClick="melon.buy.popPhoneDecorate('1110000000000000','{sid}')"><span class="none">링/벨</span></button>
									</div></td>
								</tr>
"""
