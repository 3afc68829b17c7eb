"""Helpers the sample renderers share to write bodies: the HTML document frame of the web pages
(Melon, Genie, Bugs), JSON as the APIs send it (FLO, VIBE), ids typed as the APIs type them, and
made-up but stable numbers (image stamps, hashes, durations)."""

from __future__ import annotations

import json
import zlib


def html_page(head: str, body: str) -> bytes:
    """A UTF-8 page in the frame all three sites use: doctype, `<html lang="ko">`, then `head` and `body`
    (each ending in a newline) inside their elements."""
    page = f'<!DOCTYPE html>\n<html lang="ko">\n<head>\n{head}</head>\n<body>\n{body}</body>\n</html>\n'
    return page.encode("utf-8")


def json_body(payload: object) -> bytes:
    """Compact UTF-8 JSON with Korean left unescaped, as both APIs send it."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def api_id(sample_id: str) -> int | str:
    """The ids as the APIs type them: JSON numbers (sample ids are digit strings)."""
    return int(sample_id) if sample_id.isdigit() else sample_id


def stable_number(*parts: str) -> int:
    """A made-up but stable 32-bit number derived from `parts` (the same parts give the same number)."""
    return zlib.crc32("|".join(parts).encode())


def stable_hex(*parts: str, digits: int = 8) -> str:
    """A made-up but stable hex token (image hashes, cache busters) derived from `parts`."""
    return f"{stable_number(*parts):08x}"[:digits]
