"""Attention Atlas in a notebook: the model, its research surface, and the app's figures.

    import atlas
    tr = atlas.load()                                  # the shipped German→English model (a Translator)
    tr.translate("Ein Hund läuft im Schnee.").text
    log_probs, cache = tr.run_with_cache("Ein Hund läuft im Schnee.")     # docs/hooks.md
    atlas.show.attention(tr, "Ein Hund läuft im Schnee.", kind="cross", layer=2)  # the Attention page's figure

This package is glue between model/ (the network, torch) and viz/ (Plotly figures from NumPy arrays); the app's
pages stay in views/.
"""
from __future__ import annotations

from atlas import show
from model import Translator


def load(folder=None, draft: bool | None = None) -> Translator:
    """A checkpoint folder as a Translator (default: the shipped model, checkpoints/multi30k-de-en)."""
    return Translator.from_checkpoint(folder, draft=draft) if folder else Translator.from_checkpoint(draft=draft)


__all__ = ["Translator", "load", "show"]
