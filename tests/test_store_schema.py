"""The store owns SQLite: only `chartgw.store.connect` opens a connection, every declared query compiles against
the tables it reads, SQL is written in declarations (not inline in code), and the migration brings an older file
up to its declaration."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pytest

from chartgw.api.access import KEY_TABLES
from chartgw.groups import GROUPS
from chartgw.store import Index, Query, Table, migrate, read_once, tables
from chartgw.store.schema import compile_check

PACKAGE = Path(__file__).resolve().parents[1] / "chartgw"
CONNECT_HELPER = PACKAGE / "store" / "connect.py"
CONNECT = re.compile(r"\b(sqlite3|aiosqlite)\s*\.\s*connect\b|from\s+(sqlite3|aiosqlite)\s+import\s+[^\n]*\bconnect\b")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_store_opens_sqlite() -> None:
    found = [f"{path.relative_to(PACKAGE.parent)}:{text.count(chr(10), 0, match.start()) + 1}"
             for path in _modules() if path != CONNECT_HELPER
             for text in [path.read_text()] for match in CONNECT.finditer(text)]
    assert found == [], "open SQLite through chartgw.store.connect (connect, connect_async)"
    assert CONNECT.search(CONNECT_HELPER.read_text())  # the helper is where the pattern does match


def _rooms() -> list[tuple[str, tuple[Table, ...], tuple[Query, ...], str]]:
    """Every owner of declared statements: (its name, the tables they read, the statements, a DDL script the tables
    are written as): the store, each group's Storage, the artist-history index and identity on the index file, the
    key store, the hooks database, the replication heartbeat and the exports."""
    from chartgw.api.access import KEY_QUERIES
    from chartgw.http import exports
    from chartgw.index import tables as index_tables
    from chartgw.index.identity.enrich import ENRICH_QUERIES
    from chartgw.index.identity.facts import FACTS_QUERIES
    from chartgw.index.identity.include import INCLUDE_QUERIES
    from chartgw.index.identity.routes import IDENTITY_QUERIES
    from chartgw.push.hooks import HOOK_QUERIES, HOOK_TABLES
    from chartgw.replica import litestream
    from chartgw.store.schema import _TABLE_NAMES

    rooms: list[tuple[str, tuple[Table, ...], tuple[Query, ...], str]] = [("store", tables.TABLES, (*tables.QUERIES, *FACTS_QUERIES, exports.SPAN, exports.ROLLBACK_JOURNAL,
                                       _TABLE_NAMES), "")]
    rooms += [(group.name, (*tables.TABLES, *group.storage.tables), group.storage.queries, "") for group in GROUPS]
    rooms += [("artist-history index", (tables.FETCH_LOG,), (*index_tables.QUERIES, *IDENTITY_QUERIES, *INCLUDE_QUERIES,
                                                                *ENRICH_QUERIES),
               index_tables.CREATE + index_tables.ARTIST_SUMS_SCRIPT + index_tables.VARIANT_ARTISTS.sql + ";"),
              ("keys", KEY_TABLES, KEY_QUERIES, ""),
              ("hooks", HOOK_TABLES, HOOK_QUERIES, ""),
              ("heartbeat", (litestream.BEAT,), (litestream.BEAT_NOW, litestream.LAST_BEAT), "")]
    return rooms


def test_every_declared_query_compiles_against_its_tables() -> None:
    for name, declared, queries, script in _rooms():
        errors = compile_check(declared, queries, script)
        assert errors == {}, f"{name}: {errors}"


def test_every_declared_query_belongs_to_a_room_that_compiles_it() -> None:
    """A `Query` declared at the top of any chartgw module is one of a room's above, so none escapes the compile."""
    import importlib
    import pkgutil

    import chartgw

    compiled = {id(query) for _, _, queries, _ in _rooms() for query in queries}
    loose = []
    for info in pkgutil.walk_packages(chartgw.__path__, "chartgw."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        loose += [f"{info.name}.{name}" for name, value in vars(module).items()
                  if isinstance(value, Query) and value.__class__ is Query and id(value) not in compiled]
    assert loose == []


SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|PRAGMA)\s")
DECLARATIONS = {"Query", "StoreQuery", "Table", "Index"}
INLINE_ALLOWED = {
    "store": "the store itself: its declarations and the migration's DDL",
    "index/artist_history": "reads of the index composed per request (a stream per artist key, the filters asked)",
}


