"""The settings table: every `CHARTGW_*` setting declared once, with its parser.

Every setting is declared once as a `Setting` (name, default, help, parser), in the style of
Datasette's SETTINGS: the platform's here in `SETTINGS`, each group's beside the group (its
`Group.settings`), each upstream's origin override by `declare_upstream`. Values come from the one
`chartgw.core.settings.Settings` object resolved at start-up and passed on: code reads
`settings.get(config.X)` on the Settings it was given; `chartgw settings` lists them all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from chartgw.core.countries import GLOBAL, country_code
from chartgw.core.settings import PREFIX, SettingError

__all__ = [
    "ACCESS_LOG",
    "API_KEYS",
    "CACHE_MAX_MB",
    "CHANGES_HEARTBEAT_SECONDS",
    "CHANGES_MAX_STREAMS",
    "CHANGES_MAX_WAITERS",
    "CHANGES_POLL_SECONDS",
    "CHANGES_STREAMS_PER_KEY",
    "CHANGES_WAITERS_PER_KEY",
    "CORS_ORIGINS",
    "CRAWL_DELAY_SECONDS",
    "DATA_DIR",
    "DEFAULT_DATA_DIR",
    "EXPORTS_INTERVAL_SECONDS",
    "EXPORTS_KEEP",
    "HOOKS_HTTP_HOSTS",
    "HOOKS_PER_KEY",
    "HOOKS_PRIVATE_ADDRESSES",
    "HOOKS_TIMEOUT_SECONDS",
    "IDLE_TIMEOUT_SECONDS",
    "LIMIT_CONCURRENCY",
    "METRICS",
    "RATE_LIMIT_PER_MINUTE",
    "READ_ONLY",
    "REFRESHES_PER_KEY_PER_HOUR",
    "REFRESH_INTERVAL_SECONDS",
    "REPLICATION_SETTINGS",
    "REPLICA_URL",
    "REQUESTS_IN_PROGRESS_PER_KEY",
    "REQUEST_BODY_TIMEOUT_SECONDS",
    "REQUEST_HEAD_TIMEOUT_SECONDS",
    "RETENTION_DAYS",
    "RETRY_BACKOFF_SECONDS",
    "SEND_TIMEOUT_SECONDS",
    "SETTINGS",
    "Setting",
    "SettingError",
    "bounded_int",
    "choice",
    "comma_list",
    "countries",
    "flag",
    "folder",
    "metrics_place",
    "origin",
    "origins",
    "poll_seconds",
    "seconds",
    "storefronts",
    "subset",
    "text",
    "upstream_setting",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One `CHARTGW_<name>` variable: its default (as text), what it is for, and how its text is read.

    `parse` raises ValueError with a short reason for a value it cannot use.
    """

    name: str
    default: str
    help: str
    parse: Callable[[str], T]
    secret: bool = False
    """A credential: listings say whether it is set, never its value."""

    def __post_init__(self) -> None:
        assert self.name.isupper() and not self.name.startswith(PREFIX), f"setting names are bare UPPER_SNAKE: {self.name}"

    @property
    def variable(self) -> str:
        return PREFIX + self.name


# --- parsers ------------------------------------------------------------------------------------


def text(value: str) -> str:
    return value


def seconds(value: str) -> float:
    number = float(value)
    if not 0 <= number < 86400:
        raise ValueError(f"must be a number of seconds from 0, got {value!r}")
    return number


def poll_seconds(value: str) -> float:
    """A polling interval: never 0, which would be a busy loop."""
    number = float(value)
    if not 0.05 <= number <= 10:
        raise ValueError(f"must be 0.05 to 10 seconds, got {value!r}")
    return number


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """A parser for a whole number from `low` to `high`."""

    def parse(value: str) -> int:
        if not value.isdigit() or not low <= int(value) <= high:
            raise ValueError(f"must be {low}..{high}, got {value!r}")
        return int(value)

    return parse


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return parse


def comma_list(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))


