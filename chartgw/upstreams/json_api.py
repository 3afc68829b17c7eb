"""What the JSON chart APIs (FLO, VIBE) share: strict field access, the browser they pose as, KST time.

The payloads are nested dicts from a third-party app API; every accessor names the path it was
looking for, so an UpstreamFormatError says which field changed instead of a bare KeyError.
Decoding, whitespace and URL helpers are the ones every parser uses, in `chartgw.upstreams.fields`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from chartgw.upstreams import UpstreamFormatError
from chartgw.upstreams.fields import clean, decode, snippet

# A current desktop Chrome: both APIs are called by their own web players from a browser.
BROWSER_UA = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
# Korea has had no daylight saving time since 1988, so a fixed offset is exact.
KST = timezone(timedelta(hours=9), "KST")

_INT = re.compile(r"[+-]?\d+")


def looks_like_markup(body: bytes) -> bool:
    """True when the first non-space character is `<` (XML answer or an HTML error page)."""
    return decode(body[:512]).lstrip().startswith("<")


def load_json(body: bytes, who: str) -> Any:
    """Parse a JSON body; an HTML page or broken JSON becomes an UpstreamFormatError naming `who`."""
    text = decode(body)
    if text.lstrip().startswith("<"):
        raise UpstreamFormatError(f"{who}: expected JSON, got markup: {snippet(text)!r}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UpstreamFormatError(f"{who}: body is not JSON ({exc}): {snippet(text)!r}") from None


def opt_obj(value: object) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (optional nested blocks)."""
    return value if isinstance(value, dict) else {}


def obj(value: object, where: str) -> dict[str, Any]:
    """`value` as a JSON object, or an error naming the path `where`."""
    if not isinstance(value, dict):
        raise UpstreamFormatError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def dig(root: object, path: str, who: str) -> Any:
    """Walk a dotted path ("response.result.chart") through nested objects; missing or null is an error."""
    node = root
    walked = who
    for key in path.split("."):
        node = obj(node, walked).get(key)
        walked = f"{walked}.{key}"
        if node is None:
            raise UpstreamFormatError(f"{walked} is missing or null")
    return node


def text(value: object, where: str) -> str:
    """A required non-empty string field (numbers are accepted and stringified)."""
    if isinstance(value, (dict, list, bool)):
        raise UpstreamFormatError(f"{where}: expected text, got {type(value).__name__}")
    result = clean(value)
    if not result:
        raise UpstreamFormatError(f"{where} is missing or empty")
    return result


def opt_text(value: object) -> str | None:
    """An optional string field: None when absent, empty or not a scalar."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    return clean(value) or None


def integer(value: object, where: str) -> int:
    """A required integer field; the APIs give numbers in JSON and digit strings in XML."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip())
    raise UpstreamFormatError(f"{where}: expected an integer, got {value!r}")


def opt_integer(value: object, where: str) -> int | None:
    """An optional integer field: None when absent or empty, an error when present but not a number."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return integer(value, where)


def flag(value: object) -> bool:
    """A yes/no field in any of the spellings the APIs use: true, "true", "Y"."""
    if isinstance(value, bool):
        return value
    return clean(value).lower() in {"true", "y", "yes", "1"}


def kst_date_hour(epoch_ms: int) -> tuple[str, int]:
    """The KST calendar date ("YYYY-MM-DD") and hour of an epoch-milliseconds timestamp."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, KST)
    return moment.strftime("%Y-%m-%d"), moment.hour
