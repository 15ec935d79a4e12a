"""Text in figures and tables: token escaping, number formats and title wrapping.

Plain string functions (no plotly).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

# Plotly never wraps titles; at 19 px about 40 characters fit in a third of a
# 1440 px page, so style() breaks longer titles into lines.
TITLE_WRAP_CHARS = 40
# d3 format of probabilities in hover templates: the browser's twin of fmt_prob.
PROB_D3 = ".3f"


def fmt_prob(p: float) -> str:
    """A probability as text, always 3 decimals: ``0.500``, ``1.000``; ``<0.001`` if tiny but not 0.

    Every hover, label and table of viz uses it (hovers the browser formats use
    :data:`PROB_D3`, the same 3 decimals). NaN (a masked cell) gives ``"–"``.
    """
    p = float(p)
    if math.isnan(p):
        return "–"
    if 0 < p < 0.0005:
        return "<0.001"
    return f"{p:.3f}"


def fmt_share(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with 2 significant digits below 1 %.

    ``"30.0 %"``, ``"0.056 %"``, ``"0.0056 %"``: a non-zero part never reads 0.
    """
    if whole == 0 or part == 0:
        return "0 %"
    pct = 100.0 * float(part) / float(whole)
    if abs(pct) >= 1:
        return f"{pct:.1f} %"
    decimals = 1 - math.floor(math.log10(abs(pct)))
    return f"{pct:.{decimals}f} %"


_TAG = re.compile(r"<(/?)([a-zA-Z]+)[^>]*>")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def visible_len(text: str) -> int:
    """Characters a reader sees: tags dropped, each entity (``&lt;``) one character."""
    return len(re.sub(r"&#?\w+;", "x", _TAG.sub("", text)))


def wrap_title(text: str | None, width_chars: int = TITLE_WRAP_CHARS) -> str | None:
    """Break plotly title text into lines of at most ``width_chars`` visible characters.

    Breaks at spaces only (a longer word keeps its own line) and keeps the
    existing ``<br>``s. Tags and entities are never split, entities count as
    one character, and a tag open at a break (``<sup>``) is closed before the
    ``<br>`` and reopened after it.
    """
    if not text:
        return text
    out: list[str] = []
    open_tags: list[tuple[str, str]] = []  # (name, opening tag) still open
    for segment in _BR.split(text):
        line, length = "", 0
        for word in re.split(r" (?![^<]*>)", segment):
            n = visible_len(word)
            if line and length + 1 + n > width_chars:
                closing = "".join(f"</{name}>" for name, _ in reversed(open_tags))
                out.append(line + closing)
                line, length = "".join(tag for _, tag in open_tags), 0
            line, length = (line + " " + word, length + 1 + n) if length else (line + word, n)
            for m in _TAG.finditer(word):
                name = m.group(2).lower()
                if m.group(1):
                    open_tags = [t for t in open_tags if t[0] != name]
                elif name != "br" and not m.group(0).endswith("/>"):
                    open_tags.append((name, m.group(0)))
        out.append(line)
    return "<br>".join(out)


def title_lines(title: str | None, wrap_chars: int | None = TITLE_WRAP_CHARS) -> int:
    """Number of lines ``title`` takes once wrapped (0 without a title)."""
    if not title:
        return 0
    return len(_BR.findall(wrap_title(title, wrap_chars) if wrap_chars else title)) + 1


def cut_token(token: object, max_chars: int | None) -> str:
    """``token`` as text, cut to ``max_chars`` characters ending in "…" (``None``: the whole token)."""
    text = str(token)
    return text if max_chars is None or len(text) <= max_chars else text[: max_chars - 1] + "…"


def escape_token(token: object) -> str:
    """Escape a token so plotly shows it literally (``<script>`` stays text).

    Plotly renders a subset of HTML in labels and hover text and only knows
    the entities &amp; &lt; &gt; (plus a few symbols), so quotes are left alone:
    ``&quot;`` would be printed as-is.
    """
    return html.escape(str(token), quote=False)


def escape_tokens(tokens: Sequence[object]) -> list[str]:
    """Escape every token of a list with :func:`escape_token`."""
    return [escape_token(t) for t in tokens]
