"""The training film: a fixed set of probe sentences traced at log-spaced steps while the model learns.

Format (schema "attention-atlas-film/1"), two files beside the checkpoint:

- film.json: {"schema", "kinds", "n_layers": {kind: L}, "n_heads", "steps": [F ints], "epochs": [F, the
  epoch that ended at this frame or null], "train_loss": [F, mean token NLL of the training batches since
  the previous frame (dropout on), null at step 0 and after a resume], "val_loss": [F, token NLL in eval
  mode on a fixed val subset], "val_loss_on": how many val pairs, "probes": [{"src", "ref", "src_tokens"
  (source axis: words or SentencePiece pieces + <eos>), "tgt_tokens" (decoder axis: <bos> + reference),
  "translations": [F greedy outputs, raw model tokens detokenized, no <unk> copying]}]}
- film.safetensors: one float16 tensor per probe and kind, named "p{probe:02d}.{kind}", of shape
  (F, L, h, i, j): the attention probabilities of every frame, layer and head, teacher-forced on the
  reference, so both axes are the same in every frame.

Recording runs the model's own forward in eval mode under no_grad (no dropout, so no random numbers
are drawn and training continues exactly as without the film) and puts the model back in train mode.
Shape letters: see model/__init__.py; F is the number of frames.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

from model.nn.hooks import attn_name
from model.nn.trace import patterns
from model.records import APP_EXAMPLES, KINDS  # APP_EXAMPLES: the film's first probes
from model.text.tokenize import detokenize, tokenize
from model.text.vocab import BOS, EOS, Vocab
from model.training.batch import collate
from model.training.data import token_batches
from model.training.film_file import ARRAYS_NAME, JSON_NAME, SCHEMA, FilmError, load_film

FIRST_STEP = 25  # frames at 0, 25, 50, 100, 200, ... (doubling) and at every epoch's end


def is_film_step(step: int) -> bool:
    """0, 25, 50, 100, 200, 400, ...: log-spaced, so the fast early changes get as many frames as the slow end."""
    if step == 0:
        return True
    if step < FIRST_STEP or step % FIRST_STEP:
        return False
    k = step // FIRST_STEP
    return k & (k - 1) == 0  # a power of two


@dataclass
class Probe:
    """One probe sentence pair, as the model reads it."""

    src: str
    ref: str
    src_tokens: list[str]  # words (or pieces, "▁" kept) + <eos>
    tgt_tokens: list[str]  # <bos> + reference words (or pieces)
    src_ids: list[int]  # with <eos>
    tgt_ids: list[int]  # reference ids, without <bos>/<eos>


def choose_probes(val_src: list[str], val_tgt: list[str], sv: Vocab, tv: Vocab, n_more: int = 10,
                  max_words: int = 12, src_lang: str = "de", tgt_lang: str = "en",
                  split: tuple[Callable[[str], list[str]], Callable[[str], list[str]]] | None = None) -> list[Probe]:
    """The app's examples found in val (with their references), then n_more val pairs spread evenly over it.

    The extra ones have at most max_words words per side, so a frame stays readable and the film small.
    `split` (source, target) turns a sentence into the model's tokens, e.g. SentencePiece pieces; the
    choice counts words either way, so models with different vocabularies get the same probe sentences.
    """
    split_src, split_tgt = split or ((lambda x: tokenize(x, src_lang)), (lambda x: tokenize(x, tgt_lang)))

    def make(i: int) -> Probe:
        s, t = split_src(val_src[i]), split_tgt(val_tgt[i])
        return Probe(val_src[i], val_tgt[i], s + [EOS], [BOS] + t, sv.encode(s) + [sv.eos_idx], tv.encode(t))

    where = {text: i for i, text in reversed(list(enumerate(val_src)))}  # the first occurrence of each line
    chosen = [where[e] for e in APP_EXAMPLES if e in where]
    short = [i for i in range(len(val_src)) if i not in chosen and val_src[i].strip() and val_tgt[i].strip()
             and len(tokenize(val_src[i], src_lang)) <= max_words and len(tokenize(val_tgt[i], tgt_lang)) <= max_words]
    if short and n_more > 0:
        picks = sorted({short[round(k * (len(short) - 1) / max(n_more - 1, 1))] for k in range(n_more)})
        chosen += picks
    return [make(i) for i in chosen]


@dataclass
class Frame:
    """What one frame holds before it is written."""

    step: int
    epoch: int | None
    train_loss: float | None
    val_loss: float
    translations: list[str]
    attn: list[dict[str, np.ndarray]]  # per probe: kind -> (L, h, i, j) float16


class FilmRecorder:
    """Records frames during training and writes the film after each one (so a stopped run keeps it)."""

    def __init__(self, folder: str | Path, probes: list[Probe], val_pairs, sv: Vocab, tv: Vocab, device,
                 max_tokens: int = 4000, tgt_lang: str = "en", detok: Callable[[list[str]], str] | None = None):
        """`detok` joins output tokens into text (SentencePiece's decoding for pieces; Moses by default)."""
        self.folder, self.probes, self.val_pairs = Path(folder), probes, val_pairs
        self.sv, self.tv, self.device, self.max_tokens, self.tgt_lang = sv, tv, device, max_tokens, tgt_lang
        self.detok = detok or (lambda tokens: detokenize(tokens, tgt_lang))
        self.frames: list[Frame] = []
        self.seconds = 0.0  # time spent recording, for the log
        self._loss_sum, self._loss_tokens = 0.0, 0

    def add_batch_loss(self, loss_sum: float, tokens: int) -> None:
        """Count a training batch's summed NLL towards the next frame's train loss."""
        self._loss_sum += loss_sum
        self._loss_tokens += tokens

    def due(self, step: int) -> bool:
        return is_film_step(step) and not any(f.step == step for f in self.frames)

    def keep_until(self, step: int) -> None:
        """On resume: load the film written so far and drop frames after the resumed step (they are redone)."""
        try:
            old = load_film(self.folder)
        except FilmError:
            return
        if [p["src"] for p in old.probes] != [p.src for p in self.probes]:
            return  # another probe set: start a new film rather than mix two
        for n in range(len(old)):
            if int(old.steps[n]) > step:
                continue
            self.frames.append(Frame(int(old.steps[n]), old.epochs[n],
                                     None if math.isnan(old.train_loss[n]) else float(old.train_loss[n]),
                                     float(old.val_loss[n]), [p["translations"][n] for p in old.probes],
                                     [{k: a[k][n] for k in KINDS} for a in old.attn]))

    @torch.no_grad()
    def record(self, model, step: int, epoch: int | None = None) -> Frame:
        """Trace every probe (eval mode), decode them greedily, measure the losses; then back to train mode."""
        import time

        from model.inference.decode import search  # here: decode imports the model, the trainer imports this module

        t0 = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            frame = self._frame(model, step, epoch, search)
        finally:
            model.train(was_training)
        existing = [n for n, f in enumerate(self.frames) if f.step == step]
        if existing:  # an epoch that ends on a log-spaced step: one frame, marked with the epoch
            frame.train_loss = self.frames[existing[0]].train_loss
            self.frames[existing[0]] = frame
        else:
            self.frames.append(frame)
        self.save()
        self.seconds += time.perf_counter() - t0
        return frame

    def _frame(self, model, step, epoch, search) -> Frame:
        pad, tv = model.cfg.pad_idx, self.tv
        pairs = [(p.src_ids, p.tgt_ids) for p in self.probes]
        # (b, s) sources and (b, t) decoder inputs <bos> + reference, padded to the longest
        src, tgt_in, _ = (x.to(self.device)
                          for x in collate(pairs, list(range(len(pairs))), pad, tv.bos_idx, tv.eos_idx))
        _, cache = model.run_with_cache(src, tgt_in, patterns)
        layers = model.cfg.kind_layers
        attn = []
        for n, p in enumerate(self.probes):
            s, t = len(p.src_tokens), len(p.tgt_tokens)
            size = {"enc_self": (s, s), "dec_self": (t, t), "cross": (t, s)}
            attn.append({k: torch.stack([cache[attn_name(k, l, "hook_pattern")][n, :, : size[k][0], : size[k][1]]
                                         for l in range(layers[k])]).cpu().half().numpy()
                         for k in KINDS})  # (L, h, i, j) without the padding
        limits = [min(model.cfg.max_len - 1, 2 * len(p.src_ids) + 10) for p in self.probes]  # as the Translator does
        decoded = search(model, src, tv.bos_idx, tv.eos_idx, limits)
        translations = [self.detok(tv.decode(d.ids)) for d in decoded]
        total, n_tok = 0.0, 0
        for batch in token_batches(self.val_pairs, self.max_tokens, shuffle=False):
            s_, ti, to = (x.to(self.device) for x in collate(self.val_pairs, batch, pad, tv.bos_idx, tv.eos_idx))
            logp = model(s_, ti)
            total += float(torch.nn.functional.nll_loss(logp.reshape(-1, logp.shape[-1]), to.reshape(-1),
                                                        ignore_index=pad, reduction="sum"))
            n_tok += int((to != pad).sum())
        train_loss = self._loss_sum / self._loss_tokens if self._loss_tokens else None
        self._loss_sum, self._loss_tokens = 0.0, 0
        return Frame(step, epoch, train_loss, total / max(n_tok, 1), translations, attn)

    def save(self) -> None:
        """Write film.safetensors and film.json (each replaced atomically)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        arrays = {f"p{n:02d}.{k}": np.ascontiguousarray(np.stack([f.attn[n][k] for f in self.frames]))
                  for n in range(len(self.probes)) for k in KINDS}
        first = self.frames[0].attn[0] if self.frames and self.probes else {}
        meta = {
            "schema": SCHEMA, "kinds": list(KINDS),
            "n_layers": {k: int(v.shape[0]) for k, v in first.items()},
            "n_heads": int(first["cross"].shape[1]) if first else 0,
            "steps": [f.step for f in self.frames], "epochs": [f.epoch for f in self.frames],
            "train_loss": [f.train_loss for f in self.frames], "val_loss": [f.val_loss for f in self.frames],
            "val_loss_on": f"{len(self.val_pairs)} val pairs",
            "probes": [{"src": p.src, "ref": p.ref, "src_tokens": p.src_tokens, "tgt_tokens": p.tgt_tokens,
                        "translations": [f.translations[n] for f in self.frames]} for n, p in enumerate(self.probes)],
        }
        tmp = self.folder / (ARRAYS_NAME + ".tmp")
        save_file(arrays, str(tmp), metadata={"schema": SCHEMA})
        os.replace(tmp, self.folder / ARRAYS_NAME)
        tmp = self.folder / (JSON_NAME + ".tmp")
        tmp.write_text(json.dumps(meta, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.folder / JSON_NAME)
