"""How a group names its snapshot targets: `TargetKey` makes, parses and globs them, one way for every group.

A target is its fields' values joined by "/", after an optional constant prefix: ("combo", "country")
makes "top-songs/us"; prefix "genre" with ("market", "genre") makes "genre/france/pop". A crawl key
may add "@" and a date (a dated backfill of that target); `parse` reads the target part.
"""

from __future__ import annotations

from dataclasses import dataclass

from chartgw.store import glob_escape

__all__ = ["TargetKey"]


@dataclass(frozen=True)
class TargetKey:
    fields: tuple[str, ...]
    prefix: str = ""
    """A constant first part (e.g. the chart kind), for groups whose targets come in several shapes."""

    def __post_init__(self) -> None:
        assert self.fields and len(set(self.fields)) == len(self.fields), f"target fields: {self.fields}"

    def make(self, *values: str) -> str:
        """The target of these field values, in field order; a value may not contain "/" or "@"."""
        assert len(values) == len(self.fields), f"{self.fields} takes {len(self.fields)} values, got {values}"
        assert all(v and "/" not in v and "@" not in v for v in values), f"target values: {values}"
        return "/".join((self.prefix, *values) if self.prefix else values)

    def parse(self, target: str) -> dict[str, str] | None:
        """The field values of `target` (a crawl key's "@date" ignored), or None when it is not one of these."""
        parts = target.partition("@")[0].split("/")
        if self.prefix:
            if parts[0] != self.prefix:
                return None
            parts = parts[1:]
        if len(parts) != len(self.fields) or not all(parts):
            return None
        return dict(zip(self.fields, parts, strict=True))

    def pattern(self, **known: str | None) -> str:
        """A GLOB over this key's targets with the `known` fields fixed (each matched literally), others any."""
        unknown = set(known) - set(self.fields)
        assert not unknown, f"not fields of {self.fields}: {sorted(unknown)}"
        parts = [glob_escape(value) if (value := known.get(name)) is not None else "*" for name in self.fields]
        return "/".join((glob_escape(self.prefix), *parts) if self.prefix else parts)
