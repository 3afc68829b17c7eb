"""Reading fields out of upstream bodies, shared by all five parsers: decoding, whitespace, numbers,
absolute URLs, required values, and the lexbor node helpers of the web-page parsers (Melon, Genie, Bugs).

Strict access to the JSON APIs' nested payloads (FLO, VIBE) is in `chartgw.upstreams.json_api`.
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NamedTuple, TypeVar

from selectolax.lexbor import LexborHTMLParser, LexborNode

from chartgw.upstreams import UpstreamFormatError, check_chart_type

T = TypeVar("T")

_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_DATE = re.compile(r"(\d{4})[.\-/](\d{1,2})[.\-/](\d{1,2})(?:\D+(\d{1,2}):(\d{2}))?")


# --- bodies -----------------------------------------------------------------------------------------------


def decode(body: bytes) -> str:
    """UTF-8 text of a body (a BOM is dropped; broken bytes become U+FFFD rather than failing)."""
    return body.decode("utf-8-sig", errors="replace")


def decode_html(body: bytes) -> str:
    """UTF-8 unless the page's own <meta charset> names another codec Python knows (old Korean pages: EUC-KR)."""
    match = _CHARSET.search(body[:4096])
    encoding = "utf-8"
    if match:
        with contextlib.suppress(LookupError):  # a charset Python does not know: stay with UTF-8
            encoding = codecs.lookup(match.group(1).decode("ascii")).name
    return body.decode(encoding, errors="replace")


def parse_html(body: bytes) -> LexborHTMLParser:
    """A lexbor tree of the body, decoded by `decode_html` (attribute names come out lowercased)."""
    return LexborHTMLParser(decode_html(body))


class Page(NamedTuple):
    """One page of a paged chart: its number from 1, its tree and its chart rows (never empty)."""

    number: int
    tree: LexborHTMLParser
    rows: list[LexborNode]


def parse_pages(label: str, chart_type: str, known: Collection[str], bodies: Sequence[bytes], rows_css: str,
                no_rows: Callable[[Page], str], decode: Callable[[bytes], str] = decode_html) -> Iterator[Page]:
    """The preamble every paged chart parser shares: the chart type is one `known`, there is a body, and
    every page has rows matching `rows_css`; a page without is not a chart page (`no_rows(page)` says
    why, e.g. naming the page's title), never an empty chart."""
    check_chart_type(label, chart_type, known)
    if not bodies:
        raise UpstreamFormatError(f"{label}: no page body to parse")
    for number, body in enumerate(bodies, start=1):
        tree = LexborHTMLParser(decode(body))
        page = Page(number, tree, tree.css(rows_css))
        if not page.rows:
            raise UpstreamFormatError(no_rows(page))
        yield page


def snippet(text: str, size: int = 80) -> str:
    """A short one-line excerpt of a body for error messages."""
    return clean(text)[:size]


# --- values -----------------------------------------------------------------------------------------------


def clean(value: object) -> str:
    """Whitespace runs (incl. NBSP, newlines from the templates) collapsed to one space, ends stripped;
    None becomes "" and other non-strings their str()."""
    return "" if value is None else " ".join(str(value).split())  # str.split's whitespace is the regex's \s


def first_int(text: str | None) -> int | None:
    """The first run of digits in `text` as an int (ranks like '1 ', '15상승'), None when there is none."""
    match = _DIGITS.search(text or "")
    return int(match.group()) if match else None


def absolute_url(src: str | None) -> str | None:
    """Protocol-relative `//host/...` made https; other URLs unchanged; empty → None."""
    src = (src or "").strip()
    if not src:
        return None
    return "https:" + src if src.startswith("//") else src


def dotted_date(text: str | None) -> tuple[str, int | None] | None:
    """'YYYY.MM.DD[ HH:MM]' → ('YYYY-MM-DD', hour or None); None when no date is in the text."""
    match = _DATE.search(text or "")
    if not match:
        return None
    year, month, day, hour, _ = match.groups()
    return f"{year}-{int(month):02d}-{int(day):02d}", (int(hour) if hour is not None else None)


def required(value: T | None, what: str, where: str) -> T:
    """The value, or UpstreamFormatError naming the missing field when it is None or empty."""
    if value is None or value == "":
        raise UpstreamFormatError(f"{where}: missing {what}")
    return value


# --- HTML nodes -------------------------------------------------------------------------------------------


def node_text(node: LexborNode | None) -> str:
    """The cleaned full text of a node, '' for a missing node."""
    return clean(node.text()) if node is not None else ""


def has_class(node: LexborNode, name: str) -> bool:
    """Whether the node's class list holds `name` (class values often carry stray spaces)."""
    return name in (node.attributes.get("class") or "").split()


def js_arg(code: str | None, function: str) -> str | None:
    """The first numeric argument of `function(...)` in an onclick/href script, quoted or not."""
    if not code:
        return None
    match = re.search(rf"{re.escape(function)}\(\s*['\"]?(\d+)", code)
    return match.group(1) if match else None
