"""The limits on what a client may send to `chartgw serve` and on what is handed to granian whole: one place for the
server (`chartgw.http.rsgi`, and the granian options its `granian_limits` makes) and for the nginx configuration
written for it (`chartgw.http.nginx`). docs/hardening.md lists every limit."""

from __future__ import annotations

__all__ = ["JOIN_MAX", "MAX_HEAD_BYTES", "MAX_URL_BYTES"]

MAX_HEAD_BYTES = 32 * 1024
"""The request line and all headers together (granian's read buffer); browsers and clients send a few KB."""
MAX_URL_BYTES = 8 * 1024
"""The path and query together; past it a 414."""
JOIN_MAX = 128 * 1024
"""An answer's body up to this size is handed to granian whole (`response_bytes`, which copies it); a larger one as
a file (`chartgw.http.spill`) or in slices, so an answer left unread costs no copy of it."""
