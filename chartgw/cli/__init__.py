"""`chartgw serve | crawl | import | backfill | monitor | keys | hooks | deliver | cron | demo | settings | storage |
export`: the one entry point for people, cron and the refresh endpoints."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from chartgw.api.group import Group, GroupCommand, after_crawl, crawl_group, retention
from chartgw.api.params import InvalidParams
from chartgw.core import config
from chartgw.core.clock import Clock, fixed, utc_now
from chartgw.core.config import SettingError
from chartgw.core.progress import Progress
from chartgw.core.settings import SETTINGS_FILE, Settings, SettingsFileError, exported
from chartgw.crawl.context import Context
from chartgw.crawl.runner import EXIT_BUSY, CrawlBusy, CrawlError, Outcome, crawl_lock
from chartgw.groups import GROUPS, group_names, named
from chartgw.index.history import INDEX_NAME, index_path
from chartgw.index.identity import enrich as mb_enrich
from chartgw.upstreams import musicbrainz, origin_setting
from chartgw.upstreams.musicbrainz import CONTACT_SETTING as MB_CONTACT


def _group(name: str) -> Group:
    """The group named `name` (argparse has already limited the choice to the known names), imported now if it
    was not: a command loads only the groups it touches."""
    return named(GROUPS, name)


def all_settings() -> list[tuple[str, config.Setting[Any]]]:
    """Every declared setting with where it belongs: the platform's, each group's, each upstream's origin."""
    table: list[tuple[str, config.Setting[Any]]] = [("platform", s) for s in config.SETTINGS]
    for group in GROUPS:  # a setting several groups share (the /retail-* groups') is listed once, by the first
        table += [(f"/{group.name}", s) for s in group.settings if s.variable not in {t.variable for _, t in table}]
    upstreams = sorted({name for group in GROUPS for name in group.upstreams})
    table += [(f"upstream {name}", origin_setting(name)) for name in upstreams]
    return table


def settings_problems(settings: Settings, group: Group | None = None) -> list[str]:
    """One line per setting whose value cannot be used: every setting, or the platform's and `group`'s own
    (what a crawl or command of that group reads), and a retention naming no group."""
    if group is None:
        declared = [setting for _, setting in all_settings()]
    else:
        declared = [*config.SETTINGS, *group.settings, *(origin_setting(name) for name in group.upstreams)]
    problems = settings.problems(declared)
    if config.RETENTION_DAYS.variable not in " ".join(problems):
        try:
            retention(group or _group(group_names(GROUPS)[0]), settings)
        except SettingError as exc:
            problems.append(str(exc))
    return problems


def refuse_bad_settings(verb: str, settings: Settings, group: Group | None = None) -> bool:
    """Print one line per bad setting (`chartgw VERB: CHARTGW_X: why`) and say whether there was any."""
    problems = settings_problems(settings, group)
    for line in problems:
        print(f"chartgw {verb}: {line}", file=sys.stderr)
    return bool(problems)


def cmd_settings(args: argparse.Namespace) -> int:
    """Print every setting with its value in force (`*` marks one that is set); with --check, only the bad
    values, one line each, and exit 2 when there is any."""
    settings: Settings = args.settings
    declared = all_settings()
    if args.check:
        bad = refuse_bad_settings("settings", settings)
        for name in settings.unknown(s for _, s in declared):
            print(f"chartgw settings: {name}: not a setting of this version (ignored)", file=sys.stderr)
        return 2 if bad else 0
    # The file is no setting of the table (it names where the others come from): first, with the file read.
    read = str(settings.file) if settings.file else "(none)"
    print(f"{'*' if settings.file else ' '} {SETTINGS_FILE:38} {read:48} platform: the file of NAME=value lines read "
          "at start (the environment wins over it)")
    for owner, setting in declared:
        value = settings.raw(setting)
        shown = "(set)" if setting.secret and value else value or "(none)"
        mark = "*" if settings.is_set(setting) else " "
        print(f"{mark} {setting.variable:38} {shown:48} {owner}: {setting.help}")
    return 0


def _print_outcome(outcome: Outcome) -> None:
    rows = f"{outcome.rows} rows" if outcome.rows is not None else ""
    detail = outcome.error or ""
    print(f"{outcome.status:6} {outcome.target:28} {rows:10} {outcome.duration_ms:6} ms  {detail}", file=sys.stderr)


CATCH_UP = "index"
"""The command `chartgw crawl GROUP` runs for a group that crawls no upstream (the artist-history index)."""


