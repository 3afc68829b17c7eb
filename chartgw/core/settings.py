"""One `Settings` object: every `CHARTGW_*` value, resolved once at start-up and passed on.

The environment (and an optional file it names) is read by `Settings.from_environment` and by nothing
else: the CLI resolves it when a command starts, checks it whole, and hands it to the app, the crawl
runner, commands, the monitor and the index. Nothing reads them from a global: the app's handlers get them
on their group data (`Call.settings`), crawls on their `Context`, background workers from their
constructor, so two apps built with different settings live side by side in one process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

__all__ = ["PREFIX", "SETTINGS_FILE", "SettingError", "Settings", "SettingsFileError", "exported"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
PREFIX = "CHARTGW_"
SETTINGS_FILE = PREFIX + "SETTINGS_FILE"
"""The one variable naming a settings file (`NAME=value` lines; the environment wins over it)."""


class Setting(Protocol[T_co]):
    """What the settings need of a declared setting (`chartgw.core.config.Setting` is the one declaration)."""

    @property
    def variable(self) -> str: ...

    @property
    def default(self) -> str: ...

    def parse(self, value: str, /) -> T_co: ...


class SettingError(ValueError):
    """A CHARTGW_* setting holds a value the code cannot use; the server answers 503 naming it."""


class SettingsFileError(ValueError):
    """The file named by CHARTGW_SETTINGS_FILE cannot be read or holds a line that is not NAME=value."""


class Settings:
    """The raw text of every `CHARTGW_*` variable given (the rest take their declared defaults), with
    each value parsed once on first use. Immutable: `with_values` makes a changed copy."""

    __slots__ = ("_parsed", "_values", "file")

    def __init__(self, values: Mapping[str, str | None] | None = None, file: Path | None = None) -> None:
        self._values: dict[str, str] = {name if name.startswith(PREFIX) else PREFIX + name: value.strip()
                                         for name, value in (values or {}).items() if value is not None}
        self._parsed: dict[str, tuple[bool, Any]] = {}
        self.file = file
        """The settings file read (CHARTGW_SETTINGS_FILE), if any: `chartgw settings` names it."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings of `environ` (default: this process's environment) over those of the file its
        CHARTGW_SETTINGS_FILE names, if any. The only place the package reads the environment."""
        environ = os.environ if environ is None else environ
        values: dict[str, str | None] = {}
        file = environ.get(SETTINGS_FILE, "").strip()
        if file:
            values.update(read_settings_file(Path(file)))
        values.update({name: value for name, value in environ.items() if name.startswith(PREFIX)})
        values.pop(SETTINGS_FILE, None)
        return cls(values, Path(file) if file else None)

    def with_values(self, values: Mapping[str, str | None]) -> Settings:
        """A copy with `values` set (a None unsets a variable, so its default applies)."""
        merged: dict[str, str | None] = dict(self._values)
        for name, value in values.items():
            merged[name if name.startswith(PREFIX) else PREFIX + name] = value
        return Settings(merged, self.file)

    def raw(self, setting: Setting[Any]) -> str:
        """The text in force for `setting`: its variable's value, or the default when unset or blank."""
        return self._values.get(setting.variable) or setting.default

    def is_set(self, setting: Setting[Any]) -> bool:
        return bool(self._values.get(setting.variable))

    def get(self, setting: Setting[T]) -> T:
        """`setting`'s value, parsed once; a value the code cannot use raises SettingError naming it."""
        found = self._parsed.get(setting.variable)
        if found is None:
            try:
                found = (True, setting.parse(self.raw(setting)))
            except ValueError as exc:
                found = (False, f"{setting.variable}: {exc}")
            self._parsed[setting.variable] = found
        ok, value = found
        if not ok:
            raise SettingError(value)
        return cast(T, value)

    def problems(self, declared: Iterable[Setting[Any]]) -> list[str]:
        """One line per declared setting whose value cannot be used, each naming its variable."""
        lines = []
        for setting in declared:
            try:
                self.get(setting)
            except SettingError as exc:
                lines.append(str(exc))
        return lines

    def unknown(self, declared: Iterable[Setting[Any]]) -> list[str]:
        """The variables given that no declared setting reads (a typo, or a setting of another version)."""
        known = {setting.variable for setting in declared}
        return sorted(name for name in self._values if name not in known)

    def child_environment(self) -> dict[str, str]:
        """The environment for a child process that must run with these settings (a refresh's crawl): this
        process's variables other than CHARTGW_*, and these settings' own."""
        inherited = {name: value for name, value in os.environ.items() if not name.startswith(PREFIX)}
        return {**inherited, **self._values}

    def __repr__(self) -> str:
        return f"Settings({sorted(self._values)})"


def read_settings_file(path: Path) -> dict[str, str]:
    """`NAME=value` lines (blank lines and `#` comments skipped; names with or without the CHARTGW_ prefix)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{SETTINGS_FILE}: cannot read {path}: {exc}") from None
    values = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip().removeprefix("export ").strip()
        if not sep or not name.replace("_", "").isalnum():
            raise SettingsFileError(f"{SETTINGS_FILE}: {path}:{number}: not NAME=value: {line[:80]!r}")
        values[name if name.startswith(PREFIX) else PREFIX + name] = value.strip().strip("\"'")
    return values


@contextmanager
def exported(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in this process's environment for the duration, then as before: what the processes started
    meanwhile inherit (`chartgw serve --workers N`: granian's workers resolve their settings from it, and
    prometheus-client reads its PROMETHEUS_MULTIPROC_DIR there)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
