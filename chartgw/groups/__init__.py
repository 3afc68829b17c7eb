"""The service groups of the spec, in the order the app and CLI list them. Adding a group is its own
modules plus one line here.

The registry names each group's module and imports it when the group is first asked for (`GROUPS.named`):
a command imports only the groups it touches (`chartgw keys`, `chartgw crawl korea-chart` one), while the app,
which serves them all, iterates `GROUPS` and so loads every one."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from typing import overload

from chartgw.api.group import GROUP_NAMES, Group
from chartgw.index import history

MODULES: dict[str, str] = {
    "streaming": "chartgw.groups.streaming",
    "video": "chartgw.groups.video",
    "digital-sales": "chartgw.groups.digital_sales",
    "korea-chart": "chartgw.groups.korea_chart",
    "recognition": "chartgw.groups.recognition",
    "ranking-charts": "chartgw.groups.ranking_charts",
    "uk-charts": "chartgw.groups.uk_charts",
    "social-trends": "chartgw.groups.social_trends",
    "short-video": "chartgw.groups.short_video",
    "dj-rankings": "chartgw.groups.dj_rankings",
    "retail-digital": "chartgw.groups.retail_digital",
    "retail-music": "chartgw.groups.retail_music",
    "retail-physical": "chartgw.groups.retail_physical",
    "radio": "chartgw.groups.radio",
    "artist-history-api": "chartgw.index.artist_history",  # last: its demo indexes the others' demo data
}
"""Each group's name and the module declaring its `GROUP`, in listing order."""


class Registry(Sequence[Group]):
    """The registered groups as a sequence that imports a group's module when the group is first needed: by name
    (`named`) one, by index, length or iteration every one. Names are known without importing anything."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = dict(modules)
        self._loaded: dict[str, Group] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._modules)

    def named(self, name: str) -> Group:
        """The group called `name`, its module imported now if it was not yet (KeyError for no such group)."""
        group = self._loaded.get(name)
        if group is None:
            group = importlib.import_module(self._modules[name]).GROUP
            assert isinstance(group, Group) and group.name == name, f"{self._modules[name]}.GROUP is not {name!r}"
            self._loaded[name] = group
        return group

    def all(self) -> tuple[Group, ...]:
        return tuple(self.named(name) for name in self._modules)

    @overload
    def __getitem__(self, index: int) -> Group: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Group, ...]: ...

    def __getitem__(self, index: int | slice) -> Group | tuple[Group, ...]:
        return self.all()[index]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.all())

    def __contains__(self, value: object) -> bool:
        return isinstance(value, Group) and value.name in self._modules and self.named(value.name) is value


GROUPS = Registry(MODULES)
"""Every group, loaded when iterated (the app, `chartgw cron`); `GROUPS.named(name)` loads one."""

GROUP_NAMES.update(MODULES)  # what CHARTGW_RETENTION_DAYS may name, before any group is loaded
history.register_groups(GROUPS, GROUPS.named)  # the index reads every group above by its entry mapping


def group_names(groups: Sequence[Group]) -> list[str]:
    """The names of `groups` without loading a lazy registry (a test's tuple of groups works too)."""
    return list(groups.names) if isinstance(groups, Registry) else [g.name for g in groups]


def named(groups: Sequence[Group], name: str) -> Group:
    """The group of `groups` called `name`, loading only it from a lazy registry (KeyError for none)."""
    if isinstance(groups, Registry):
        return groups.named(name)
    found = next((g for g in groups if g.name == name), None)
    if found is None:
        raise KeyError(name)
    return found
