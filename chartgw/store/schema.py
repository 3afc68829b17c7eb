"""Tables, indexes and queries as data, and the migration that brings any file up to its declaration.

The platform declares its snapshot tables and the queries every group shares (`chartgw.store.tables`); a
group declares what it keeps beside them, and the queries it runs, in a `Storage` on its `Group`. SQL text
lives in these declarations only, never inline in a handler, so each query exists once, has a name, and is
checked against the tables it reads before anything runs it (`compile_check`).

Migration is additive: a declared table that is missing is created, a declared column that an older file
lacks is added (`ALTER TABLE ... ADD COLUMN`: such a column must allow NULL or have a default), and a
declared index that is missing is created after the columns it may use exist.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from chartgw.store.connect import connect_memory

__all__ = ["Index", "Query", "Storage", "Table", "compile_check", "drop_tables", "migrate"]


@dataclass(frozen=True)
class Index:
    name: str
    columns: str
    """The indexed expressions as in SQL: "target, id"."""
    where: str | None = None
    """A partial index's condition."""
    unique: bool = False


@dataclass(frozen=True)
class Table:
    """One table: its columns (each as declared in SQL, name first), table constraints, indexes."""

    name: str
    columns: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    """Table constraints: "PRIMARY KEY (snapshot_id, position)"."""
    indexes: tuple[Index, ...] = ()
    without_rowid: bool = False

    def __post_init__(self) -> None:
        names = [c.split()[0] for c in self.columns]
        assert len(names) == len(set(names)), f"table {self.name}: a column declared twice"

    def column_names(self) -> list[str]:
        return [c.split()[0] for c in self.columns]

    def create_sql(self) -> str:
        body = ",\n    ".join((*self.columns, *self.constraints))
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n    {body}\n){' WITHOUT ROWID' * self.without_rowid}"

    def index_sql(self) -> list[str]:
        return [f"CREATE {'UNIQUE ' * i.unique}INDEX IF NOT EXISTS {i.name} ON {self.name} ({i.columns})"
                + (f" WHERE {i.where}" if i.where else "") for i in self.indexes]


@dataclass(frozen=True)
class Query:
    """One named statement. Lists of values are bound as one JSON array (`json_each(?)`) and optional filters
    as `(?1 IS NULL OR ...)`, so the text never changes with the arguments."""

    name: str
    sql: str


@dataclass(frozen=True)
class Storage:
    """What a group keeps in its file beside the platform's snapshot tables, and every query it runs."""

    tables: tuple[Table, ...] = ()
    queries: tuple[Query, ...] = ()

    def __post_init__(self) -> None:
        names = [q.name for q in self.queries]
        assert len(names) == len(set(names)), f"a query name declared twice: {names}"


def migrate(db: sqlite3.Connection, tables: Iterable[Table]) -> None:
    """Create what is missing of `tables` in `db`: tables, then columns an older file lacks, then indexes."""
    tables = list(tables)
    for table in tables:
        db.execute(table.create_sql())
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table.name})")}
        for column in table.columns:
            if column.split()[0] not in present:
                db.execute(f"ALTER TABLE {table.name} ADD COLUMN {column}")
    for table in tables:
        for statement in table.index_sql():
            db.execute(statement)


_TABLE_NAMES = Query("table names", "SELECT name FROM sqlite_master WHERE type = 'table'")


def drop_tables(db: sqlite3.Connection, keep: Iterable[str] = ()) -> None:
    """Drop every table of `db` but those named in `keep` (a file of an earlier layout started over: the
    artist-history index's). The names are the file's own, so the statements are composed here, in the store."""
    kept = set(keep)
    for (table,) in db.execute(_TABLE_NAMES.sql).fetchall():
        if table not in kept:
            db.execute(f'DROP TABLE IF EXISTS "{table}"')


def compile_check(tables: Sequence[Table], queries: Iterable[Query], script: str = "") -> dict[str, str]:
    """Every query of `queries` prepared against an empty in-memory database with `tables` (and the DDL `script`,
    for a file whose layout is written as one: the artist-history index's): the error of each one that does not
    compile (an unknown table or column, a syntax error), by name."""
    db = connect_memory()
    try:
        if script:
            db.executescript(script)
        migrate(db, tables)
        errors = {}
        for query in queries:
            try:
                _explain(db, query.sql)
            except sqlite3.Error as exc:
                errors[query.name] = str(exc)
        return errors
    finally:
        db.close()


def _explain(db: sqlite3.Connection, sql: str) -> None:
    """Prepare `sql` (EXPLAIN: nothing runs) with a NULL for each of its parameters."""
    try:
        db.execute(f"EXPLAIN {sql}")
    except sqlite3.ProgrammingError as exc:  # "... uses 3, and there are 0 supplied": bind that many
        wanted = re.search(r"uses (\d+)", str(exc))
        if wanted is None:
            raise
        db.execute(f"EXPLAIN {sql}", (None,) * int(wanted.group(1)))
