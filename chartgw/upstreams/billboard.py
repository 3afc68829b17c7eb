"""Billboard (billboard.com) weekly charts: the chart pages, and billboard.py's JSON dumps for imports (NOTES section 6).

Requests: `/charts/{slug}/` is the latest week, `/charts/{slug}/{YYYY-MM-DD}/` a given week. The site rounds a date
up to the next chart date and answers future or missing weeks with another week, so the chart date always comes
from the page itself (`#chart-date-picker[data-date]`), never from the URL asked.

Page layouts, one parser (the row frame is shared: `ul.o-chart-results-list-row[data-detail-target]`):
- 2021-2024 ("pmc-billboard-2021"), verified against two real captures (Hot 100 of 2021-11-27, raw server HTML;
  Hot 100 of 2024-12-07, a browser "save page as" copy): rank = first `span.c-label` of the first `li`, the
  NEW / "RE- ENTRY" (2021: "RE- ENTER") badge a further `span.c-label` there (mobile) and in the third `li`
  (desktop), image `img[data-lazy-src]` (src is a lazy-load gif), title `h3#title-of-a-story`, artist the
  `span.c-label` beside it, then last week / peak / weeks as the `span.c-label` values of the desktop stat
  cells, in that order (an award cell without a value may or may not be there; a second, mobile copy is skipped).
- post-2024 (re-branded), known only from a page read through a code index (no file on disk): same row frame,
  but the stats are label/value pairs (`span.c-span` "LW" / "PEAK" / "WEEKS" then the next `span.c-label`),
  rows may add other labels (a "WEEKS AT NO. 1" stat on some rows, billboard.py issue #101), the artist
  `span.c-label` may hold a link, and early rows carry the image in `src`. Parsed by label, so extra stats and
  missing award cells do not shift values.
Neither layout prints previous/next week links; they are read when a page has `[data-chart-prev-date]` /
`[data-chart-next-date]` (the 2019-2021 layout had them) and come from billboard.py's dumps.

billboard.py dumps (`ChartData.json()`), public code only: v7 schema `{name, title, date, previousDate, nextDate,
entries[{rank, title, artist, image, isNew, lastPos, peakPos, weeks}]}` (lastPos 0 = none; title "" on artist
charts) and the 2016 schema with a `change` string ("New", "Hot Shot Debut", "Re-Entry", "+3", "-1", "0") instead
of `isNew`/`image`.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, declare_upstream
from chartgw.upstreams.fields import absolute_url, clean, decode, node_text, parse_html, snippet
from chartgw.upstreams.json_api import BROWSER_UA

UPSTREAM = declare_upstream("BILLBOARD", "https://www.billboard.com")

Kind = Literal["songs", "albums", "artists"]
Layout = Literal["2021", "post-2024", "billboard.py", "billboard.py-2016"]


# --- the charts ------------------------------------------------------------------------------------------------


class ChartInfo(NamedTuple):
    """One Billboard chart: its URL slug, the title the site gives it, what it ranks and its current row count."""

    slug: str
    title: str
    kind: Kind
    size: int


CHARTS: tuple[ChartInfo, ...] = (
    ChartInfo("hot-100", "Billboard Hot 100", "songs", 100),
    ChartInfo("billboard-200", "Billboard 200", "albums", 200),
    ChartInfo("artist-100", "Billboard Artist 100", "artists", 100),
    ChartInfo("billboard-global-200", "Billboard Global 200", "songs", 200),
    ChartInfo("billboard-global-excl-us", "Billboard Global Excl. US", "songs", 200),
    ChartInfo("hot-country-songs", "Hot Country Songs", "songs", 50),
    ChartInfo("hot-r-and-b-hip-hop-songs", "Hot R&B/Hip-Hop Songs", "songs", 50),
    ChartInfo("hot-rock-alternative-songs", "Hot Rock & Alternative Songs", "songs", 50),
    ChartInfo("hot-latin-songs", "Hot Latin Songs", "songs", 50),
    ChartInfo("dance-electronic-songs", "Hot Dance/Electronic Songs", "songs", 50),
    ChartInfo("hot-rap-songs", "Hot Rap Songs", "songs", 25),
)
"""The default charts of /ranking-charts. Sizes are today's; older weeks of genre charts and the Billboard 200
had other sizes (the 2006 Traditional Jazz Albums dump has 25 rows)."""

CHARTS_BY_SLUG: dict[str, ChartInfo] = {chart.slug: chart for chart in CHARTS}
DEFAULT_SLUGS: tuple[str, ...] = tuple(chart.slug for chart in CHARTS)

_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def chart_info(slug: str) -> ChartInfo | None:
    """The known chart of that slug, or None for a chart outside the table."""
    return CHARTS_BY_SLUG.get(slug)


def expected_size(slug: str) -> int | None:
    """How many rows a complete current page of that chart has (hot-100 100, billboard-200 200, ...); None if unknown."""
    info = CHARTS_BY_SLUG.get(slug)
    return info.size if info else None


def check_slug(slug: str) -> str:
    """The slug itself when it is a URL-safe Billboard slug ("hot-100"); else ValueError."""
    if not _SLUG.fullmatch(slug):
        raise ValueError(f"billboard: not a chart slug: {slug!r}")
    return slug


# --- chart weeks -----------------------------------------------------------------------------------------------

SATURDAY = 5
LAST_MONDAY_CHART = date(1961, 12, 25)
"""The Hot 100 was dated Mondays from 1958-08-04 to 1961-12-25, then Saturdays from 1962-01-06 (no chart between)."""
FIRST_SATURDAY_CHART = date(1962, 1, 6)


def chart_date_for(day: date) -> date:
    """The chart date of the chart week containing `day`: the same or next Saturday, as the site rounds a date up
    (a week dated Saturday covers Sunday to Saturday). Before 1962 the next Monday; 1961-12-26..1962-01-06 all
    belong to the 1962-01-06 chart."""
    if day <= LAST_MONDAY_CHART:
        return day + timedelta(days=(0 - day.weekday()) % 7)
    snapped = day + timedelta(days=(SATURDAY - day.weekday()) % 7)
    return max(snapped, FIRST_SATURDAY_CHART)


def is_chart_date(day: date) -> bool:
    """Whether a chart is dated `day` (a Saturday from 1962, a Monday before)."""
    return chart_date_for(day) == day


def previous_chart_date(chart_date: date) -> date:
    """The chart date one week before the week of `chart_date` (the backfill's step back; 1962-01-06 → 1961-12-25)."""
    current = chart_date_for(chart_date)
    if current == FIRST_SATURDAY_CHART:
        return LAST_MONDAY_CHART
    return chart_date_for(current - timedelta(days=7))


def next_chart_date(chart_date: date) -> date:
    """The chart date one week after the week of `chart_date`."""
    return chart_date_for(chart_date_for(chart_date) + timedelta(days=1))


# --- requests --------------------------------------------------------------------------------------------------

HEADERS: tuple[tuple[str, str], ...] = (
    ("User-Agent", BROWSER_UA),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
    ("Accept-Language", "en-US,en;q=0.9"),
)
"""A browser's headers: billboard.py sends requests' defaults; an odd custom User-Agent got HTTP 403 in 2019."""


def chart_path(slug: str, chart_date: date | None = None) -> str:
    """`/charts/{slug}/` (latest) or `/charts/{slug}/{YYYY-MM-DD}/` with the week's chart date."""
    check_slug(slug)
    if chart_date is None:
        return f"/charts/{slug}/"
    return f"/charts/{slug}/{chart_date_for(chart_date).isoformat()}/"


def requests_for(slug: str, chart_date: date | None = None) -> list[UpstreamRequest]:
    """One GET of the chart page: the latest week, or the week containing `chart_date` (asked by its chart date,
    so the same week is always the same URL)."""
    return [UpstreamRequest(upstream=UPSTREAM, path=chart_path(slug, chart_date), headers=HEADERS)]


# --- records ---------------------------------------------------------------------------------------------------


class RankingEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of a weekly chart, normalised; null where the page has no value."""

    rank: int
    title: str | None
    """The song or album; null on artist charts."""
    artist: str
    """One string, as credited ("Taylor Swift Featuring Ed Sheeran"); the ranked artist on artist charts."""
    image: str | None
    """The row's cover/photo URL (180x180 on charts-static.billboard.com); null when the page has no usable URL."""
    last_week: int | None
    """Last week's rank; null for a new entry or a re-entry ("-" on the page)."""
    peak: int | None
    """Best rank so far, this week included."""
    weeks_on_chart: int | None
    """Weeks on the chart, this week included."""
    is_new: bool | None
    """The page's NEW badge (a debut); null when the source says nothing either way."""
    is_reentry: bool | None
    """The page's RE-ENTRY badge; null when the source says nothing either way."""


class RawEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """What the source said for one row, verbatim (only the template's surrounding whitespace stripped), before
    any normalisation; for billboard.py dumps, the JSON values as text."""

    rank: str
    title: str | None
    artist: str | None
    image: str | None
    """The attribute the image was read from (`data-lazy-src`, else `src`), as written."""
    last_week: str | None
    peak: str | None
    weeks_on_chart: str | None
    marker: str | None
    """The badge text ("NEW", "RE-\\nENTRY"); a 2016 dump's `change`; a v7 dump's `isNew` ("true"/"false")."""


class RankingEntryWithRaw(RankingEntry, kw_only=True, omit_defaults=False):
    """An entry with what the page said: store this, decode as `RankingEntry` for plain answers (msgspec skips the
    extra field) and as this type for `include_raw=true`."""

    raw: RawEntry


class ChartWeek(msgspec.Struct, kw_only=True):
    """One week of one chart as the source states it."""

    slug: str | None
    """The chart the page says it is (from its own links); null when it does not say."""
    title: str | None
    """The chart's title as the page prints it ("The Hot 100", "Billboard Hot 100™")."""
    chart_date: str
    """YYYY-MM-DD printed by the page: the week really served, whatever week was asked."""
    previous_date: str | None
    next_date: str | None
    layout: Layout
    entries: list[RankingEntry]
    raw: list[RawEntry]
    """Index-aligned with `entries`."""


def with_raw(chart: ChartWeek) -> list[RankingEntryWithRaw]:
    """Each entry with its raw values attached, for a store that keeps both."""
    pairs = zip(chart.entries, chart.raw, strict=True)
    return [RankingEntryWithRaw(**msgspec.structs.asdict(entry), raw=raw) for entry, raw in pairs]


def require_size(chart: ChartWeek, slug: str, size: int | None = None) -> ChartWeek:
    """The chart itself when it has at least `size` rows (default: the slug's `expected_size`); a short page is an
    UpstreamFormatError (a fetch that keeps the last good snapshot). Use it on current weeks: older weeks of some
    charts were legitimately shorter."""
    wanted = size if size is not None else expected_size(slug)
    if wanted is not None and len(chart.entries) < wanted:
        raise UpstreamFormatError(
            f"billboard {slug} {chart.chart_date}: short page, {len(chart.entries)} of {wanted} rows"
        )
    return chart


# --- HTML pages ------------------------------------------------------------------------------------------------

_WEEK_OF = re.compile(r"Week of\s+([A-Z][a-z]+ \d{1,2}, \d{4})")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_CHART_LINK = re.compile(r"/charts/([a-z0-9-]+)/")
_LAZY_FALLBACK = "lazyload-fallback"
_ROBOT_MARKERS = (
    "captcha", "cf-chl", "just a moment...", "attention required", "access denied", "request unsuccessful",
    "are you a robot", "verify you are human", "px-captcha",
)
_STAT_LABELS = {"LW": "last_week", "LAST WEEK": "last_week", "PEAK": "peak", "PEAK POS.": "peak",
                "WEEKS": "weeks_on_chart", "WKS ON CHART": "weeks_on_chart"}


def refusal(status: int, body: bytes) -> str | None:
    """Why a non-200 answer is a refusal not to retry: HTTP 403 (the site's block, as billboard.py met in 2019) or a
    robot-check page; None for an ordinary error (a 404 for an unknown slug, a 5xx worth retrying)."""
    head = decode(body[:20000]).lower()
    marker = next((m for m in _ROBOT_MARKERS if m in head), None)
    if marker is not None:
        return f"robot check / block page ({marker!r})"
    if status == 403:
        return "access refused (HTTP 403)"
    return None


def parse(slug: str, body: bytes) -> ChartWeek:
    """The rows, chart date, title and week links of one chart page (2021-2024 or post-2024 layout).

    Refuses an empty body, a robot check, a page without rows (changed layout, paywall), a truncated page, ranks
    that are not 1..n, a row without its fields, and a page of another chart than `slug`. Does not check the row
    count against the chart's size: see `require_size`.
    """
    check_slug(slug)
    where = f"billboard {slug}"
    if not body.strip():
        raise UpstreamFormatError(f"{where}: empty body")
    tree = parse_html(body)
    rows = tree.css("ul.o-chart-results-list-row")
    if not rows:
        raise UpstreamFormatError(_no_rows_reason(where, tree, decode(body)))
    if b"</html>" not in body[-4096:].lower():
        raise UpstreamFormatError(f"{where}: truncated page ({len(rows)} rows, no closing </html>)")
    page_slug = _page_slug(tree)
    if page_slug is not None and page_slug != slug:
        raise UpstreamFormatError(f"{where}: the page is the {page_slug!r} chart")
    chart_date = _page_date(tree, decode(body), where)
    info = CHARTS_BY_SLUG.get(slug)
    parsed = [_html_row(row, where) for row in rows]
    kind = info.kind if info else ("artists" if all(not raw.artist for _, raw, _ in parsed) else "songs")
    entries = [_entry(fields, raw, kind, f"{where} rank {raw.rank}") for fields, raw, _ in parsed]
    _check_ranks([e.rank for e in entries], where)
    prev_node = tree.css_first("[data-chart-prev-date]")
    next_node = tree.css_first("[data-chart-next-date]")
    return ChartWeek(
        slug=page_slug,
        title=_page_title(tree),
        chart_date=chart_date,
        previous_date=_iso_or_none(prev_node.attributes.get("data-chart-prev-date") if prev_node else None),
        next_date=_iso_or_none(next_node.attributes.get("data-chart-next-date") if next_node else None),
        layout="post-2024" if any(labelled for _, _, labelled in parsed) else "2021",
        entries=entries,
        raw=[raw for _, raw, _ in parsed],
    )


def _no_rows_reason(where: str, tree: LexborHTMLParser, text: str) -> str:
    """Why a page has no chart rows: a robot check, a paywall, or (by default) a changed layout."""
    head = text[:20000].lower()
    title = node_text(tree.css_first("title"))
    for marker in _ROBOT_MARKERS:
        if marker in head:
            return f"{where}: robot check / block page ({marker!r}; title {title!r})"
    if tree.css_first("div.pmc-paywall") is not None:
        return f"{where}: paywall without chart rows (title {title!r})"
    if not text.lstrip().startswith("<"):
        return f"{where}: not an HTML page: {snippet(text)!r}"
    return f"{where}: no ul.o-chart-results-list-row rows (layout changed?); title {title!r}"


def _page_slug(tree: LexborHTMLParser) -> str | None:
    """The chart the page says it is: the date picker's link, else og:url."""
    picker = tree.css_first("#chart-date-picker")
    og_url = tree.css_first('meta[property="og:url"]')
    for link in (picker.attributes.get("data-link") if picker else None,
                 og_url.attributes.get("content") if og_url else None):
        match = _CHART_LINK.search(urlsplit(link or "").path)
        if match:
            return match.group(1)
    return None


def _page_date(tree: LexborHTMLParser, text: str, where: str) -> str:
    """`#chart-date-picker[data-date]`, else the "Week of November 27, 2021" heading."""
    picker = tree.css_first("#chart-date-picker")
    stated = clean(picker.attributes.get("data-date")) if picker else ""
    if _ISO_DAY.fullmatch(stated):
        return stated
    match = _WEEK_OF.search(text)
    if match:
        try:
            return _month_day_year(match.group(1)).isoformat()
        except ValueError:
            pass
    raise UpstreamFormatError(f"{where}: no chart date (#chart-date-picker[data-date] or 'Week of ...')")


def _month_day_year(text: str) -> date:
    return datetime.strptime(text, "%B %d, %Y").date()


def _page_title(tree: LexborHTMLParser) -> str | None:
    og_title = tree.css_first('meta[property="og:title"]')
    title = clean(og_title.attributes.get("content")) if og_title else ""
    if not title:
        heading = tree.css_first("div.chart-results h2#section-heading")
        title = node_text(heading)
    if not title:
        title = node_text(tree.css_first("title")).split(" – ")[0]
    return title or None


def _iso_or_none(value: str | None) -> str | None:
    value = clean(value)
    return value if _ISO_DAY.fullmatch(value) else None


def _direct_items(node: LexborNode) -> list[LexborNode]:
    """The `li` children of a list (text nodes and wrappers skipped)."""
    return [child for child in node.iter() if child.tag == "li"]


def _verbatim(node: LexborNode | None) -> str:
    """A node's text as written, minus the template's surrounding whitespace."""
    return (node.text() or "").strip() if node is not None else ""


def _html_row(row: LexborNode, where: str) -> tuple[dict[str, str], RawEntry, bool]:
    """(stat values by field, the raw row, whether the row used the labelled post-2024 stats)."""
    cells = _direct_items(row)
    if len(cells) < 4:
        raise UpstreamFormatError(f"{where}: row with {len(cells)} cells, expected 4 (rank, image, badge, body)")
    rank_cells = cells[0].css("span.c-label")
    rank_text = _verbatim(rank_cells[0]) if rank_cells else ""
    where = f"{where} row {row.attributes.get('data-detail-target') or '?'}"
    badges = [_verbatim(span) for span in cells[2].css("span.c-label")] + [_verbatim(s) for s in rank_cells[1:]]
    heading = row.css_first("h3#title-of-a-story")
    if heading is None:
        raise UpstreamFormatError(f"{where}: no h3#title-of-a-story")
    credit = heading.parent.css_first("span.c-label") if heading.parent is not None else None
    stats, labelled = _stats(row, heading, where)
    image_attr = _image_attr(cells[1])
    raw = RawEntry(
        rank=rank_text,
        title=_verbatim(heading),
        artist=_verbatim(credit) if credit is not None else None,
        image=image_attr,
        last_week=stats.get("last_week"),
        peak=stats.get("peak"),
        weeks_on_chart=stats.get("weeks_on_chart"),
        marker=next((badge for badge in badges if badge), None),
    )
    return stats, raw, labelled


def _image_attr(cell: LexborNode) -> str | None:
    image = cell.css_first("img")
    if image is None:
        return None
    return image.attributes.get("data-lazy-src") or image.attributes.get("src") or None


def _stats(row: LexborNode, heading: LexborNode, where: str) -> tuple[dict[str, str], bool]:
    """Last week / peak / weeks as written. Post-2024: by their `span.c-span` labels (first copy wins: the desktop
    block precedes the mobile one). 2021-2024: the `span.c-label` of the desktop cells after the title cell."""
    stats: dict[str, str] = {}
    pending: str | None = None
    labelled = False
    for span in row.css("span.c-span, span.c-label"):
        classes = (span.attributes.get("class") or "").split()
        if "c-span" in classes:
            pending = _STAT_LABELS.get(clean(span.text()).upper())
            labelled = labelled or pending is not None
            if pending is None and clean(span.text()):
                pending = "_other"
        elif pending is not None:
            if pending != "_other":
                stats.setdefault(pending, _verbatim(span))
            pending = None
    if labelled:
        return stats, True
    body = heading.parent.parent if heading.parent is not None else None
    if body is None:
        raise UpstreamFormatError(f"{where}: title outside the row body")
    values = [_verbatim(cell.css_first("span.c-label")) for cell in _direct_items(body)[1:]
              if "u-hidden@tablet" not in (cell.attributes.get("class") or "").split()
              and cell.css_first("span.c-label") is not None]
    if len(values) != 3:
        raise UpstreamFormatError(f"{where}: {len(values)} stat values beside the title, expected 3 (LW, peak, wks)")
    return dict(zip(("last_week", "peak", "weeks_on_chart"), values, strict=True)), False


def _stat(value: str | None, what: str, where: str) -> int | None:
    """A stat cell: digits → int; "-" or nothing → None; anything else is a changed format."""
    text = clean(value)
    if text in ("", "-", "--", "\u2013", "\u2014"):
        return None
    if not text.isdigit():
        raise UpstreamFormatError(f"{where}: {what} is not a number: {text!r}")
    return int(text)


def _marker_flags(marker: str | None) -> tuple[bool | None, bool | None]:
    """(is_new, is_reentry) from a badge: "NEW", "RE- ENTRY"/"RE- ENTER" (any spacing); no badge is neither; a
    badge we do not know leaves both unknown."""
    if marker is None:
        return False, False
    word = re.sub(r"[\s\-]+", "", marker).upper()
    if word in ("NEW", "HOTSHOTDEBUT"):
        return True, False
    if word in ("REENTRY", "REENTER"):
        return False, True
    return None, None


def _entry(fields: dict[str, str], raw: RawEntry, kind: Kind, where: str) -> RankingEntry:
    rank = _stat(raw.rank, "rank", where)
    if rank is None:
        raise UpstreamFormatError(f"{where}: no rank")
    heading = clean(raw.title)
    credit = clean(raw.artist)
    if kind == "artists":
        title, artist = None, heading or credit
    else:
        title, artist = heading, credit
        if not title:
            raise UpstreamFormatError(f"{where}: empty title")
    if not artist:
        raise UpstreamFormatError(f"{where}: empty artist")
    is_new, is_reentry = _marker_flags(raw.marker)
    return RankingEntry(
        rank=rank,
        title=title,
        artist=artist,
        image=_image_url(raw.image),
        last_week=_stat(fields.get("last_week"), "last week", where),
        peak=_stat(fields.get("peak"), "peak", where),
        weeks_on_chart=_stat(fields.get("weeks_on_chart"), "weeks on chart", where),
        is_new=is_new,
        is_reentry=is_reentry,
    )


def _image_url(value: str | None) -> str | None:
    """An absolute http(s) image URL; the lazy-load placeholder gif and a browser-saved page's local copies
    ("billboard_hot_100_files/...") are not the row's image."""
    url = absolute_url(value)
    if url is None or _LAZY_FALLBACK in url or not url.startswith(("https://", "http://")):
        return None
    return url


def _check_ranks(ranks: list[int], where: str) -> None:
    if ranks != list(range(1, len(ranks) + 1)):
        gap = next((i + 1 for i, rank in enumerate(ranks) if rank != i + 1), len(ranks))
        raise UpstreamFormatError(f"{where}: ranks are not 1..{len(ranks)} (first mismatch at row {gap})")


# --- billboard.py dumps ----------------------------------------------------------------------------------------

_NEW_CHANGES = {"new", "hot shot debut"}
_REENTRY_CHANGES = {"re-entry", "reentry"}


def parse_billboard_py_json(body: bytes, slug: str | None = None) -> ChartWeek:
    """One week from a billboard.py `ChartData.json()` dump (v7 schema, or the 2016 one with `change`).

    lastPos/peakPos/weeks 0 mean "none" in billboard.py and become null. v7 dumps only say `isNew`; a row not new,
    with no last week and more than one week on the chart is a re-entry (derived, not stated). Refuses a dump of
    another chart than `slug`, no entries, and ranks that are not 1..n.
    """
    try:
        doc = json.loads(decode(body))
    except ValueError as exc:
        raise UpstreamFormatError(f"billboard.py dump: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
        raise UpstreamFormatError("billboard.py dump: no `entries` list")
    name = clean(doc.get("name")) or None
    where = f"billboard.py dump {name or '?'}"
    if slug is not None and name is not None and name != slug:
        raise UpstreamFormatError(f"{where}: asked for {slug!r}, the dump is {name!r}")
    chart_date = _iso_or_none(doc.get("date"))
    if chart_date is None:
        raise UpstreamFormatError(f"{where}: no `date`")
    items = doc["entries"]
    if not items:
        raise UpstreamFormatError(f"{where} {chart_date}: no entries")
    old_schema = any(isinstance(item, dict) and "change" in item for item in items)
    info = CHARTS_BY_SLUG.get(slug or name or "")
    kind: Kind = info.kind if info else (
        "artists" if all(isinstance(i, dict) and not clean(i.get("title")) for i in items) else "songs")
    pairs = [_dump_row(item, kind, old_schema, f"{where} {chart_date} entries[{n}]") for n, item in enumerate(items)]
    _check_ranks([entry.rank for entry, _ in pairs], f"{where} {chart_date}")
    return ChartWeek(
        slug=name,
        title=clean(doc.get("title")) or None,
        chart_date=chart_date,
        previous_date=_iso_or_none(doc.get("previousDate")),
        next_date=_iso_or_none(doc.get("nextDate")),
        layout="billboard.py-2016" if old_schema else "billboard.py",
        entries=[entry for entry, _ in pairs],
        raw=[raw for _, raw in pairs],
    )


def _json_text(value: Any) -> str | None:
    """A JSON scalar as text, in JSON's spelling (true/false); null stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _dump_int(value: Any, what: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UpstreamFormatError(f"{where}: {what} is not an integer: {value!r}")
    return value or None


def _dump_row(item: Any, kind: Kind, old_schema: bool, where: str) -> tuple[RankingEntry, RawEntry]:
    if not isinstance(item, dict):
        raise UpstreamFormatError(f"{where}: not an object")
    rank = _dump_int(item.get("rank"), "rank", where)
    if rank is None:
        raise UpstreamFormatError(f"{where}: no rank")
    title = clean(item.get("title"))
    artist = clean(item.get("artist"))
    if kind == "artists":
        title_out, artist_out = None, artist or title
    else:
        title_out, artist_out = title, artist
        if not title_out:
            raise UpstreamFormatError(f"{where}: empty title")
    if not artist_out:
        raise UpstreamFormatError(f"{where}: empty artist")
    last_week = _dump_int(item.get("lastPos"), "lastPos", where)
    weeks = _dump_int(item.get("weeks"), "weeks", where)
    marker_value = item.get("change") if old_schema else item.get("isNew")
    is_new: bool | None
    is_reentry: bool | None
    if old_schema:
        change = clean(marker_value).lower()
        is_new, is_reentry = change in _NEW_CHANGES, change in _REENTRY_CHANGES
    elif isinstance(marker_value, bool):
        is_new = marker_value
        is_reentry = (not marker_value and last_week is None and weeks is not None and weeks > 1)
    else:
        is_new = is_reentry = None
    image = item.get("image")
    entry = RankingEntry(
        rank=rank,
        title=title_out,
        artist=artist_out,
        image=_image_url(image if isinstance(image, str) else None),
        last_week=last_week,
        peak=_dump_int(item.get("peakPos"), "peakPos", where),
        weeks_on_chart=weeks,
        is_new=is_new,
        is_reentry=is_reentry,
    )
    raw = RawEntry(
        rank=str(item.get("rank")),
        title=_json_text(item.get("title")),
        artist=_json_text(item.get("artist")),
        image=_json_text(image),
        last_week=_json_text(item.get("lastPos")),
        peak=_json_text(item.get("peakPos")),
        weeks_on_chart=_json_text(item.get("weeks")),
        marker=_json_text(marker_value),
    )
    return entry, raw