def subset(known: Collection[str], what: str, *, lower: bool = False) -> Callable[[str], tuple[str, ...]]:
    """A parser for a non-empty comma list of `known` values (`what` names them in the error)."""

    def parse(value: str) -> tuple[str, ...]:
        chosen = comma_list(value.lower() if lower else value)
        unknown = [v for v in chosen if v not in known]
        if unknown:
            raise ValueError(f"unknown {what}(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if not chosen:
            raise ValueError(f"name at least one {what}")
        return chosen

    return parse


def countries(value: str) -> tuple[str, ...]:
    """Comma-separated "global" or ISO alpha-2 codes, lowercased; an unknown code fails loudly."""
    return tuple(dict.fromkeys(country_code(v) for v in comma_list(value)))


def storefronts(value: str) -> tuple[str, ...]:
    """Like `countries`, without "global" (for upstreams that only have national storefronts)."""
    codes = countries(value)
    if GLOBAL in codes:
        raise ValueError("'global' is not a storefront; name ISO alpha-2 countries")
    return codes


def retention_overrides(value: str) -> tuple[tuple[str, str, float], ...]:
    """`group=days` or `group:target-prefix=days`, comma-separated: (group, prefix, days) each."""
    found = []
    for item in comma_list(value):
        where, sep, days = item.partition("=")
        group, _, prefix = where.strip().partition(":")
        try:
            number = float(days) if sep else -1.0
        except ValueError:
            number = -1.0
        if not group or not 0 < number <= 100 * 365:
            raise ValueError(f"each item is GROUP=DAYS or GROUP:TARGET-PREFIX=DAYS with 0 < DAYS <= 36500, got {item!r}")
        found.append((group, prefix.strip(), number))
    return tuple(found)


def flag(value: str) -> bool:
    """1/0, true/false, yes/no, on/off."""
    lowered = value.lower()
    if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
        raise ValueError(f"must be 1 or 0 (true/false, yes/no, on/off), got {value!r}")
    return lowered in {"1", "true", "yes", "on"}


def replica_url(value: str) -> str:
    """`s3://BUCKET/PREFIX` or `file:///ABSOLUTE/PATH` (or empty: no replication)."""
    parts = urlsplit(value)
    if value and not ((parts.scheme == "s3" and parts.netloc and not parts.query)
                      or (parts.scheme == "file" and not parts.netloc and parts.path.startswith("/"))):
        raise ValueError(f"must be s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH, got {value!r}")
    return value.rstrip("/")


def origin(value: str) -> str:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"must be an origin like http://127.0.0.1:9000, got {value!r}")
    return f"{parts.scheme}://{parts.netloc}"


def origins(value: str) -> tuple[str, ...]:
    """A comma list of web origins (`https://app.example.com`, normalised as browsers send them), or `*` for any."""
    found = []
    for item in comma_list(value):
        if item == "*":
            found.append(item)
            continue
        parts = urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
            raise ValueError(f"each item is an origin like https://app.example.com (or *), got {item!r}")
        found.append(f"{parts.scheme}://{parts.netloc.lower()}")
    return tuple(found)


def metrics_place(value: str) -> str | tuple[str, int]:
    """`public`, `off`, or where the metrics listener binds: `PORT` (on 127.0.0.1) or `HOST:PORT`."""
    if value in ("public", "off"):
        return value
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be public, off, PORT or HOST:PORT, got {value!r}")
    return (host.strip("[]") or "127.0.0.1", int(port))


# --- the platform's settings ------------------------------------------------------------------------

DEFAULT_DATA_DIR = "~/.local/share/chartgw"
"""The XDG data home of the user running chartgw: per user, outside any checkout or installed package, and the
same folder whatever the working folder (cron starts in $HOME, systemd in /). `$XDG_DATA_HOME` is not read (the
settings read only CHARTGW_* variables): set CHARTGW_DATA_DIR instead."""


def folder(value: str) -> Path:
    """A folder path; `~` is the home of the user running chartgw, a relative path is from the working folder."""
    return Path(value).expanduser().absolute()


DATA_DIR = Setting("DATA_DIR", DEFAULT_DATA_DIR,
                   "where the group files (`<group>.sqlite`), `keys.sqlite` and crawl locks live", folder)
API_KEYS = Setting("API_KEYS", "", "comma-separated plain keys accepted besides the key store (simple deployments)",
                   comma_list)
