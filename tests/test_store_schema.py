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


def test_every_declared_query_compiles_against_its_tables() -> None:
    assert compile_check(tables.TABLES, tables.QUERIES) == {}
    for group in GROUPS:
        storage = group.storage
        errors = compile_check((*tables.TABLES, *storage.tables), storage.queries)
        assert errors == {}, f"{group.name}: {errors}"


SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|PRAGMA)\s")
DECLARATIONS = {"Query", "StoreQuery", "Table", "Index"}
INLINE_ALLOWED = {
    "store": "the store itself: its declarations and the migration's DDL",
    "index/history.py": "the artist-history index's own file: its bulk writes are composed per batch",
    "index/artist_history": "reads of the index composed per request (a stream per artist key, the filters asked)",
    "api/access.py": "the key store's own file (keys.sqlite), opened through the store's helper",
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
