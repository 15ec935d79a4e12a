"""Checkpoint folders: model.safetensors, config.json, vocab.src.json, vocab.tgt.json, metrics.json.

Loading never unpickles, and every way a folder can be broken gives one CheckpointError that
names the file and says what to do.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import FORMAT_VERSION, ModelConfig
from .transformer import EncoderDecoder
from .vocab import Vocab

WEIGHTS, CONFIG, SRC_VOCAB, TGT_VOCAB, METRICS = (
    "model.safetensors", "config.json", "vocab.src.json", "vocab.tgt.json", "metrics.json"
)
REQUIRED = (WEIGHTS, CONFIG, SRC_VOCAB, TGT_VOCAB)
TIED_KEY = "generator.proj.weight"  # the same tensor as tgt_embed.lut.weight when tied
DEFAULT_CHECKPOINT = Path(__file__).resolve().parent.parent / "checkpoints" / "multi30k-de-en"


class CheckpointError(Exception):
    """A checkpoint folder that cannot be loaded; the message says which file and what to do."""


def save_checkpoint(
    folder: str | Path,
    model: EncoderDecoder,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    metrics: dict | None = None,
    half: bool = False,
) -> Path:
    """Write a complete checkpoint folder; `half` stores weights as float16 (loading restores float32)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {}
    for k, v in model.state_dict().items():
        if model.cfg.tie_weights and k == TIED_KEY:
            continue  # safetensors refuses shared tensors; the tie is restored on load
        v = v.detach().cpu().contiguous()
        state[k] = v.half() if half and v.is_floating_point() else v.clone()
    save_file(state, str(folder / WEIGHTS), metadata={"format_version": str(FORMAT_VERSION)})
    model.cfg.save(folder / CONFIG)
    src_vocab.save(folder / SRC_VOCAB)
    tgt_vocab.save(folder / TGT_VOCAB)
    (folder / METRICS).write_text(json.dumps(metrics or {}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def _fail(path: Path, what: str, fix: str) -> CheckpointError:
    return CheckpointError(f"{path}: {what}. {fix}")


def load_checkpoint(folder: str | Path) -> tuple[EncoderDecoder, Vocab, Vocab, dict]:
    """(model in eval mode, source vocab, target vocab, metrics) from a checkpoint folder."""
    folder = Path(folder)
    retrain = "Train one with `python -m model.train --data-dir DIR --out FOLDER` or choose another checkpoint folder."
    if not folder.is_dir():
        raise _fail(folder, "checkpoint folder does not exist", retrain)
    for name in REQUIRED:
        if not (folder / name).is_file():
            raise _fail(folder / name, "file is missing from the checkpoint folder", retrain)
    try:
        cfg = ModelConfig.load(folder / CONFIG)
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _fail(folder / CONFIG, f"is not a valid model config ({e})", "Restore it from the training output.") from e
    vocabs = []
    for name, size, side in ((SRC_VOCAB, cfg.src_vocab_size, "src"), (TGT_VOCAB, cfg.tgt_vocab_size, "tgt")):
        try:
            vocab = Vocab.load(folder / name)
        except (ValueError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _fail(folder / name, f"is not a valid vocabulary ({e})", "Restore it from the training output.") from e
        if len(vocab) != size:
            raise _fail(
                folder / name,
                f"has {len(vocab)} tokens but config.json says {side}_vocab_size = {size}",
                "The vocabulary and the config come from different trainings; copy both from the same one.",
            )
        vocabs.append(vocab)
    try:
        state = load_file(str(folder / WEIGHTS))  # safetensors: raw tensors, nothing executed
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise _fail(
            folder / WEIGHTS,
            f"cannot be read as safetensors ({e}); it is truncated, corrupted or not a safetensors file (pickles are never loaded)",
            "Restore the file from the repository (git checkout) or retrain.",
        ) from e
    model = EncoderDecoder(cfg)
    expected = model.state_dict()
    if cfg.tie_weights:
        state.pop(TIED_KEY, None)
        expected = {k: v for k, v in expected.items() if k != TIED_KEY}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(expected) & set(state) if tuple(expected[k].shape) != tuple(state[k].shape))
    if missing or unexpected or wrong:
        details = "; ".join(
            f"{label}: {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
            for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong))
            if keys
        )
        raise _fail(
            folder / WEIGHTS,
            f"does not match config.json ({details})",
            "The weights and config.json come from different models; copy both from the same training.",
        )
    bad = sorted(k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all()))
    if bad:
        raise _fail(folder / WEIGHTS, f"holds NaN or infinite values ({', '.join(bad[:3])})", "Restore the file or retrain.")
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    if cfg.tie_weights:
        state[TIED_KEY] = state["tgt_embed.lut.weight"]
    model.load_state_dict(state, strict=True)
    model.eval()
    metrics = {}
    if (folder / METRICS).is_file():
        try:
            metrics = json.loads((folder / METRICS).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _fail(folder / METRICS, f"is not valid JSON ({e})", "Restore it from the training output.") from e
    return model, vocabs[0], vocabs[1], metrics