CRAWL_DELAY_SECONDS = Setting("CRAWL_DELAY_SECONDS", "0.2", "pause after each upstream request (politeness)",
                              seconds)
RETRY_BACKOFF_SECONDS = Setting("RETRY_BACKOFF_SECONDS", "0.5", "base of the exponential backoff between retries",
                                seconds)
CACHE_MAX_MB = Setting("CACHE_MAX_MB", "256", "memory the response cache of one server process may hold, in MB",
                       bounded_int(1, 65536))
RATE_LIMIT_PER_MINUTE = Setting(
    "RATE_LIMIT_PER_MINUTE", "600", "requests a key may make per minute and server process unless the key has its "
    "own rate (`chartgw keys create --rate`); 0 = no limit", bounded_int(0, 10_000_000))
REQUEST_HEAD_TIMEOUT_SECONDS = Setting(
    "REQUEST_HEAD_TIMEOUT_SECONDS", "10", "seconds a client has to send a request's line and headers (from the "
    "connection or the previous answer; the idle timeout if shorter) before the server closes the connection", seconds)
REQUEST_BODY_TIMEOUT_SECONDS = Setting(
    "REQUEST_BODY_TIMEOUT_SECONDS", "10", "seconds a client has to send a request's whole body once its head is in; "
    "past it the server answers 408 (or, when it has answered already, just closes the connection)", seconds)
IDLE_TIMEOUT_SECONDS = Setting(
    "IDLE_TIMEOUT_SECONDS", "5", "whole seconds a keep-alive connection may stay open with nothing sent or being "
    "answered", bounded_int(1, 3600))
SEND_TIMEOUT_SECONDS = Setting(
    "SEND_TIMEOUT_SECONDS", "30", "seconds a connection may leave its answers unread (no byte taken) before the "
    "server drops it and them", seconds)
REFRESH_INTERVAL_SECONDS = Setting(
    "REFRESH_INTERVAL_SECONDS", "60", "least seconds between two POST refreshes of the same target (scheduled crawls "
    "do not count)", seconds)
REFRESHES_PER_KEY_PER_HOUR = Setting(
    "REFRESHES_PER_KEY_PER_HOUR", "30", "POST refreshes one key may start per hour in each group and server process "
    "(joining a refresh already running does not count); 0 = no limit", bounded_int(0, 100_000))
RETENTION_DAYS = Setting(
    "RETENTION_DAYS", "", "days of snapshots kept, per group (`digital-sales=90`) or per target prefix of a group "
    "(`radio:plays/=400`), comma-separated; added to or replacing the group's own retentions (the newest snapshot "
    "of a target is always kept)", retention_overrides)
CHANGES_POLL_SECONDS = Setting(
    "CHANGES_POLL_SECONDS", "0.25", "while a long poll or a stream of the change feed waits, how often each group "
    "file's PRAGMA data_version is read (the longest a change waits to be answered)", poll_seconds)
CHANGES_MAX_WAITERS = Setting(
    "CHANGES_MAX_WAITERS", "1000", "long polls of GET /changes (wait > 0) one server process holds at once; past it a "
    "503 with Retry-After", bounded_int(1, 1_000_000))
CHANGES_MAX_STREAMS = Setting(
    "CHANGES_MAX_STREAMS", "5000", "GET /changes/stream connections one server process holds at once; past it a 503 "
    "with Retry-After (streams, like long polls, are not counted by `chartgw serve --limit-concurrency`)",
    bounded_int(1, 1_000_000))
LIMIT_CONCURRENCY = Setting(
    "LIMIT_CONCURRENCY", "1000", "requests in progress in the app one server process works on at once (long polls "
    "and change streams not counted: they have their own caps); past it a 503, connection closed; `chartgw serve "
    "--limit-concurrency N` sets it", bounded_int(1, 1_000_000))
REQUESTS_IN_PROGRESS_PER_KEY = Setting(
    "REQUESTS_IN_PROGRESS_PER_KEY", "100", "requests of one key the app works on at once per server process (its long "
    "polls and streams not counted: they have their own caps); past it a 429 with Retry-After, so one key cannot take "
    "the others' share of `chartgw serve --limit-concurrency`; 0 = no cap", bounded_int(0, 1_000_000))
