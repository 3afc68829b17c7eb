"""Litestream's configuration for the replicated files, written from the CHARTGW_REPLICA_* settings."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from chartgw.core import config
from chartgw.core.settings import Settings

__all__ = ["Replicated", "litestream_config"]


@dataclass(frozen=True)
class Replicated:
    name: str
    """The file's stem: a group's name, or `keys`. Also its place under the replica URL."""
    path: Path


def _scalar(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)


def _duration(seconds: float) -> str:
    return f"{max(int(seconds * 1000), 1)}ms"


def litestream_config(files: list[Replicated], settings: Settings, url: str | None = None) -> str:
    """Litestream's YAML for `files`, each replicated to `<url>/<name>` (default: CHARTGW_REPLICA_URL of `settings`).
    Credentials are never written: the file names the CHARTGW_REPLICA_S3_* variables and Litestream reads them from
    its environment."""
    url = url if url is not None else settings.get(config.REPLICA_URL)
    if not url:
        raise ValueError(f"set {config.REPLICA_URL.variable} (s3://BUCKET/PREFIX or file:///PATH)")
    parts = urlsplit(url)
    sync = _duration(settings.get(config.REPLICA_SYNC_SECONDS))
    lines = ["# Written by chartgw from the CHARTGW_REPLICA_* settings; rewritten on every start.", "dbs:"]
    for file in files:
        # The WAL is looked at four times a second (a stat, locally): a commit leaves at the next sync, not up to
        # a second later (Litestream's default monitor interval is 1 s).
        lines += [f"  - path: {_scalar(str(file.path.resolve()))}", "    monitor-interval: 250ms", "    replica:"]
        if parts.scheme == "file":
            lines += ["      type: file", f"      path: {_scalar(parts.path.rstrip('/') + '/' + file.name)}"]
        else:
            lines += ["      type: s3", f"      bucket: {_scalar(parts.netloc)}",
                      f"      path: {_scalar((parts.path.strip('/') + '/' + file.name).lstrip('/'))}",
                      f"      region: {_scalar(settings.get(config.REPLICA_S3_REGION))}"]
            endpoint = settings.get(config.REPLICA_S3_ENDPOINT)
            if endpoint:
                lines += [f"      endpoint: {_scalar(endpoint)}", "      force-path-style: true"]
            for key, setting in (("access-key-id", config.REPLICA_S3_ACCESS_KEY_ID),
                                 ("secret-access-key", config.REPLICA_S3_SECRET_ACCESS_KEY)):
                if settings.get(setting):
                    lines.append(f"      {key}: ${{{setting.variable}}}")
        lines.append(f"      sync-interval: {sync}")
    return "\n".join(lines) + "\n"
