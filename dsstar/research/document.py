"""A report as blocks of text: what a model wrote in markdown, read into headings, paragraphs,
lists, tables, quotes and code, then written again as markdown and as HTML by dsstar.

The writer's reply is never shown as it stands. Its markdown is parsed (markdown-it, raw HTML
off) and only its text is kept, with the structure dsstar writes around it: every piece of
text goes out escaped (`md_text`, `md_code`; `html.escape`), so no link, image, HTML or
script of the reply survives, while its headings, lists, tables and emphasis do. The only
links and images are dsstar's own (`Block.image`, built from files the sub-runs stored, and
the HTML's anchors from a citation to its reference).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from dsstar.text import fenced, md_code, md_text

__all__ = [
    "Block",
    "Span",
    "block_text",
    "heading",
    "paragraph",
    "read_markdown",
    "spans_text",
    "to_html",
    "to_markdown",
]

# A piece of inline text and its style: "" (plain), "strong", "em" or "code".
Span = tuple[str, str]
Spans = tuple[Span, ...]


@dataclass(frozen=True)
class Block:
    """One block of a report. `kind`: heading (`level`, `spans`), paragraph, quote (`spans`),
    list (`items`: depth and spans; `ordered`), table (`rows`, the first the header), code
    (`text`), rule, or image (`src`, which dsstar built, and `text`, its caption)."""

    kind: str
    spans: Spans = ()
    level: int = 0
    items: tuple[tuple[int, Spans], ...] = ()
    ordered: bool = False
    rows: tuple[tuple[Spans, ...], ...] = ()
    text: str = ""
    src: str = ""
    anchor: str = field(default="", compare=False)  # an HTML id dsstar gives (a reference)


def heading(level: int, text: str) -> Block:
    return Block("heading", ((("", text),)), level=level)


def paragraph(*spans: Span, anchor: str = "") -> Block:
    return Block("paragraph", tuple(spans), anchor=anchor)


def _parser() -> MarkdownIt:
    # CommonMark without raw HTML (it reads as text), with GFM's tables and strikethrough.
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def read_markdown(text: str) -> list[Block]:
    """The blocks of a markdown text (a model's), as dsstar keeps them (see the module)."""
    tokens = _parser().parse(text or "")
    return list(_blocks(iter(tokens)))


def _blocks(tokens: Iterator) -> Iterator[Block]:
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            yield Block("heading", _spans(next(tokens)), level=int(token.tag[1:]))
        elif kind == "paragraph_open":
            yield Block("paragraph", _spans(next(tokens)))
        elif kind in ("bullet_list_open", "ordered_list_open"):
            yield Block("list", items=tuple(_items(tokens, kind)), ordered=kind.startswith("o"))
        elif kind == "blockquote_open":
            yield Block("quote", _quote(tokens))
        elif kind == "table_open":
            yield Block("table", rows=tuple(_rows(tokens)))
        elif kind in ("fence", "code_block"):
            yield Block("code", text=token.content.rstrip("\n"))
        elif kind == "hr":
            yield Block("rule")


def _items(tokens: Iterator, opened: str) -> Iterator[tuple[int, Spans]]:
    """The items of a list, nested lists flattened with their depth."""
    closing, depth = opened.replace("_open", "_close"), 0
    spans: list[tuple[int, Spans]] = []  # an item of several paragraphs: one line each
    for token in tokens:
        if token.type == closing and depth == 0:
            break
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
        elif token.type == "inline":
            spans.append((depth, _spans(token)))
        elif token.type in ("fence", "code_block"):
            spans.append((depth, (("code", token.content.strip()),)))
    yield from spans


def _quote(tokens: Iterator) -> Spans:
    spans: list[Span] = []
    level = 0
    for token in tokens:
        if token.type == "blockquote_open":
            level += 1
        elif token.type == "blockquote_close":
            if level == 0:
                break
            level -= 1
        elif token.type == "inline":
            spans += [*(([("", " ")]) if spans else []), *_spans(token)]
    return tuple(spans)


def _rows(tokens: Iterator) -> Iterator[tuple[Spans, ...]]:
    row: list[Spans] = []
    for token in tokens:
        if token.type == "table_close":
            return
        if token.type == "tr_open":
            row = []
        elif token.type == "inline":
            row.append(_spans(token))
        elif token.type == "tr_close":
            yield tuple(row)


def _spans(inline) -> Spans:
    """The text of an inline token as spans: links and images give their text alone, raw
    HTML is text, line breaks are spaces."""
    spans: list[Span] = []
    styles: list[str] = []
    for child in inline.children or []:
        kind = child.type
        if kind in ("strong_open", "em_open", "s_open"):
            styles.append(kind.split("_")[0])
        elif kind in ("strong_close", "em_close", "s_close"):
            styles.pop() if styles else None
        elif kind == "code_inline":
            spans.append(("code", child.content))
        elif kind in ("softbreak", "hardbreak"):
            spans.append(("", " "))
        elif kind == "image":  # its alternative text, never the image
            spans.append(("", child.content))
        elif child.content:  # text, raw HTML as text, a link's text
            style = styles[-1] if styles and styles[-1] in ("strong", "em") else ""
            spans.append((style, child.content))
    return _merged(spans)


def _merged(spans: list[Span]) -> Spans:
    merged: list[Span] = []
    for style, text in spans:
        if merged and merged[-1][0] == style:
            merged[-1] = (style, merged[-1][1] + text)
        else:
            merged.append((style, text))
    return tuple(merged)


def spans_text(spans: Spans) -> str:
    return "".join(text for _, text in spans)


def block_text(block: Block) -> str:
    """A block's text, plain (for the checks of citations and numbers)."""
    if block.kind in ("heading", "paragraph", "quote"):
        return spans_text(block.spans)
    if block.kind == "list":
        return "\n".join(spans_text(spans) for _, spans in block.items)
    if block.kind == "table":
        return "\n".join(" | ".join(spans_text(cell) for cell in row) for row in block.rows)
    return block.text


# -- markdown ---------------------------------------------------------------------------------


def _md_spans(spans: Spans) -> str:
    out = []
    for style, text in spans:
        if style == "code":
            out.append(md_code(text))
            continue
        flat = " ".join(text.split())
        if not flat:
            out.append(" " if text else "")
            continue
        core = md_text(flat, line=True)
        mark = {"strong": "**", "em": "*"}.get(style, "")
        lead = " " if text[:1].isspace() else ""
        trail = " " if text[-1:].isspace() else ""
        out.append(f"{lead}{mark}{core}{mark}{trail}")
    return "".join(out).strip()


def to_markdown(blocks: list[Block]) -> str:
    """The blocks as markdown in which only dsstar's syntax means anything (see the module)."""
    parts = []
    for block in blocks:
        if block.kind == "heading":
            parts.append(f"{'#' * min(max(block.level, 1), 6)} {_md_spans(block.spans)}")
        elif block.kind == "paragraph":
            parts.append(_md_spans(block.spans))
        elif block.kind == "quote":
            parts.append(f"> {_md_spans(block.spans)}")
        elif block.kind == "list":
            marker = "1." if block.ordered else "-"
            parts.append("\n".join(f"{'    ' * depth}{marker} {_md_spans(spans)}"
                                   for depth, spans in block.items))  # fmt: skip
        elif block.kind == "table" and block.rows:
            width = max(len(row) for row in block.rows)
            lines = [_md_row(block.rows[0], width), "|" + " --- |" * width]
            lines += [_md_row(row, width) for row in block.rows[1:]]
            parts.append("\n".join(lines))
        elif block.kind == "code":
            parts.append(fenced(block.text))
        elif block.kind == "rule":
            parts.append("---")
        elif block.kind == "image":
            parts.append(f"![{md_text(block.text[:100], line=True)}]({block.src})")
    return "\n\n".join(part for part in parts if part) + "\n"


def _md_row(row: tuple[Spans, ...], width: int) -> str:
    cells = [_md_spans(cell) for cell in row] + [""] * (width - len(row))
    return "| " + " | ".join(cells) + " |"


# -- HTML -------------------------------------------------------------------------------------

_CITATION = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


def _html_spans(spans: Spans, cite: Callable[[int], str | None]) -> str:
    out = []
    for style, text in spans:
        escaped = html.escape(text)
        if style == "code":
            out.append(f"<code>{escaped}</code>")
            continue
        escaped = _CITATION.sub(lambda m: _cited(m, cite), escaped)
        tag = {"strong": "strong", "em": "em"}.get(style)
        out.append(f"<{tag}>{escaped}</{tag}>" if tag else escaped)
    return "".join(out).strip()


def _cited(match: re.Match[str], cite: Callable[[int], str | None]) -> str:
    """A citation group as links to its references (those `cite` knows an anchor for)."""
    links = []
    for part in re.split(r"\s*[,;]\s*", match.group(1)):
        anchor = cite(int(part))
        links.append(f'<a href="#{anchor}">{part}</a>' if anchor else part)
    return "[" + ", ".join(links) + "]"


def to_html(blocks: list[Block], cite: Callable[[int], str | None] = lambda _: None) -> str:
    """The blocks as HTML elements: every text escaped, the only tags dsstar's own; a
    citation [N] links to the reference `cite(N)` names (an id of a block here)."""
    parts = []
    for block in blocks:
        anchor = f' id="{html.escape(block.anchor)}"' if block.anchor else ""
        if block.kind == "heading":
            level = min(max(block.level, 1), 6)
            parts.append(f"<h{level}{anchor}>{_html_spans(block.spans, cite)}</h{level}>")
        elif block.kind == "paragraph":
            parts.append(f"<p{anchor}>{_html_spans(block.spans, cite)}</p>")
        elif block.kind == "quote":
            parts.append(f"<blockquote>{_html_spans(block.spans, cite)}</blockquote>")
        elif block.kind == "list":
            parts.append(_html_list(block, cite))
        elif block.kind == "table" and block.rows:
            head = "".join(f"<th>{_html_spans(c, cite)}</th>" for c in block.rows[0])
            body = "".join(
                "<tr>" + "".join(f"<td>{_html_spans(c, cite)}</td>" for c in row) + "</tr>"
                for row in block.rows[1:]
            )
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif block.kind == "code":
            parts.append(f"<pre><code>{html.escape(block.text)}</code></pre>")
        elif block.kind == "rule":
            parts.append("<hr>")
        elif block.kind == "image":
            caption = html.escape(block.text)
            parts.append(f'<figure><img src="{html.escape(block.src)}" alt="{caption}">'
                         f"<figcaption>{caption}</figcaption></figure>")  # fmt: skip
    return "\n".join(parts)


def _html_list(block: Block, cite: Callable[[int], str | None]) -> str:
    tag = "ol" if block.ordered else "ul"
    out, depth = [f"<{tag}>"], 0
    for level, spans in block.items:
        while depth < level:
            out.append(f"<{tag}>")
            depth += 1
        while depth > level:
            out.append(f"</{tag}>")
            depth -= 1
        out.append(f"<li>{_html_spans(spans, cite)}</li>")
    out += [f"</{tag}>"] * (depth + 1)
    return "".join(out)
