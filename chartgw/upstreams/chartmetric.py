"""Chartmetric API: the access token and the TikTok tracks chart (NOTES section 7). Known from documentation
and public client code only; no real response has been captured, so the fixtures are built from the
documented fields.

* `POST /api/token` with `{"refreshtoken": "<key>"}` answers `{"token", "expires_in", "refresh_token", "scope"}`
  [doc: apidocs.chartmetric.com llms-full.txt]; the token is a short-lived JWT sent as `Authorization: Bearer`.
* `GET /api/charts/tiktok/tracks?date=YYYY-MM-DD&interval=daily|weekly&limit=&offset=` plus
  `country_chart=true&code2=<CC>` for a country's chart [code: musicx-fm/chartmetric-go-client chart.go, and a
  Python client's `getChartsTiktok`] answers `{"obj": {"length": <chart length>, "data": [...]}}`. Items carry
  `rank, pre_rank, peak_rank, peak_date, time_on_chart, name, tiktok_artist_names[], isrc, cm_track,
  tiktok_track_id, tiktok_track_ids[], album_ids[], album_names[], album_upc[], album_label[], release_dates[],
  image_url, posts, views, views_prev, added_at, rankStats[{rank, posts, timestp}]` [code]. Other clients read
  `obj` as the row list itself, so that envelope is accepted too (then the length is unknown).
* Errors [guess from client code: a 401 on an expired token]: a JSON object with `error` or `message` and no
  `obj`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import msgspec

from chartgw.upstreams import UpstreamFormatError, UpstreamRequest, check_chart_type, declare_upstream
from chartgw.upstreams.fields import clean
from chartgw.upstreams.json_api import load_json, obj, opt_integer, opt_text, text

UPSTREAM = declare_upstream("CHARTMETRIC", "https://api.chartmetric.com")
TOKEN_PATH = "/api/token"
TIKTOK_TRACKS_PATH = "/api/charts/tiktok/tracks"
INTERVALS: tuple[str, ...] = ("daily", "weekly")
PAGE_SIZE = 100
"""Rows asked per page; the group pages by `offset` until the chart's `length`."""

Interval = Literal["daily", "weekly"]

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CODE2 = re.compile(r"[A-Za-z]{2}")
_AUTH_WORDS = ("unauthori", "token", "expired", "jwt", "forbidden")


# --- records ----------------------------------------------------------------------------------------------


class AccessToken(msgspec.Struct, kw_only=True, omit_defaults=False):
    """A token exchange's answer, with its expiry made absolute from the moment it was received."""

    token: str
    expires_in: int | None
    """Lifetime in seconds as sent; null when the answer gives none."""
    expires_at: str | None
    """`received_at + expires_in`, ISO 8601 UTC; null without `expires_in`."""
    refresh_token: str | None
    scope: str | None