CHANGES_WAITERS_PER_KEY = Setting(
    "CHANGES_WAITERS_PER_KEY", "100", "long polls of GET /changes one key holds at once per server process; past it a "
    "429 with Retry-After (CHARTGW_CHANGES_MAX_WAITERS stays the cap of all keys together); 0 = no cap",
    bounded_int(0, 1_000_000))
CHANGES_STREAMS_PER_KEY = Setting(
    "CHANGES_STREAMS_PER_KEY", "100", "GET /changes/stream connections one key holds at once per server process; past "
    "it a 429 with Retry-After (CHARTGW_CHANGES_MAX_STREAMS stays the cap of all keys together); 0 = no cap",
    bounded_int(0, 1_000_000))
CHANGES_HEARTBEAT_SECONDS = Setting(
    "CHANGES_HEARTBEAT_SECONDS", "15", "seconds between the comment lines an idle change stream sends (keeps proxies "
    "from closing it)", bounded_int(1, 3600))
HOOKS_HTTP_HOSTS = Setting(
    "HOOKS_HTTP_HOSTS", "", "hosts a webhook URL may name with plain http, comma-separated (every other hook must be "
    "https)", comma_list)
HOOKS_PRIVATE_ADDRESSES = Setting(
    "HOOKS_PRIVATE_ADDRESSES", "deny", "`allow` lets webhooks reach private, loopback and link-local addresses (tests, "
    "an operator's own receivers); by default a hook whose host is or resolves to one is refused",
    choice("deny", "allow"))
HOOKS_TIMEOUT_SECONDS = Setting(
    "HOOKS_TIMEOUT_SECONDS", "10", "seconds one webhook delivery attempt may take (connect, send, answer) before it "
    "counts as failed", bounded_int(1, 300))
HOOKS_PER_KEY = Setting("HOOKS_PER_KEY", "20", "webhooks one API key may register", bounded_int(1, 10_000))
CORS_ORIGINS = Setting(
    "CORS_ORIGINS", "", "web origins whose pages may call the API from a browser (comma-separated, e.g. "
    "`https://app.example.com`; `*` = any); empty = CORS off", origins)
METRICS = Setting(
    "METRICS", "public", "where the Prometheus metrics are served: `public` (GET /metrics on the API's port, no key), "
    "`PORT` or `HOST:PORT` (their own listener only; PORT alone binds 127.0.0.1), or `off`", metrics_place)
ACCESS_LOG = Setting(
    "ACCESS_LOG", "off", "`on`: one JSON line per answer on standard output (what `chartgw serve --access-log` "
    "turns on)", choice("off", "on"))
# Read replicas (docs/replication.md): `chartgw replicate` on the writer, `chartgw follow` and `serve --read-only` on
# each reader.
REPLICA_URL = Setting(
    "REPLICA_URL", "", "where Litestream keeps the replica of every group file, the artist-history index and the key "
    "store: `s3://BUCKET/PREFIX` or `file:///PATH`; empty = no replication", replica_url)
REPLICA_S3_ENDPOINT = Setting(
    "REPLICA_S3_ENDPOINT", "", "an S3-compatible service's URL (`http://127.0.0.1:9000`, MinIO, R2, B2...); empty = "
    "AWS S3", text)
REPLICA_S3_REGION = Setting("REPLICA_S3_REGION", "us-east-1", "the bucket's region", text)
REPLICA_S3_ACCESS_KEY_ID = Setting(
    "REPLICA_S3_ACCESS_KEY_ID", "", "S3 access key id; empty = Litestream's default (AWS_ACCESS_KEY_ID, an instance "
    "role)", text, secret=True)
REPLICA_S3_SECRET_ACCESS_KEY = Setting(
    "REPLICA_S3_SECRET_ACCESS_KEY", "", "S3 secret access key; empty = Litestream's default (AWS_SECRET_ACCESS_KEY)",
    text, secret=True)
REPLICA_SYNC_SECONDS = Setting(
    "REPLICA_SYNC_SECONDS", "0.5", "how often the writer's Litestream ships new transactions to the replica", seconds)
