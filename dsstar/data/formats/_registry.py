"""The format registry: every file format dsstar knows, built-in or a user's, in one table.

This module is self-contained (standard library only): its source is also joined into the
script that profiles files inside the sandbox, where the dsstar package cannot be imported.
There each function a format names by reference is already a global of the script."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "ExtensionMap",
    "Format",
    "NamesWhere",
    "Ref",
    "by_name",
    "for_file_name",
    "formats",
    "generation",
    "register",
    "resolve",
    "set_plugin_loader",
    "unregister",
]

# A function, or a "package.module:function" reference imported at first use: the built-in
# profilers and readers import pandas, which detecting a format must not pay for. A user's
# format passes its functions (the sandbox resolves references among dsstar's own only).
Ref = Callable[..., Any] | str


@dataclass(frozen=True)
class Format:
    """One file format: how it is recognised, profiled, read for a contract, and shown.

    Detection tries, in registration order, every format's `magic` on the file's leading
    bytes; a file that is none of those and not text keeps the format its name gives; for
    text, every format's `sniff` is tried on the decoded head; the name decides last.
    """

    name: str  # what `describe --json` calls it ("csv", "sqlite", ...)
    extensions: tuple[str, ...] = ()  # lower case, with the dot (".csv", ".tar.gz")
    label: str | None = None  # the name in messages ("could not parse as CSV"); default: name
    # (path, leading bytes) -> whether the content is this format, whatever the file's name.
    magic: Callable[[str, bytes], bool] | None = None
    # (decoded head, the format the name gives or None) -> whether this text is this format.
    sniff: Callable[[str, str | None], bool] | None = None
    text: bool = False  # a text format: content tests come before its name
    needs_sniff: bool = False  # named so but not confirmed by `sniff`: plain text
    # (path, format name) -> the profile's lines after its heading; None: an opaque binary.
    profile: Ref | None = None
    # (path, rows) -> [(table name or None, pandas frame)]; None: no data contract.
    tables: Ref | None = None
    document: bool = False  # documentation: its own text goes whole into the prompts
    # (path relative to the data root) -> the paths of the files a reader opens with it (a
    # shapefile's .shx and .dbf): those in the lake are all a file's analysis sees besides
    # the file itself. None: the file alone.
    needs: Callable[[str], Iterable[str]] | None = None
    origin: str | None = field(default=None, compare=False)  # the module that registered it

    @property
    def shown_as(self) -> str:
        """The format's name in messages."""
        return self.label or self.name


_FORMATS: dict[str, Format] = {}
_generation = 0
_plugin_loader: list[Callable[[], None]] = []
# Held while the user's modules load: a thread that looks a format up meanwhile waits for them.
_LOADING = threading.RLock()


def register(fmt: Format) -> Format:
    """Add `fmt` (or replace the format of the same name, keeping its place). Its extensions
    name it from now on, also where another format had them."""
    global _generation
    if not fmt.name or not all(e.startswith(".") and e == e.lower() for e in fmt.extensions):
        raise ValueError(f"a format needs a name and lower-case '.ext' extensions: {fmt!r}")
    if fmt.origin is None:  # the module that calls: its source is what the sandbox gets
        fmt = replace(fmt, origin=sys._getframe(1).f_globals.get("__name__"))
    _FORMATS[fmt.name] = fmt
    _generation += 1
    return fmt


def unregister(name: str) -> None:
    """Forget the format `name` (no error when it is unknown)."""
    global _generation
    if _FORMATS.pop(name, None) is not None:
        _generation += 1


def generation() -> int:
    """A number that changes whenever a format is registered or removed."""
    _load_plugins()
    return _generation


def set_plugin_loader(loader: Callable[[], None]) -> None:
    """`loader` runs once, at the first look-up: it imports the user's format modules."""
    _plugin_loader[:] = [loader]


def _load_plugins() -> None:
    if _plugin_loader:
        with _LOADING:
            while _plugin_loader:
                _plugin_loader.pop()()


def formats() -> list[Format]:
    """Every format, in registration order (the order detection tries them)."""
    _load_plugins()
    return list(_FORMATS.values())


def by_name(name: str | None) -> Format | None:
    """The format called `name`, or None."""
    _load_plugins()
    return _FORMATS.get(name) if name else None


def for_file_name(file_name: str) -> Format | None:
    """The format a file name gives: its longest known extension (.tar.gz before .gz)."""
    lowered = file_name.lower()
    best: tuple[int, Format] | None = None
    for fmt in formats():
        for ext in fmt.extensions:
            if lowered.endswith(ext) and (best is None or len(ext) >= best[0]):
                best = (len(ext), fmt)
    return best[1] if best else None


def resolve(ref: Ref) -> Callable[..., Any]:
    """The function `ref` stands for."""
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    if __name__ != "dsstar.data.formats._registry":  # inside the joined profiling script
        return globals()[attribute]
    return getattr(importlib.import_module(module), attribute)


class ExtensionMap(Mapping[str, str]):
    """Extension -> format name, as the registry says now."""

    def _table(self) -> dict[str, str]:
        return {ext: fmt.name for fmt in formats() for ext in fmt.extensions}

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


class NamesWhere(Set[str]):
    """The names of the formats with a property, as the registry says now."""

    def __init__(self, test: Callable[[Format], bool]) -> None:
        self._test = test

    def _names(self) -> list[str]:
        return [fmt.name for fmt in formats() if self._test(fmt)]

    def __contains__(self, name: object) -> bool:
        fmt = by_name(name) if isinstance(name, str) else None
        return fmt is not None and self._test(fmt)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())