class ShortVideoEntry(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One row of a TikTok tracks chart as Chartmetric reports it; every field but rank and name is null when
    the row does not carry it."""

    rank: int
    previous_rank: int | None
    """`pre_rank`: the rank on the previous chart; null (or 0 upstream) for a new or returning entry."""
    peak_rank: int | None
    peak_date: str | None
    """YYYY-MM-DD of `peak_date`."""
    time_on_chart: int | None
    """`time_on_chart`: charts (days or weeks, by interval) the track has been on."""
    name: str
    """The track title."""
    artist: str
    """The credit: `tiktok_artist_names` joined with ", " ("" when the row names nobody)."""
    artists: list[str]
    """`tiktok_artist_names`."""
    isrc: str | None
    """Upper-cased ISRC, the join key with other sources."""
    track_id: str | None
    """`cm_track`: Chartmetric's own track id."""
    sound_id: str | None
    """`tiktok_track_id`: the TikTok sound of the row (else the first of `sound_ids`)."""
    sound_ids: list[str]
    """`tiktok_track_ids`: every TikTok sound Chartmetric maps to the track, the row's own first."""
    album: str | None
    """The first of `album_names`."""
    label: str | None
    """The first of `album_label`."""
    release_date: str | None
    """YYYY-MM-DD of the first of `release_dates`."""
    image_url: str | None
    posts: int | None
    """TikTok posts (videos) using the sound in the chart period."""
    views: int | None
    """Views of those posts."""


class TracksPage(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One page of a TikTok tracks chart."""

    length: int | None
    """`obj.length`: the chart's full length (page until offset reaches it); null when the envelope has none."""
    chart_date: str | None
    """YYYY-MM-DD the rows state (`added_at`, the same on every row of one chart); null when they state none."""
    entries: list[ShortVideoEntry]


class ChartmetricError(UpstreamFormatError):
    """Chartmetric answered with an error object; `unauthorized` means renew the access token and retry."""

    def __init__(self, message: str, unauthorized: bool) -> None:
        super().__init__(message)
        self.unauthorized = unauthorized


# --- requests ---------------------------------------------------------------------------------------------


def token_request(refresh_token: str) -> UpstreamRequest:
    """The token exchange: the refresh token (the account's API key) in a compact JSON body."""
    if not refresh_token:
        raise ValueError("chartmetric: a refresh token is required")
    body = json.dumps({"refreshtoken": refresh_token}, separators=(",", ":")).encode()
    return UpstreamRequest(UPSTREAM, TOKEN_PATH, method="POST", body=body,
                           headers=(("Content-Type", "application/json"), ("Accept", "application/json")))


def tracks_request(token: str, date: str, interval: str, code2: str | None, limit: int = PAGE_SIZE,
                   offset: int = 0) -> UpstreamRequest:
    """One page of the TikTok tracks chart of `date`; `code2` (ISO alpha-2) asks for that country's chart,
    None for the global one."""
    check_chart_type("chartmetric tiktok", interval, INTERVALS)
    if not _DATE.fullmatch(date):
        raise ValueError(f"chartmetric: date must be YYYY-MM-DD, got {date!r}")
    if not token:
        raise ValueError("chartmetric: an access token is required")
    if limit < 1 or offset < 0:
        raise ValueError(f"chartmetric: bad page limit={limit} offset={offset}")
    params: list[tuple[str, str]] = [("date", date), ("interval", interval)]
    if code2 is not None:
        if not _CODE2.fullmatch(code2):
            raise ValueError(f"chartmetric: code2 must be two letters, got {code2!r}")
        params += [("country_chart", "true"), ("code2", code2.upper())]
    params += [("limit", str(limit)), ("offset", str(offset))]
    return UpstreamRequest(UPSTREAM, TIKTOK_TRACKS_PATH, params=tuple(params),
                           headers=(("Authorization", f"Bearer {token}"), ("Accept", "application/json")))


def page_offsets(length: int, page_size: int = PAGE_SIZE) -> list[int]:
    """The offsets of every page of a chart of `length` rows (the first page included)."""
    return list(range(0, max(length, 1), page_size))


# --- parsing ----------------------------------------------------------------------------------------------


def answer_error(body: bytes, status: int) -> ChartmetricError | None:
    """The ChartmetricError an answer of `status` states (its error object, or the status alone when the body
    is not JSON), or None for a payload."""
    try:
        doc: object = json.loads(body)
    except ValueError:
        doc = None
    try:
        _raise_error(doc, "chartmetric", status)
    except ChartmetricError as exc:
        return exc
    return None


def _raise_error(doc: object, who: str, status: int) -> None:
    """A ChartmetricError for an error object or a 401/403 status; nothing for a payload."""
    if status in (401, 403):
        detail = _error_text(doc) or f"HTTP {status}"
        raise ChartmetricError(f"{who}: unauthorized ({status}): {detail}", unauthorized=True)
    if isinstance(doc, dict) and "obj" not in doc and "token" not in doc:
        message = _error_text(doc)
        if message is not None:
            lowered = message.lower()
            raise ChartmetricError(f"{who}: error: {message}", unauthorized=any(w in lowered for w in _AUTH_WORDS))
    if status >= 400:
        raise ChartmetricError(f"{who}: HTTP {status}: {_error_text(doc) or 'no detail'}", unauthorized=False)


def _error_text(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return None
    for key in ("error", "message", "detail", "msg"):
        value = doc.get(key)
        if isinstance(value, dict):
            value = value.get("message") or value.get("error")
        if value not in (None, "", False):
            return clean(value)
    return None


def parse_token(body: bytes, received_at: datetime, status: int = 200) -> AccessToken:
    """A token exchange's answer; `received_at` (timezone-aware) makes the expiry absolute. An error object,
    a 401/403 or an answer without `token` is refused."""
    if received_at.tzinfo is None:
        raise ValueError("chartmetric: received_at must be timezone-aware")
    doc = load_json(body, "chartmetric token")
    _raise_error(doc, "chartmetric token", status)
    root = obj(doc, "chartmetric token")
    token = text(root.get("token"), "chartmetric token.token")
    expires_in = opt_integer(root.get("expires_in"), "chartmetric token.expires_in")
    expires_at: str | None = None
    if expires_in is not None:
        moment = received_at.astimezone(UTC) + timedelta(seconds=expires_in)
        expires_at = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return AccessToken(token=token, expires_in=expires_in, expires_at=expires_at,
                       refresh_token=opt_text(root.get("refresh_token")), scope=opt_text(root.get("scope")))


def parse_tracks(body: bytes, status: int = 200) -> TracksPage:
    """One page of the TikTok tracks chart. Refuses an error object (ChartmetricError, `unauthorized` for a
    401 or an auth message), HTML, a payload without rows and rows from more than one chart date."""
    doc = load_json(body, "chartmetric tiktok")
    _raise_error(doc, "chartmetric tiktok", status)
    root = obj(doc, "chartmetric tiktok")
    envelope = root.get("obj")
    length: int | None = None
    if isinstance(envelope, dict):
        rows = envelope.get("data")
        length = opt_integer(envelope.get("length"), "chartmetric tiktok obj.length")
    elif isinstance(envelope, list):
        rows = envelope
    else:
        raise UpstreamFormatError(f"chartmetric tiktok: no `obj` envelope (keys {sorted(root)[:8]})")
    if not isinstance(rows, list) or not rows:
        raise UpstreamFormatError("chartmetric tiktok: the page has no rows")
    entries = []
    dates: set[str] = set()
    for i, row in enumerate(rows):
        where = f"chartmetric tiktok obj.data[{i}]"
        item = obj(row, where)
        entries.append(_entry(item, where))
        added = _date(item.get("added_at"))
        if added is not None:
            dates.add(added)
    if len(dates) > 1:
        raise UpstreamFormatError(f"chartmetric tiktok: rows of several chart dates {sorted(dates)}")
    return TracksPage(length=length, chart_date=dates.pop() if dates else None, entries=entries)


def _entry(item: dict[str, Any], where: str) -> ShortVideoEntry:
    rank = opt_integer(item.get("rank"), f"{where}.rank")
    if rank is None or rank < 1:
        raise UpstreamFormatError(f"{where}: no rank")
    artists = _strings(item.get("tiktok_artist_names"), f"{where}.tiktok_artist_names")
    sound_ids = _strings(item.get("tiktok_track_ids"), f"{where}.tiktok_track_ids")
    sound_id = _id(item.get("tiktok_track_id")) or (sound_ids[0] if sound_ids else None)
    if sound_id is not None and sound_id not in sound_ids:
        sound_ids.insert(0, sound_id)
    isrc = opt_text(item.get("isrc"))
    return ShortVideoEntry(
        rank=rank,
        previous_rank=_positive(item.get("pre_rank"), f"{where}.pre_rank"),
        peak_rank=_positive(item.get("peak_rank"), f"{where}.peak_rank"),
        peak_date=_date(item.get("peak_date")),
        time_on_chart=opt_integer(item.get("time_on_chart"), f"{where}.time_on_chart"),
        name=text(item.get("name"), f"{where}.name"),
        artist=", ".join(artists),
        artists=artists,
        isrc=isrc.upper() if isrc else None,
        track_id=_id(item.get("cm_track")),
        sound_id=sound_id,
        sound_ids=sound_ids,
        album=_first(item.get("album_names")),
        label=_first(item.get("album_label")),
        release_date=_date(_first(item.get("release_dates"))),
        image_url=opt_text(item.get("image_url")),
        posts=_count(item.get("posts"), f"{where}.posts"),
        views=_count(item.get("views"), f"{where}.views"),
    )


def _strings(value: object, where: str) -> list[str]:
    """A list of names or ids; null is none, a bare string is one, anything else a changed format."""
    if value is None:
        return []
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise UpstreamFormatError(f"{where}: expected a list, got {type(value).__name__}")
    return [s for s in (_id(v) for v in value) if s]


def _id(value: object) -> str | None:
    """An id as a string (Chartmetric sends numbers for its own ids, strings for TikTok's)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return opt_text(value)


def _first(value: object) -> str | None:
    if isinstance(value, list):
        return next((s for s in (opt_text(v) for v in value) if s), None)
    return opt_text(value)


def _positive(value: object, where: str) -> int | None:
    number = opt_integer(value, where)
    return number if number is not None and number > 0 else None


def _count(value: object, where: str) -> int | None:
    """A count that may come as a float ("views": 1.2e6)."""
    if isinstance(value, float):
        return round(value)
    return opt_integer(value, where)


def _date(value: object) -> str | None:
    """YYYY-MM-DD at the start of a date or timestamp string; None otherwise."""
    raw = opt_text(value)
    if raw is None or not _DATE.match(raw):
        return None
    return raw[:10]