REPLICA_FOLLOW_SECONDS = Setting(
    "REPLICA_FOLLOW_SECONDS", "1", "how often a reader's Litestream polls the replica for new transactions", seconds)
REPLICA_STALL_SECONDS = Setting(
    "REPLICA_STALL_SECONDS", "30", "a reader's follower that applies nothing for this long while the writer's "
    "heartbeat names a newer transaction of its file is stalled, and restored afresh; the writer's Litestream that "
    "makes nothing of a file for this long while SQLite commits it has stopped shipping it, and is restarted on the "
    "file checkpointed (each: twice as long for each stall in a row)", seconds)
REPLICA_LAG_DEGRADED_SECONDS = Setting(
    "REPLICA_LAG_DEGRADED_SECONDS", "30", "replication lag of a file past which /replication and the group's /health "
    "say degraded", seconds)
READ_ONLY = Setting(
    "READ_ONLY", "0", "1 on a reader: `chartgw serve` serves the followed files read-only (no crawls, POST refreshes "
    "answer 503, key usage counted in a node-local file); `chartgw serve --read-only` sets it", flag)
WRITER_URL = Setting("WRITER_URL", "", "the writer's URL, which a reader's 503 to a POST refresh names", text)
REPLICATION_SETTINGS = (REPLICA_URL, REPLICA_S3_ENDPOINT, REPLICA_S3_REGION, REPLICA_S3_ACCESS_KEY_ID,
                        REPLICA_S3_SECRET_ACCESS_KEY, REPLICA_SYNC_SECONDS, REPLICA_FOLLOW_SECONDS,
                        REPLICA_STALL_SECONDS, REPLICA_LAG_DEGRADED_SECONDS, READ_ONLY, WRITER_URL)
EXPORTS_KEEP = Setting(
    "EXPORTS_KEEP", "2", "whole-history exports kept per group (`<data dir>/exports/<group>/`); older ones are deleted "
    "after each build", bounded_int(1, 100))


def off_or_seconds(value: str) -> int | None:
    """"off", or whole seconds up to a year."""
    return None if value.strip().lower() == "off" else bounded_int(0, 366 * 86400)(value.strip())


EXPORTS_INTERVAL_SECONDS = Setting(
    "EXPORTS_INTERVAL_SECONDS", "3600", "least seconds between two exports of a group built on request (GET /exports "
    "when the group's data changed); 0 = at every change, off = only `chartgw export` builds them", off_or_seconds)
SETTINGS: tuple[Setting[Any], ...] = (DATA_DIR, API_KEYS, CRAWL_DELAY_SECONDS, RETRY_BACKOFF_SECONDS, CACHE_MAX_MB,
                                      RATE_LIMIT_PER_MINUTE, REQUEST_HEAD_TIMEOUT_SECONDS, REQUEST_BODY_TIMEOUT_SECONDS,
                                      IDLE_TIMEOUT_SECONDS, SEND_TIMEOUT_SECONDS, REFRESH_INTERVAL_SECONDS,
                                      REFRESHES_PER_KEY_PER_HOUR, RETENTION_DAYS, CHANGES_POLL_SECONDS,
                                      CHANGES_MAX_WAITERS, CHANGES_MAX_STREAMS, CHANGES_HEARTBEAT_SECONDS, CORS_ORIGINS,
                                      LIMIT_CONCURRENCY, REQUESTS_IN_PROGRESS_PER_KEY, CHANGES_WAITERS_PER_KEY,
                                      CHANGES_STREAMS_PER_KEY,
                                      METRICS, ACCESS_LOG, HOOKS_HTTP_HOSTS, HOOKS_PRIVATE_ADDRESSES, HOOKS_TIMEOUT_SECONDS,
                                      HOOKS_PER_KEY, EXPORTS_KEEP, EXPORTS_INTERVAL_SECONDS, *REPLICATION_SETTINGS)


def upstream_setting(name: str, real_origin: str) -> Setting[str]:
    """`CHARTGW_UPSTREAM_<name>`: replaces the scheme, host and port of upstream `name`'s requests."""
    return Setting(f"UPSTREAM_{name}", real_origin,
                   "replaces scheme, host and port of that upstream; paths and queries stay the real site's", origin)
