"""Markdown as a browser gets it, for tests of what text a card shows.

Each markdown is rendered by two independent parsers: markdown-it-py as CommonMark with GFM's
tables and strikethrough, taking a link to any scheme as the Prefect UI's renderer (marked)
does; and mistune with GFM's bare-address links (its `url` plugin). The HTML is read back as a
browser would: the elements it would make live (links, images, scripts, frames...) and the text
it would show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

import mistune
from markdown_it import MarkdownIt

__all__ = ["Page", "cells_shown", "render", "shown_as", "shown_text"]

# Elements a page makes live: they link, load, run or embed something.
LIVE = {"a", "img", "script", "iframe", "object", "embed", "svg", "style", "link", "form",
        "video", "audio", "source", "input", "base", "meta"}  # fmt: skip
_BREAKS = {"p", "br", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "pre"}

_commonmark = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_commonmark.validateLink = lambda url: True  # marked makes a link of any scheme
_gfm = mistune.create_markdown(escape=False, plugins=["url", "table", "strikethrough"])


@dataclass
class Page:
    """What a browser makes of rendered markdown."""

    live: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    text: str = ""

    def foreign(self, *own: str) -> list[tuple[str, dict[str, str | None]]]:
        """The live elements but images whose source starts with one of `own` (dsstar's)."""
        return [
            (tag, attrs)
            for tag, attrs in self.live
            if not (tag == "img" and own and str(attrs.get("src")).startswith(own))
        ]


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in LIVE:
            self.page.live.append((tag, dict(attrs)))
        if tag in _BREAKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _read(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    reader.page.text = "".join(reader.parts)
    return reader.page


def render(markdown: str) -> Page:
    """`markdown` rendered by both parsers: every live element either makes, and the text
    markdown-it-py's rendering shows."""
    commonmark, gfm = _read(_commonmark.render(markdown)), _read(_gfm(markdown))
    return Page(live=commonmark.live + gfm.live, text=commonmark.text)


def shown_as(text: str) -> str:
    """`text` with its whitespace made single spaces, as a page shows it."""
    return " ".join(text.split())


def shown_text(markdown: str) -> str:
    """The text a page shows for `markdown`, its whitespace as single spaces."""
    return shown_as(_read(_commonmark.render(markdown)).text)


def cells_shown(rows: list[dict]) -> list[dict]:
    """The rows of a table artifact as the Prefect UI shows them: a text cell is markdown."""
    return [{k: shown_text(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