def _inline_sql(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """SQL statements written inside functions of `path`, outside a Query/Table/Index declaration."""
    found: list[str] = []

    def visit(node: ast.AST, in_function: bool, declared: bool) -> None:
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            declared = declared or name in DECLARATIONS
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and in_function and not declared \
                and SQL.match(node.value):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value[:60]!r}")
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside, declared)

    visit(ast.parse(path.read_text()), False, False)
    return found


def test_sql_is_declared_not_written_inline() -> None:
    """Groups and the platform run declared queries (module-level `Query`s, a group's `Storage`); a statement
    written inside a function is one nobody can find, compile beforehand or share. The exceptions say why."""
    found = []
    for path in _modules():
        relative = path.relative_to(PACKAGE).as_posix()
        if any(relative == allowed or relative.startswith(allowed.removesuffix(".py") + "/") for allowed in INLINE_ALLOWED):
            continue
        found += _inline_sql(path)
    assert found == []


def test_the_inline_check_finds_inline_sql(tmp_path: Path) -> None:
    code = tmp_path / "m.py"
    code.write_text('A = "SELECT 1"\nQ = Query("q", "SELECT 2")\n\n\ndef f(db):\n    db.execute(f"SELECT {A} FROM t")\n'
                    '    return Query("inline", "SELECT 3")\n')
    assert [line.split(": ")[0] for line in _inline_sql(code, tmp_path)] == ["m.py:6"]


def test_a_file_of_an_older_layout_gets_the_declared_columns_and_indexes(tmp_path: Path) -> None:
    """The migration is additive: the column an older file lacks is added (existing rows get NULL), the index
    created after it, a missing table created; running it again changes nothing."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE api_keys (id INTEGER PRIMARY KEY, name TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE,"
               " created_at TEXT NOT NULL, expires_at TEXT, revoked_at TEXT)")
    db.execute("INSERT INTO api_keys (name, key_hash, created_at) VALUES ('old', 'h', '2026-01-01T00:00:00Z')")
    db.commit()
    declared = (*KEY_TABLES, Table("notes", ("id INTEGER PRIMARY KEY", "key_id INTEGER NOT NULL"),
                                   indexes=(Index("notes_by_key", "key_id", where="key_id > 0"),)))
    for _ in range(2):
        migrate(db, declared)
    columns = [row[1] for row in db.execute("PRAGMA table_info(api_keys)")]
    assert columns[-1] == "rate_per_minute"
    assert db.execute("SELECT name, rate_per_minute FROM api_keys").fetchall() == [("old", None)]
    assert {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} >= {
        "api_keys", "key_usage", "notes"}
    assert db.execute("SELECT sql FROM sqlite_master WHERE name = 'notes_by_key'").fetchone() == (
        "CREATE INDEX notes_by_key ON notes (key_id) WHERE key_id > 0",)
    db.close()


def test_read_once_is_none_without_a_file_or_table(tmp_path: Path) -> None:
    query = Query("count", "SELECT count(*) FROM snapshots")
    assert read_once(tmp_path / "none.sqlite", query) is None
    assert not (tmp_path / "none.sqlite").exists()  # a reader never creates a file
    sqlite3.connect(tmp_path / "empty.sqlite").close()
    assert read_once(tmp_path / "empty.sqlite", query) is None
    with pytest.raises(sqlite3.OperationalError):
        read_once(tmp_path / "empty.sqlite", Query("bad", "SELECT nothing FROM sqlite_master"))


def test_the_hooks_database_has_one_owner() -> None:
    """hooks.sqlite is HookStore's: no other module names its tables or statements, nor opens it through the store's
    connection (the worker calls HookStore's methods)."""
    from chartgw.push import hooks

    owned = {name for name, value in vars(hooks).items() if isinstance(value, (Query, Table))}
    assert {"DUE", "QUEUE", "HOOKS"} <= owned
    found = []
    for path in _modules():
        if path == PACKAGE / "push" / "hooks.py":
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) and \
                node.module == "chartgw.push.hooks" else [node.attr] if isinstance(node, ast.Attribute) else []
            found += [f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}: {name}" for name in names if name in owned]
        found += [f"{path.relative_to(PACKAGE)}: {call}" for call in ("store.connect()", "store.transaction()")
                  if call in text and "HookStore" in text]
    assert found == []
