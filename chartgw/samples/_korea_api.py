"""Helpers shared by the JSON-API sample renderers (FLO, VIBE)."""

from __future__ import annotations

import json
import zlib


def json_body(payload: object) -> bytes:
    """Compact UTF-8 JSON with Korean left unescaped, as both APIs send it."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def api_id(sample_id: str) -> int | str:
    """The ids as the APIs type them: JSON numbers (sample ids are digit strings)."""
    return int(sample_id) if sample_id.isdigit() else sample_id


def stable_hex(*parts: str, digits: int = 8) -> str:
    """A made-up but stable hex token (image hashes, cache busters) derived from `parts`."""
    return f"{zlib.crc32('|'.join(parts).encode()):08x}"[:digits]
