"""Showing user text safely: as text, never as HTML or Markdown markup."""
from __future__ import annotations

import html
import re

_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~<$])")


def md_escape(text: str) -> str:
    """Escape Markdown and HTML so st.markdown shows `text` literally."""
    return _MD.sub(r"\\\1", html.escape(text, quote=False))
