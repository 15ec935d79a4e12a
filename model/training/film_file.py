"""A training film as the pages read it: film.json and film.safetensors (their format: model/training/film.py, which
records them) loaded into NumPy arrays and strings, and what the Training page computes from them. No torch."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

SCHEMA = "attention-atlas-film/1"
JSON_NAME, ARRAYS_NAME = "film.json", "film.safetensors"


class FilmError(Exception):
    """A film that is missing or cannot be read; the message names the file and what to do."""


@dataclass
class Film:
    """A loaded film: NumPy arrays and strings only."""

    steps: np.ndarray  # (F,) int
    epochs: list[int | None]
    train_loss: np.ndarray  # (F,) float, NaN where none was measured
    val_loss: np.ndarray  # (F,)
    probes: list[dict]  # src, ref, src_tokens, tgt_tokens, translations (F strings)
    attn: list[dict[str, np.ndarray]]  # per probe: kind -> (F, L, h, i, j) float16
    meta: dict = field(default_factory=dict)  # the rest of film.json (schema, n_heads, val_loss_on, ...)

    def __len__(self) -> int:
        return len(self.steps)

    def axes(self, probe: int, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of one probe's attention kind."""
        p = self.probes[probe]
        return {"enc_self": (p["src_tokens"], p["src_tokens"]), "dec_self": (p["tgt_tokens"], p["tgt_tokens"]),
                "cross": (p["tgt_tokens"], p["src_tokens"])}[kind]


def mean_entropy(film: Film, kind: str) -> np.ndarray:
    """(F, L) mean attention entropy in nats over probes, heads and query rows: falls as heads sharpen."""
    per_probe = []
    for attn in film.attn:
        p = attn[kind].astype(np.float32)  # (F, L, h, i, j)
        ent = -(p * np.log(np.clip(p, 1e-12, None))).sum(-1)  # (F, L, h, i)
        per_probe.append(ent.mean(axis=(2, 3)))  # (F, L)
    return np.mean(per_probe, axis=0)


def load_film(path: str | Path) -> Film:
    """Read a film from its folder (or either of its two files); raises FilmError naming what is wrong."""
    path = Path(path)
    folder = path if path.is_dir() or not path.suffix else path.parent
    jpath, apath = folder / JSON_NAME, folder / ARRAYS_NAME
    fix = "Train with `python -m model.train ... --film` to record one."
    for p in (jpath, apath):
        if not p.is_file():
            raise FilmError(f"{p}: no film here. {fix}")
    try:
        meta = json.loads(jpath.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FilmError(f"{jpath}: is not valid JSON ({e}). {fix}") from e
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        got = meta.get("schema") if isinstance(meta, dict) else type(meta).__name__
        raise FilmError(f"{jpath}: schema is {got!r}, this code reads {SCHEMA!r}")
    try:
        arrays = load_file(str(apath))
    except (SafetensorError, OSError, ValueError) as e:
        raise FilmError(f"{apath}: cannot be read as safetensors ({e}); it is truncated or corrupted. {fix}") from e
    try:
        steps, probes = np.asarray(meta["steps"], dtype=np.int64), meta["probes"]
        n = len(steps)
        attn = [{k: arrays[f"p{i:02d}.{k}"] for k in meta["kinds"]} for i in range(len(probes))]
        for i, (p, a) in enumerate(zip(probes, attn)):
            s, t = len(p["src_tokens"]), len(p["tgt_tokens"])
            want = {"enc_self": (s, s), "dec_self": (t, t), "cross": (t, s)}
            for k, arr in a.items():
                if arr.shape[0] != n or arr.shape[-2:] != want[k] or len(p["translations"]) != n:
                    raise ValueError(f"probe {i} {k}: shape {arr.shape} does not fit {n} frames and axes {want[k]}")
        losses = {k: np.array([np.nan if v is None else v for v in meta[k]], dtype=np.float64)
                  for k in ("train_loss", "val_loss")}
        if any(len(v) != n for v in losses.values()) or len(meta["epochs"]) != n:
            raise ValueError("the loss and epoch lists do not have one entry per frame")
    except (KeyError, TypeError, ValueError) as e:
        raise FilmError(f"{folder}: film.json and film.safetensors do not agree ({e}). {fix}") from e
    rest = {k: v for k, v in meta.items() if k not in ("steps", "epochs", "train_loss", "val_loss", "probes")}
    return Film(steps, list(meta["epochs"]), losses["train_loss"], losses["val_loss"], probes, attn, rest)