def cmd_crawl(args: argparse.Namespace) -> int:
    group: Group = _group(args.group)
    if group.targets is None:  # no upstream: bringing its data up to date is catching its index up
        command = next((c for c in group.commands if c.verb == CATCH_UP), None)
        if command is None:
            print(f"chartgw crawl: {group.name} crawls no upstream", file=sys.stderr)
            return 2
        values = {arg.name: arg.default for arg in command.args}
        return _run_command(group, command, values, args.json, args.wait, args.settings,
                            fixed(args.at) if args.at else utc_now)
    settings: Settings = args.settings
    if refuse_bad_settings("crawl", settings, group):
        return 2
    selection = {name: getattr(args, name) for name, _ in group.crawl_options}
    progress = _print_outcome if sys.stderr.isatty() and not args.json else None
    try:
        with crawl_lock(group.name, settings, args.wait):
            clock = fixed(args.at) if args.at else utc_now
            outcomes = asyncio.run(crawl_group(group, selection, settings=settings, now=clock, progress=progress))
            if any(o.status == "ok" for o in outcomes):
                after_crawl(group.name, GROUPS, settings)
    except InvalidParams as exc:
        error = exc.errors[0]
        print(f"chartgw crawl: {error['loc'][-1]}: {error['msg']}", file=sys.stderr)
        return 2
    except CrawlBusy as exc:
        print(f"chartgw crawl: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except (CrawlError, ValueError) as exc:  # no catalogue to crawl from yet, a misconfigured setting
        print(f"chartgw crawl: {exc}", file=sys.stderr)
        return 1
    return _report("crawl", outcomes, args.json)


def _report(verb: str, outcomes: list[Outcome], as_json: bool) -> int:
    if as_json:
        print(json.dumps([asdict(o) for o in outcomes], ensure_ascii=False))
    elif verb != "crawl":  # a crawl prints progress live on a terminal and nothing for cron
        for outcome in outcomes:
            _print_outcome(outcome)
    failed = [o for o in outcomes if o.status != "ok"]
    if failed:
        print(f"chartgw {verb}: {len(failed)} of {len(outcomes)} targets failed; first: {failed[0].target}: "
              f"{failed[0].error}", file=sys.stderr)
        return 1
    return 0


def cmd_group_command(args: argparse.Namespace) -> int:
    """`chartgw import|backfill|monitor GROUP ...`: the group's own command, under its crawl lock unless the
    command says otherwise (a long-running monitor)."""
    group = _group(args.group)
    command: GroupCommand = next(c for c in group.commands if c.verb == args.command)
    values = {arg.name: getattr(args, arg.name) for arg in command.args}
    return _run_command(group, command, values, args.json, args.wait, args.settings)


def _run_command(group: Group, command: GroupCommand, values: dict[str, Any], as_json: bool, wait: float,
                 settings: Settings, clock: Clock = utc_now) -> int:
    """Run a group's command and report its outcomes. One that committed anything (an import, a backfill) is
    followed by every group's `after_commit`, as a crawl is: the artist-history index takes its snapshots in now, not at
    the next crawl."""
    if refuse_bad_settings(command.verb, settings, group):
        return 2
    ctx = Context(settings=settings, clock=clock, interactive=sys.stderr.isatty() and not as_json)
    try:
        with contextlib.ExitStack() as held:
            if command.lock:
                held.enter_context(crawl_lock(group.name, settings, wait))
            if not command.at_boot:  # (one that runs for as long as the machine does, the monitor, logs itself)
                held.enter_context(held.enter_context(Progress(command.verb)).step(group.name))
            outcomes = command.run(ctx, values)
            if not command.at_boot and any(o.status == "ok" for o in outcomes):
                after_crawl(group.name, GROUPS, settings)
    except CrawlBusy as exc:
        print(f"chartgw {command.verb}: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except (OSError, ValueError) as exc:
        print(f"chartgw {command.verb}: {exc}", file=sys.stderr)
        return 2
    return _report(command.verb, outcomes, as_json)


SHUTDOWN_GRACE_SECONDS = 5
"""After SIGTERM, how long `serve` lets requests in progress finish before it cancels them (long polls and streams
end at once, `chartgw.http.rsgi`): it exits within seconds, whatever its clients do."""


MALLOC_ARENAS = 2
"""glibc's malloc arenas for `serve` (M_ARENA_MAX). By default each thread that allocates gets an arena of its own
(up to eight a core) and keeps it at its peak: the group files' reader threads (aiosqlite, one a file) then held
up to 300 MB more after a burst of 1,000 long polls than with one arena (docs/hardening.md). Two cost no measurable
speed."""


def fewer_malloc_arenas() -> dict[str, str]:
    """At most MALLOC_ARENAS arenas in this process (glibc's mallopt; elsewhere nothing); returns the variable that
    does the same in the worker processes it starts (glibc reads MALLOC_ARENA_MAX when a process starts)."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(-8, MALLOC_ARENAS)  # -8: M_ARENA_MAX
    return {"MALLOC_ARENA_MAX": str(MALLOC_ARENAS)}


def cmd_serve(args: argparse.Namespace) -> int:
    import resource

    from chartgw.api.access import keys_db_path, secure_key_files

    # --access-log is the gateway's JSON log (chartgw.http.accesslog); the server's own access log stays off.
    # The flags are settings: in force here and exported to the workers (--access-log: CHARTGW_ACCESS_LOG=on).
    flagged = {config.ACCESS_LOG.variable: "on"} if args.access_log else {}
    if args.limit_concurrency is not None:
        flagged[config.LIMIT_CONCURRENCY.variable] = str(args.limit_concurrency)
    settings: Settings = args.settings.with_values(flagged)
    if refuse_bad_settings("serve", settings):
        return 2
    from chartgw.http.metrics import worker_files

    secure_key_files(keys_db_path(settings))
    arenas = fewer_malloc_arenas()  # before the server's threads start
    # Connections are bounded by time limits (docs/hardening.md), not by the default 1024 descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # Each worker resolves its settings from the environment exported to it (the one place besides `main`).
    with exported({**flagged, **arenas}), worker_files(args.workers):
        (serve_uvicorn if args.interface == "uvicorn" else serve_rsgi)(args, settings)
    return 0


def serve_rsgi(args: argparse.Namespace, settings: Settings) -> None:
    """`serve`: granian over `chartgw.http.rsgi`'s app, its limits from the settings (docs/hardening.md). granian
    stops gracefully on SIGTERM or SIGINT (the app's lifespan shutdown ends long polls and streams), and kills a
    worker still busy SHUTDOWN_GRACE_SECONDS later. Its own log goes to standard error (uvicorn's did too): standard
    output is the access log's."""
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops

    from chartgw.http.rsgi import granian_limits

    # --read-only names the factory, so every worker process builds the replica's app.
    target = "chartgw.http.rsgi:replica_gateway" if args.read_only else "chartgw.http.rsgi:gateway"
    to_stderr = {"formatter": "generic", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    server = Granian(
        target, address=args.host, port=args.port, interface=Interfaces.RSGI, factory=True, workers=args.workers,
        loop=Loops.auto, http=HTTPModes.http1, websockets=False, log_access=False, log_level="info",  # type: ignore[arg-type]
        log_dictconfig={"handlers": {"console": to_stderr, "access": to_stderr}},
        workers_kill_timeout=SHUTDOWN_GRACE_SECONDS, **granian_limits(settings))
    server.serve()


def serve_uvicorn(args: argparse.Namespace, settings: Settings) -> None:
    """`serve --interface uvicorn`: the same app through uvicorn's public ASGI interface, for where granian cannot
    run. No fast lane (the app answers repeats from the same cache, more slowly) and only uvicorn's own limits: the
    hostile-edge limits of docs/hardening.md are granian's and `chartgw.http.rsgi`'s. uvicorn shuts down gracefully
    on SIGTERM or SIGINT, then raises the signal again: a clean stop, exit 0."""
    import uvicorn

    factory = "chartgw.http.app:build_replica_app" if args.read_only else "chartgw.http.app:build_served_app"
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.run(factory, factory=True, host=args.host, port=args.port, workers=args.workers, access_log=False,
                    log_level="info", timeout_keep_alive=settings.get(config.IDLE_TIMEOUT_SECONDS),
                    timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS)


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {value!r} (use YYYY-MM-DD or an ISO timestamp)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


UNLIMITED = 0
"""A key's stored rate for `--rate unlimited`."""


def _parse_rate(value: str) -> int:
    """"600/minute" (or "600") with N >= 1, or "unlimited": a key's rate, as requests per minute."""
    text = value.strip().lower()
    if text == "unlimited":
        return UNLIMITED
    count, _, unit = text.partition("/")
    if not count.strip().isdigit() or int(count) < 1 or unit.strip() not in ("", "minute", "min"):
        raise argparse.ArgumentTypeError(f"not a rate: {value!r} (use N/minute with N >= 1, or unlimited)")
    return int(count)


def _rate_text(rate: int | None, default: int) -> str:
    """A key's rate as `keys list` shows it; None is the server's `default`, shown with its value."""
    if rate is None:
        return f"default ({_rate_text(default, default)})"
    return "unlimited" if rate == UNLIMITED else f"{rate}/minute"


def _positive_days(value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of days >= 1, got {value!r}")
    return int(value)


def cmd_keys(args: argparse.Namespace) -> int:
    from chartgw.api.access import KeyStore, NameTaken, env_key_ids, keys_db_path
    from chartgw.push.hooks import HookStore, hooks_db_path
    from chartgw.replica.state import usage_path

    settings: Settings = args.settings
    default_rate = settings.get(config.RATE_LIMIT_PER_MINUTE)
    store = KeyStore(keys_db_path(settings), usage_path=usage_path(settings))  # a replica: the keys read-only
    if args.keys_command == "create":
        if not args.name.strip():
            print("chartgw keys create: --name must name the key's holder", file=sys.stderr)
            return 2
        if args.expires is not None and args.expires <= datetime.now(UTC):
            print(f"chartgw keys create: --expires {args.expires:%Y-%m-%d} is in the past", file=sys.stderr)
            return 2
        try:
            key_id, key = store.create(args.name.strip(), args.expires, args.rate)
        except NameTaken as exc:
            print(f"chartgw keys create: {exc}", file=sys.stderr)
            return 2
        print(f"id {key_id} ({args.name}); the key is shown only now:", file=sys.stderr)
        print(key)
    elif args.keys_command == "list":
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(f"{'id':>4}  {'state':8} {'rate':22} {'created':20} {'expires':20} {'last used':10}  name")
        for info in store.list():
            print(f"{info.id:>4}  {info.state(now):8} {_rate_text(info.rate_per_minute, default_rate):22} {info.created_at:20} "
                  f"{info.expires_at or '-':20} {info.last_used or '-':10}  {info.name}")
        plain: tuple[str, ...] = settings.get(config.API_KEYS)
        for n, env_id in enumerate(env_key_ids(plain).values(), start=1):
            print(f"{env_id:>4}  {'active':8} {_rate_text(None, default_rate):22} {'-':20} {'-':20} {'-':10}  "
                  f"CHARTGW_API_KEYS #{n}")
    elif args.keys_command == "usage":
        since = (datetime.now(UTC) - timedelta(days=args.days - 1)).strftime("%Y-%m-%d")
        print(f"{'id':>4}  {'day':10} {'requests':>9} {'429s':>7}  name")
        for key_id, name, day, requests, limited in store.usage(since):
            print(f"{key_id:>4}  {day:10} {requests:>9} {limited:>7}  {name}")
    elif args.keys_command == "rotate":
        try:
            key_id, key, expiring = store.rotate(args.name, timedelta(days=args.grace_days))
        except KeyError:
            print(f"chartgw keys rotate: no active key named {args.name!r}", file=sys.stderr)
            return 1
        # the holder's hooks are the new key's (the old one's ends with it)
        moved = HookStore(hooks_db_path(settings)).move(expiring, key_id)
        print(f"id {key_id} ({args.name}) succeeds {expiring}, which expires in {args.grace_days:g} days; "
              f"{moved} webhook(s) now belong to {key_id}; the new key is shown only now:", file=sys.stderr)
        print(key)
    elif args.keys_command == "revoke":
        if not store.revoke(args.id):
            print(f"chartgw keys revoke: no active key with id {args.id}", file=sys.stderr)
            return 1
        print(f"revoked key {args.id}", file=sys.stderr)
    return 0


def cmd_hooks(args: argparse.Namespace) -> int:
    """Operators' view of every key's webhooks: list, add (secret printed once), remove, enable, deliveries."""
    from chartgw.push.hooks import HookStore, UnsafeURL, check_url, hooks_db_path

    settings: Settings = args.settings
    store = HookStore(hooks_db_path(settings))
    names = group_names(GROUPS)
    if args.hooks_command == "list":
        print(f"{'id':>4} {'key':>4}  {'state':8} {'created':20} url; groups; targets; failing since")
        for hook in store.hooks(args.key):
            state = "disabled" if hook.disabled_at else "active"
            print(f"{hook.id:>4} {hook.key_id:>4}  {state:8} {hook.created_at:20} {hook.url}; "
                  f"{','.join(hook.groups) or 'every group'}; {','.join(hook.targets) or 'every target'}; "
                  f"{hook.failing_since or '-'}" + (f"\n      {hook.disabled_reason}" if hook.disabled_reason else ""))
    elif args.hooks_command == "add":
        groups = [g for g in (args.groups or "").split(",") if g]
        try:
            check_url(args.url, settings)
        except UnsafeURL as exc:
            print(f"chartgw hooks add: {exc}", file=sys.stderr)
            return 2
        if any(g not in names for g in groups):
            print(f"chartgw hooks add: groups are {', '.join(names)}", file=sys.stderr)
            return 2
        hook, secret = store.create(args.key, args.url, groups, [t for t in (args.targets or "").split(",") if t], names,
                                    datetime.now(UTC))
        print(f"hook {hook.id} for key {hook.key_id}; its signing secret is shown only now:", file=sys.stderr)
        print(secret)
    elif args.hooks_command in ("remove", "enable"):
        done = store.delete(args.id) if args.hooks_command == "remove" else store.enable(args.id)
        if not done:
            print(f"chartgw hooks {args.hooks_command}: no webhook {args.id}", file=sys.stderr)
            return 1
        print(f"{'removed' if args.hooks_command == 'remove' else 'enabled'} webhook {args.id}", file=sys.stderr)
    elif args.hooks_command == "deliveries":
        for a in store.attempts(args.id, args.limit):
            print(f"{a.attempted_at} {a.msg_id} {a.status or '-':>4} {a.duration_ms:>6} ms {a.delivery_state:9} "
                  f"{a.error or 'ok'}")
    return 0


def cmd_deliver(args: argparse.Namespace) -> int:
    from chartgw.push import deliver

    if refuse_bad_settings("deliver", args.settings):
        return 2
    return deliver.main(group_names(GROUPS), args.once, args.settings)


def installed_program() -> tuple[str, ...]:
    """How cron and systemd call chartgw: the `chartgw` executable installed beside the running Python (a venv's
    or pip's bin folder), by its full path; without one (a checkout run as `python -m chartgw`), that."""
    script = Path(sys.executable).parent / "chartgw"
    return (str(script.absolute()),) if script.is_file() else (str(Path(sys.executable).absolute()), "-m", "chartgw")


def _command(program: Sequence[str], *args: str) -> str:
    return " ".join(shlex.quote(a) for a in (*program, *args))


def crontab(program: Sequence[str], data: Path) -> str:
    """The crontab for every group's schedule, each line calling `program` (the installed `chartgw`) with
    `CHARTGW_DATA_DIR=data` on the line itself (a line copied elsewhere keeps its folder); KST lines are under
    CRON_TZ=Asia/Seoul (cronie, systemd-cron)."""
    folder = shlex.quote(str(data))
    lines = ["# chartgw crawl schedules (spec cadence table). Install with: chartgw cron | crontab -",
             "# Other CHARTGW_* settings go above these lines as NAME=value (see docs/configuration.md)."]
    current_tz = None
    for group in GROUPS:
        for schedule in group.schedules:
            if schedule.timezone != current_tz:
                lines.append(f"CRON_TZ={schedule.timezone}")
                current_tz = schedule.timezone
            command = _command(program, "crawl", group.name, *schedule.args, "--wait", "240")
            lines.append(f"# {schedule.comment}")
            lines.append(f"{schedule.cron} CHARTGW_DATA_DIR={folder} {command} >> {shlex.quote(str(data / 'crawl.log'))}"
                         " 2>&1")
    for group in GROUPS:
        for offered in group.commands:
            if offered.cron is None:
                continue
            if offered.cron.timezone != current_tz:
                lines.append(f"CRON_TZ={offered.cron.timezone}")
                current_tz = offered.cron.timezone
            log = shlex.quote(str(data / f"{group.name}-{offered.verb}.log"))
            lines.append(f"# {offered.cron.comment}")
            lines.append(f"{offered.cron.cron} CHARTGW_DATA_DIR={folder} "
                         f"{_command(program, offered.verb, group.name, *offered.cron.args, '--wait', '240')} >> {log} 2>&1")
    for group in GROUPS:
        for verb in (c.verb for c in group.commands if c.at_boot):
            log = shlex.quote(str(data / f"{group.name}-{verb}.log"))
            lines.append(f"# /{group.name}: `chartgw {verb} {group.name}` runs for as long as the machine does")
            lines.append(f"@reboot CHARTGW_DATA_DIR={folder} {_command(program, verb, group.name)} >> {log} 2>&1")
    lines.append("# webhooks: `chartgw deliver` sends them for as long as the machine runs")
    lines.append(f"@reboot CHARTGW_DATA_DIR={folder} {_command(program, 'deliver')} >> "
                 f"{shlex.quote(str(data / 'deliver.log'))} 2>&1")
    lines.append("# whole-history exports of every group (docs/exports.md)")
    lines.append(f"@daily CHARTGW_DATA_DIR={folder} {_command(program, 'export', '--all')} >> "
                 f"{shlex.quote(str(data / 'export.log'))} 2>&1")
    return "\n".join(lines) + "\n"


def cmd_storage(args: argparse.Namespace) -> int:
    """`chartgw storage`: every file of the data folder; what each group's file holds and grows by, with its retention."""
    from chartgw.cli.disk import storage_report

    reports = storage_report(args.settings)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports]))
        return 0
    print(f"{'file':34} {'MB':>9} {'snapshots':>10} {'MB/year':>9}  span; retention")
    for r in reports:
        per_year = f"{r.bytes_per_year / 1e6:9.0f}" if r.bytes_per_year else f"{'-':>9}"
        if r.error:
            detail = f"unreadable: {r.error}"
        elif r.kind == "snapshots":
            kept = ", ".join(f"{k or 'every target'} {v:g} d" for k, v in r.retention_days.items()) or "kept forever"
            if r.unbounded_targets and r.retention_days:
                kept += f" ({r.unbounded_targets} targets kept forever)"
            detail = f"{r.first} .. {r.last}; {kept}" if r.first else f"no data; {kept}"
        elif r.kind == "index":
            detail = f"index of {r.rows} rows, built {r.first} .. {r.last}" if r.first else f"index of {r.rows} rows"
        else:
            detail = {"missing": "no file yet", "keys": "API keys", "other": ""}[r.kind]
        count = f"{r.snapshots:>10}" if r.snapshots is not None else f"{'-':>10}"
        print(f"{r.file:34} {r.bytes / 1e6:9.1f} {count} {per_year}  {detail}".rstrip())
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """`chartgw export GROUP... | --all`: each group's whole history as a new export (or the one held, when its bytes
    are the same), older ones pruned (docs/exports.md). One line per group (JSON with --json); exit 1 if any failed."""
    import sqlite3

    import msgspec

    from chartgw.http.exports import build

    if refuse_bad_settings("export", args.settings):
        return 2
    names = group_names(GROUPS) if args.all else args.groups
    unknown = [name for name in names if name not in group_names(GROUPS)]
    if not names or unknown:
        print(f"chartgw export: no group named {', '.join(unknown)}" if unknown else
              "chartgw export: name the groups to export, or --all", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        try:
            info = build(name, args.settings)
        except (OSError, sqlite3.Error) as exc:
            failed += 1
            print(f"chartgw export: {name}: {exc}", file=sys.stderr)
            continue
        if args.json:
            print(json.dumps({"group": name, "export": None if info is None else msgspec.to_builtins(info)}))
        elif info is None:
            print(f"{name:20} no data file yet", file=sys.stderr)
        else:
            span = f"{info.first_chart_date} .. {info.last_chart_date}" if info.first_chart_date else "no snapshots"
            print(f"{name:20} {info.size / 1e6:9.1f} MB {info.snapshots:>8} snapshots  {span}  {info.url}")
    return 1 if failed else 0


def cmd_cron(args: argparse.Namespace) -> int:
    program = (str(Path(args.program).absolute()),) if args.program else installed_program()
    print(crontab(program, args.settings.get(config.DATA_DIR)), end="")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from chartgw.demo import seeding as demo

    settings: Settings = args.settings
    if args.keep_fresh:
        return demo.keep_fresh(args.keep_fresh, settings)
    if args.radio_monitor:
        return demo.radio_monitor(settings)
    names = demo.groups_without_data(settings) if args.if_empty else [g.name for g in demo.seeded_groups()]
    if names:
        outcomes: list[Outcome] = []
        now = utc_now()
        with Progress("demo") as shown:
            for name in names:
                with shown.step(name):
                    outcomes += demo.seed(settings, [name], now)
        failed = [o for o in outcomes if o.status != "ok"]
        print(f"demo data for {', '.join(names)}: {len(outcomes) - len(failed)} of {len(outcomes)} crawls committed "
              "from bundled samples", file=sys.stderr)
        for outcome in failed:
            print(f"  failed {outcome.target}: {outcome.error}", file=sys.stderr)
        if failed:
            return 1
    demo.write_demo_settings(settings)
    print(demo.demo_key(settings))
    return 0


def cmd_nginx(args: argparse.Namespace) -> int:
    """`chartgw nginx --readers HOST:PORT,...`: print the nginx.conf of an nginx tier in front of the readers."""
    from chartgw.http import nginx

    tier = nginx.Tier(readers=config.comma_list(args.readers), writer=args.writer, listen=args.listen,
                      state_dir=args.state_dir, pid=args.pid, error_log=args.error_log,
                      access_log=args.access_log, user=args.user)
    try:
        print(nginx.render(tier, arguments=shlex.join(sys.argv[2:]), settings=args.settings), end="")
    except ValueError as exc:
        print(f"chartgw nginx: {exc}", file=sys.stderr)
        return 2
    return 0


def _supervise(run: Any, settings: Settings) -> int:
    """Run a replication supervisor (`run(stop, settings)`) until SIGTERM or SIGINT."""
    import signal
    import threading

    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    return int(run(stop, settings))


def cmd_replicate(args: argparse.Namespace) -> int:
    """`chartgw replicate`: the writer's Litestream, supervised (docs/replication.md)."""
    from chartgw.replica import config as replication
    from chartgw.replica import litestream

    settings: Settings = args.settings
    try:
        if args.print_config:
            print(replication.litestream_config([f for f in litestream.replicated_files(settings) if f.path.exists()],
                                                settings), end="")
            return 0
        return _supervise(litestream.replicate, settings)
    except (FileNotFoundError, ValueError) as exc:
        print(f"chartgw replicate: {exc}", file=sys.stderr)
        return 2


def cmd_follow(args: argparse.Namespace) -> int:
    """`chartgw follow`: a reader's Litestream follow of every replicated file, supervised."""
    from chartgw.api.access import SECRET_FILE
    from chartgw.replica import config as replication
    from chartgw.replica import litestream

    settings: Settings = args.settings
    try:
        if args.print_config:
            print(replication.litestream_config(litestream.replicated_files(settings), settings), end="")
            return 0
        secret = settings.get(config.DATA_DIR) / SECRET_FILE
        if not secret.exists():
            print(f"chartgw follow: no {secret}: copy the writer's (keys are checked under it)", file=sys.stderr)
        return _supervise(litestream.follow, settings)
    except (FileNotFoundError, ValueError) as exc:
        print(f"chartgw follow: {exc}", file=sys.stderr)
        return 2


ENRICH_MUSICBRAINZ_HELP = "add MusicBrainz recording ids (and ISRCs) to recordings without them (optional)"


def _enrich_musicbrainz_parser(verb_groups: Any) -> None:
    sub = verb_groups.add_parser("musicbrainz", help=ENRICH_MUSICBRAINZ_HELP)
    sub.add_argument("--limit", type=int, default=mb_enrich.DEFAULT_LIMIT,
                     help=f"recordings to look at, those with an ISRC first (default {mb_enrich.DEFAULT_LIMIT})")
    sub.add_argument("--contact", help=f"the contact (e-mail or URL) in the User-Agent (default {MB_CONTACT.variable})")
    sub.add_argument("--base-url", help="scheme://host[:port] of the MusicBrainz web service (default "
                     f"{origin_setting(musicbrainz.UPSTREAM).variable})")
    sub.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout")
    sub.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                     help="wait this long for another run of this command to finish")
    sub.set_defaults(func=cmd_enrich_musicbrainz)


def cmd_enrich_musicbrainz(args: argparse.Namespace) -> int:
    """`chartgw enrich musicbrainz`: MusicBrainz ids for the index's recordings (chartgw/index/identity/enrich.py)."""
    settings: Settings = args.settings
    contact = args.contact or settings.get(MB_CONTACT)
    if not contact:
        print(f"chartgw enrich: MusicBrainz asks every client for a contact: set {MB_CONTACT.variable} or give "
              "--contact EMAIL", file=sys.stderr)
        return 2
    if args.limit < 1:
        print("chartgw enrich: --limit must be 1 or more", file=sys.stderr)
        return 2
    try:
        base_url = config.origin(args.base_url) if args.base_url else settings.get(origin_setting(musicbrainz.UPSTREAM))
    except ValueError as exc:
        print(f"chartgw enrich: --base-url: {exc}", file=sys.stderr)
        return 2
    try:
        with crawl_lock(f"{INDEX_NAME}-musicbrainz", settings, args.wait), Progress("enrich") as shown, \
                shown.step("musicbrainz", "recordings"):
            outcome = mb_enrich.run_command(index_path=index_path(settings), contact=contact,
                                            base_url=base_url, limit=args.limit)
    except CrawlBusy as exc:
        print(f"chartgw enrich: {exc}", file=sys.stderr)
        return EXIT_BUSY
    return _report("enrich", [outcome], args.json)


FIXED_COMMANDS = frozenset({"serve", "crawl", "keys", "hooks", "deliver", "cron", "demo", "export", "storage", "nginx",
                            "replicate", "follow", "settings"})
"""The commands of the platform; every other verb is a group's own (import, backfill, monitor...)."""


def _asked(argv: Sequence[str] | None) -> tuple[str | None, str | None]:
    """The command and the group `argv` names (its first two words that are no option), where it names them."""
    words = [word for word in (sys.argv[1:] if argv is None else argv) if not word.startswith("-")]
    return (words[0] if words else None), (words[1] if len(words) > 1 else None)


def _touched(command: str | None, group: str | None) -> list[Group]:
    """The groups whose declarations the parser needs for this command line: the one it names, or every group
    when it names none the parser can place (the help lists them all, an error names the choices)."""
    if group in group_names(GROUPS):
        found = _group(group)
        if command == "crawl" or any(c.verb == command for c in found.commands):
            return [found]
    return list(GROUPS)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser for `argv` (default: this process's): a group's crawl options and commands are
    declared by its module, so only the groups the command line touches are imported (`chartgw keys list` none,
    `chartgw crawl korea-chart` one, `chartgw --help` every one)."""
    command_asked, group_asked = _asked(argv)
    parser = argparse.ArgumentParser(prog="chartgw", description="Music chart aggregation gateway")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--access-log", action="store_true",
                       help="log every answer as one JSON line on standard output (CHARTGW_ACCESS_LOG=on)")
    serve.add_argument("--limit-concurrency", type=int, default=None, metavar="N",
                       help="requests in progress in the app per worker before a 503 (default CHARTGW_LIMIT_CONCURRENCY, "
                            "1000); connections do not count (docs/hardening.md)")
    serve.add_argument("--interface", choices=["rsgi", "uvicorn"], default="rsgi",
                       help="the HTTP server: granian's RSGI (default; chartgw.http.rsgi, docs/hardening.md) or uvicorn's "
                            "ASGI, a fallback without the fast lane or the hostile-edge limits")
    serve.add_argument("--read-only", action="store_true",
                       help="a read replica: serve the files chartgw follow keeps current, write none of them "
                            f"(sets {config.READ_ONLY.variable}=1)")
    serve.set_defaults(func=cmd_serve)

    crawl = commands.add_parser("crawl", help="crawl a group's upstreams and commit snapshots")
    crawl_groups = crawl.add_subparsers(dest="group", required=True)
    declared = _touched(command_asked, group_asked) if command_asked == "crawl" else []
    for name in group_names(GROUPS):  # every name is a choice; only the groups touched are imported and declared
        if name not in {g.name for g in declared}:
            crawl_groups.add_parser(name)
    for group in declared:
        sub = crawl_groups.add_parser(group.name, help=group.title if group.targets is not None else
                                      f"{group.title}: no upstream; catches its index up (chartgw {CATCH_UP} {group.name})")
        for name, choices in group.crawl_options:
            sub.add_argument(f"--{name.replace('_', '-')}", dest=name, choices=choices)
        sub.add_argument("--json", action="store_true", help="print each target's outcome as JSON on stdout")
        sub.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                         help="wait this long for another crawl of the group to finish (default: fail at once)")
        sub.add_argument("--at", type=_parse_time, metavar="TIME",
                         help="crawl as if it were TIME (ISO, UTC): replays and tests; default now")
    crawl.set_defaults(func=cmd_crawl)

    verbs: dict[str, list[tuple[Group, GroupCommand]]] = {}
    for group in _touched(command_asked, group_asked) if command_asked not in FIXED_COMMANDS else []:
        for command in group.commands:
            verbs.setdefault(command.verb, []).append((group, command))
    for verb, offers in verbs.items():
        verb_parser = commands.add_parser(verb, help=" / ".join(f"{g.name}: {c.help}" for g, c in offers))
        verb_groups = verb_parser.add_subparsers(dest="group", required=True)
        if verb == "enrich":
            _enrich_musicbrainz_parser(verb_groups)
        for group, command in offers:
            sub = verb_groups.add_parser(group.name, help=command.help)
            for arg in command.args:
                if arg.positional:
                    sub.add_argument(arg.name, help=arg.help, type=arg.type)
                else:
                    sub.add_argument(f"--{arg.name.replace('_', '-')}", dest=arg.name, help=arg.help, type=arg.type,
                                     choices=arg.choices, default=arg.default, required=arg.required)
            sub.add_argument("--json", action="store_true", help="print each target's outcome as JSON on stdout")
            sub.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                             help="wait this long for a running crawl of the group to finish")
        verb_parser.set_defaults(func=cmd_group_command)

    if "enrich" not in verbs:
        _enrich_musicbrainz_parser(commands.add_parser("enrich", help=ENRICH_MUSICBRAINZ_HELP).add_subparsers(
            dest="group", required=True))

    keys = commands.add_parser("keys", help="manage API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create a key and print it once")
    create.add_argument("--name", required=True, help="its holder; unique among active keys")
    create.add_argument("--expires", type=_parse_time, help="expiry date (YYYY-MM-DD, UTC) for rotation")
    create.add_argument("--rate", type=_parse_rate, metavar="N/minute|unlimited",
                        help="requests per minute this key may make, N >= 1, or unlimited (default: "
                             "CHARTGW_RATE_LIMIT_PER_MINUTE)")
    rotate = key_commands.add_parser("rotate", help="issue the successor of a key; the old one expires after a grace")
    rotate.add_argument("name", help="the name the key was created with (its newest active key is rotated)")
    rotate.add_argument("--grace-days", type=float, default=7.0, help="days the old key keeps working (default 7)")
    usage = key_commands.add_parser("usage", help="requests per key and day (and how many were refused with 429)")
    usage.add_argument("--days", type=_positive_days, default=7, help="days back, today included, >= 1 (default 7)")
    key_commands.add_parser("list", help="list keys with state, rate, expiry and last use (never the keys themselves)")
    revoke = key_commands.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("id", type=int)
    keys.set_defaults(func=cmd_keys)

    hooks = commands.add_parser("hooks", help="every key's webhooks: list, add, remove, enable, deliveries")
    hook_commands = hooks.add_subparsers(dest="hooks_command", required=True)
    hook_list = hook_commands.add_parser("list", help="every webhook with its state (never its secret)")
    hook_list.add_argument("--key", type=int, help="only this key's (its id)")
    hook_add = hook_commands.add_parser("add", help="register a webhook for a key and print its secret once")
    hook_add.add_argument("--key", type=int, required=True,
                          help="the key id it belongs to (`chartgw keys list` shows each key's, CHARTGW_API_KEYS' too)")
    hook_add.add_argument("--url", required=True)
    hook_add.add_argument("--groups", help="comma-separated (default: every group)")
    hook_add.add_argument("--targets", help="comma-separated snapshot targets (default: every one)")
    for verb, text in (("remove", "remove a webhook with its deliveries"), ("enable", "enable a disabled webhook")):
        hook_commands.add_parser(verb, help=text).add_argument("id", type=int)
    hook_deliveries = hook_commands.add_parser("deliveries", help="a webhook's delivery attempts, newest first")
    hook_deliveries.add_argument("id", type=int)
    hook_deliveries.add_argument("--limit", type=int, default=50)
    hooks.set_defaults(func=cmd_hooks)

    deliver = commands.add_parser("deliver", help="the webhook worker: send every change to the hooks that want it")
    deliver.add_argument("--once", action="store_true", help="queue what is new, start what is due, wait for it, exit")
    deliver.set_defaults(func=cmd_deliver)

    cron = commands.add_parser("cron", help="print the crontab for the spec's cadence")
    cron.add_argument("--program", metavar="PATH",
                      help="the chartgw executable the lines call (default: the one installed beside this Python)")
    cron.set_defaults(func=cmd_cron)

    demo = commands.add_parser("demo", help="crawl bundled sample payloads into the data folder; print the demo key")
    demo.add_argument("--if-empty", action="store_true", help="only the groups that have no data file yet")
    demo.add_argument("--keep-fresh", type=float, metavar="SECONDS",
                      help="run until stopped, crawling the bundled samples again every SECONDS (what scripts/serve "
                           "runs beside the server, so the demo's health stays ok)")
    demo.add_argument("--radio-monitor", action="store_true",
                      help="run the radio monitor on local sample streams until stopped (what scripts/serve runs beside "
                           "the server, so /radio/current changes)")
    demo.set_defaults(func=cmd_demo)

    export = commands.add_parser("export", help="build each group's whole-history SQLite export (GET /exports lists them)")
    export.add_argument("groups", nargs="*", metavar="GROUP",
                        help=f"the groups to export: {', '.join(group_names(GROUPS))}")
    export.add_argument("--all", action="store_true", help="every group")
    export.add_argument("--json", action="store_true", help="one JSON object per group on stdout")
    export.set_defaults(func=cmd_export)

    storage = commands.add_parser("storage", help="each group's file size, snapshots, growth per year and retention")
    storage.add_argument("--json", action="store_true")
    storage.set_defaults(func=cmd_storage)

    tier = commands.add_parser("nginx", help="print an nginx.conf for an nginx tier in front of read replicas")
    tier.add_argument("--readers", required=True, metavar="HOST:PORT,...", help="the readers (chartgw serve --read-only)")
    tier.add_argument("--writer", metavar="HOST:PORT", help="the writer: POST refreshes go there (default: the readers, "
                                                             "which answer 503 naming it)")
    tier.add_argument("--listen", default="80", help="nginx's listen address (default 80)")
    tier.add_argument("--state-dir", default="/var/lib/nginx",
                      help="an existing folder for nginx's cache of public pages and its temporary files")
    tier.add_argument("--pid", default="/run/nginx-chartgw.pid")
    tier.add_argument("--error-log", default="/var/log/nginx/chartgw-error.log")
    tier.add_argument("--access-log", default="off", help="a path, or off (default)")
    tier.add_argument("--user", help="the user nginx's workers run as when started by root (default: nginx's, nobody)")
    tier.set_defaults(func=cmd_nginx)

    replicate = commands.add_parser("replicate", help="the writer: Litestream ships every group file, the index and "
                                                      "the key store to CHARTGW_REPLICA_URL (supervised)")
    replicate.add_argument("--print-config", action="store_true", help="print Litestream's configuration and exit")
    replicate.set_defaults(func=cmd_replicate)
    follow = commands.add_parser("follow", help="a reader: restore every file from CHARTGW_REPLICA_URL and keep "
                                                "following it (supervised); serve them with serve --read-only")
    follow.add_argument("--print-config", action="store_true", help="print Litestream's configuration and exit")
    follow.set_defaults(func=cmd_follow)

    settings = commands.add_parser("settings", help="list every CHARTGW_* setting with its value in force")
    settings.add_argument("--check", action="store_true",
                          help="print only the values that cannot be used, one line each; exit 2 when there is any")
    settings.set_defaults(func=cmd_settings)
    return parser


EXIT_PIPE = 128 + signal.SIGPIPE
"""What a Unix tool whose reader went away exits with (`chartgw settings | head -1`)."""


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt: a command unwinds the same way
    (locks released, transactions rolled back, a long-running one stopping cleanly with 0)."""


RAISE_AGAIN_SECONDS = 1.0
"""A signal handler's exception is lost when it lands in a finaliser or a weakref callback the garbage collector
runs (Python prints "Exception ignored" and goes on): until the command has stopped, it is raised again this
often (SIGALRM), so it lands in the command's own code."""


_stopping: list[bool] = []
"""Set once SIGTERM arrived: the command is unwinding."""


def _stop(signum: int, frame: object) -> None:
    _stopping.append(True)
    signal.setitimer(signal.ITIMER_REAL, RAISE_AGAIN_SECONDS)
    raise Stopped()


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM raises `Stopped` in the main thread for the duration (other threads cannot take signals: a test
    calling `main` from one runs without)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGALRM)}
    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        """A lost Stopped is no news (it is raised again): no "Exception ignored". Nor is what a finaliser of an
        object the stop cut short says while the command unwinds (an event loop stopped inside its own
        constructor cannot close: asyncio.run interrupted at its start)."""
        if not isinstance(unraisable.exc_value, Stopped) and not _stopping:
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not _stopping:  # once stopping, the cut-short objects are freed after this (with the exception): stay quiet
            sys.unraisablehook = hook


WRITING_COMMANDS = frozenset({"crawl", "demo", "replicate", "cron", "hooks", "deliver", "export", "enrich"})
"""Commands that write replicated files or work from the writer's (with every group command and keys
create/rotate/revoke): webhooks and exports are the writer's."""


def _writes(args: argparse.Namespace) -> bool:
    return (args.command in WRITING_COMMANDS or args.func is cmd_group_command
            or (args.command == "keys" and args.keys_command in {"create", "rotate", "revoke"}))


def main(argv: list[str] | None = None, settings: Settings | None = None) -> int:
    """Run the command with `settings`, by default resolved once from the environment (and CHARTGW_SETTINGS_FILE)."""
    try:
        settings = settings if settings is not None else Settings.from_environment()
    except SettingsFileError as exc:
        print(f"chartgw: {exc}", file=sys.stderr)
        return 2
    try:
        with _stopped_by_sigterm():
            args = build_parser(argv).parse_args(argv)
            args.settings = settings  # what every command runs with: resolved once, here
            if _writes(args) and settings.get(config.READ_ONLY):
                print(f"chartgw {args.command}: this node is a read replica ({config.READ_ONLY.variable}=1): run it on "
                      "the writer", file=sys.stderr)
                return 2
            status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except SettingError as exc:  # a misconfigured setting: one line naming it, not a traceback
        print(f"chartgw: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM before the command finished: no traceback
        return 128 + (signal.SIGTERM if isinstance(exc, Stopped) else signal.SIGINT)
    except BaseExceptionGroup as group:  # the same, raised in a task of a task group (anyio's, under httpx)
        interrupted, rest = group.split(KeyboardInterrupt)
        if interrupted is None or rest is not None:
            raise
        return 128 + (signal.SIGTERM if interrupted.subgroup(Stopped) is not None else signal.SIGINT)
    except BrokenPipeError:
        # The reader is gone: say nothing more, and point stdout at /dev/null so the exit's flush is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE


if __name__ == "__main__":
    sys.exit(main())
