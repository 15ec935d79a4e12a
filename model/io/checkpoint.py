"""The checkpoint format, in one place: folders, weights files, averaging and metrics.json.

A folder holds model.safetensors, config.json, vocab.src.json, vocab.tgt.json and metrics.json, and for a
SentencePiece model (config tokenizer "sentencepiece": an imported Marian model, or one trained with
`model.train --tokenizer sentencepiece`) also source.spm and target.spm, for Moses + BPE (tokenizer "moses_bpe":
an imported FSMT) merges.txt and moses_bpe.json (model/text/moses_bpe.py). Weights files (the folder's and
training's per-epoch ones) store each shared tensor once: without the generator matrix when it is tied to the
target embedding, and without the target embedding when it is the source's (share_embeddings); safetensors
refuses shared tensors, and model_state restores the ties. Keys are the module paths (encoder.0.attn.w_q.weight);
weights stored under the names before (encoder_layers.0.self_attn.w_q.weight: the shipped folders) are read under
today's (transformer.renamed_state). Loading never unpickles, and every way a folder can be broken gives one
CheckpointError that names the file and says what to do.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from model.nn.config import FORMAT_VERSION, ModelConfig
from model.nn.transformer import EncoderDecoder, renamed_state
from model.records import CheckpointError
from model.text.moses_bpe import MERGES_FILE, OPTIONS_FILE
from model.text.vocab import Vocab

WEIGHTS, CONFIG, SRC_VOCAB, TGT_VOCAB, METRICS = (
    "model.safetensors", "config.json", "vocab.src.json", "vocab.tgt.json", "metrics.json"
)
REQUIRED = (WEIGHTS, CONFIG, SRC_VOCAB, TGT_VOCAB)
SRC_SPM, TGT_SPM = "source.spm", "target.spm"  # SentencePiece models, for tokenizer "sentencepiece"
LANGUAGES = "languages.json"  # a many-to-many model's language codes -> tokens (config.lang_tokens)
TIED_KEY = "generator.proj.weight"  # the same tensor as tgt_embed.lut.weight when tied
SHARED_KEY = "tgt_embed.lut.weight"  # the same tensor as src_embed.lut.weight when share_embeddings
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[2] / "checkpoints" / "multi30k-de-en"


def aliases(cfg: ModelConfig) -> dict[str, str]:
    """Keys that are another key's tensor (not stored) -> that key, resolved to one that is stored."""
    out = {}
    if cfg.share_embeddings:
        out[SHARED_KEY] = "src_embed.lut.weight"
    if cfg.tie_weights:
        out[TIED_KEY] = out.get(SHARED_KEY, SHARED_KEY)
    return out


def required_files(cfg: ModelConfig) -> tuple[str, ...]:
    """The files a folder with this config must hold."""
    return (REQUIRED + ((SRC_SPM, TGT_SPM) if cfg.tokenizer == "sentencepiece" else ())
            + ((MERGES_FILE, OPTIONS_FILE) if cfg.tokenizer == "moses_bpe" else ())
            + ((LANGUAGES,) if cfg.lang_tokens else ()))


def weights_state(model: EncoderDecoder, half: bool = False) -> dict[str, torch.Tensor]:
    """What a weights file stores: CPU copies of the state dict, shared tensors once (see aliases)."""
    state = {}
    skip = aliases(model.cfg)
    for k, v in model.state_dict().items():
        if k in skip:
            continue  # the same tensor as another key's; restored by model_state
        v = v.detach().cpu().contiguous()
        state[k] = v.half() if half and v.is_floating_point() else v.clone()
    return state


def model_state(cfg: ModelConfig, stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A stored state (any float dtype, old or today's names) as load_state_dict wants it: float32, today's names,
    the tie restored."""
    state = {k: v.float() if v.is_floating_point() else v for k, v in renamed_state(stored).items()}
    links = aliases(cfg)
    for k in links:
        state.pop(k, None)  # a stored copy of a shared matrix would be a second, separate tensor
    for k, source in links.items():
        if source in state:
            state[k] = state[source]
    return state


def save_weights(model: EncoderDecoder, path: str | Path, half: bool = False) -> Path:
    """Write the model's weights to one safetensors file (a checkpoint's, or one epoch's in training)."""
    save_file(weights_state(model, half), str(path), metadata={"format_version": str(FORMAT_VERSION)})
    return Path(path)


def average_weights(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean (in float64, returned as float32) of weights files written by save_weights."""
    if not paths:
        raise ValueError("nothing to average: no weights files given")
    total: dict[str, torch.Tensor] = {}
    for p in paths:
        state = renamed_state(load_file(str(p)))  # epochs saved before and after a rename average alike
        if total and set(state) != set(total):
            raise ValueError(f"{p}: holds other tensors than {paths[0]}; cannot average them")
        for k, v in state.items():
            total[k] = total[k] + v.double() if k in total else v.double()
    return {k: (v / len(paths)).float() for k, v in total.items()}


def load_weights_into(model: EncoderDecoder, stored: dict[str, torch.Tensor]) -> EncoderDecoder:
    """Copy a stored state (from a weights file or average_weights) into the model, strictly."""
    model.load_state_dict(model_state(model.cfg, stored), strict=True)
    return model


def assemble(cfg: ModelConfig, stored: dict[str, torch.Tensor], folder: Path) -> EncoderDecoder:
    """The model whose parameters are the stored tensors themselves: built on the meta device (no memory, no random
    initialisation), each parameter then assigned, not copied, so a 600M-parameter load holds the weights once and
    spends no time drawing numbers it throws away; the ties restored. (The fixed position table, a buffer that is
    not stored, is computed on the CPU while the network is built: sinusoidal_encoding.)"""
    with torch.device("meta"):
        model = EncoderDecoder(cfg, init=False)
    stored = renamed_state(stored)
    _check_weights(folder, model, stored)
    model.load_state_dict(model_state(cfg, stored), strict=True, assign=True)
    model.tie()  # assign gave each tied name a Parameter of its own over the one tensor
    return model


def write_metrics(folder: str | Path, metrics: dict) -> Path:
    """Write (or overwrite) the folder's metrics.json."""
    path = Path(folder) / METRICS
    path.write_text(json.dumps(metrics or {}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


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
    save_weights(model, folder / WEIGHTS, half)
    model.cfg.save(folder / CONFIG)  # .spm files: the importer copies them, the trainer writes them first
    src_vocab.save(folder / SRC_VOCAB)
    tgt_vocab.save(folder / TGT_VOCAB)
    write_metrics(folder, metrics or {})
    return folder


def _fail(path: Path, what: str, fix: str) -> CheckpointError:
    return CheckpointError(f"{path}: {what}. {fix}")


def load_checkpoint(folder: str | Path) -> tuple[EncoderDecoder, Vocab, Vocab, dict]:
    """(model in eval mode, source vocab, target vocab, metrics) from a checkpoint folder."""
    folder = Path(folder)
    cfg = _read_config(folder)
    src_vocab, tgt_vocab = _read_vocabularies(folder, cfg)
    state = _read_weights(folder)
    model = assemble(cfg, state, folder)
    model.eval()
    metrics = {}
    if (folder / METRICS).is_file():
        try:
            metrics = json.loads((folder / METRICS).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _fail(folder / METRICS, f"is not valid JSON ({e})", "Restore it from the training output.") from e
    return model, src_vocab, tgt_vocab, metrics


def _read_config(folder: Path) -> ModelConfig:
    """The folder's config, once the folder and the files every checkpoint needs are there."""
    retrain = "Train one with `python -m model.train --data-dir DIR --out FOLDER` or choose another checkpoint folder."
    if not folder.is_dir():
        raise _fail(folder, "checkpoint folder does not exist", retrain)
    for name in REQUIRED:
        if not (folder / name).is_file():
            raise _fail(folder / name, "file is missing from the checkpoint folder", retrain)
    try:
        cfg = ModelConfig.load(folder / CONFIG)
    except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise _fail(folder / CONFIG, f"is not a valid model config ({e})",
                    "Restore it from the training output.") from e
    for name in required_files(cfg):
        if not (folder / name).is_file():
            raise _fail(folder / name,
                        f"file is missing from the checkpoint folder (config.json says tokenizer {cfg.tokenizer!r})",
                        "Copy it from where the model came from, or import the model again.")
    return cfg


def _read_vocabularies(folder: Path, cfg: ModelConfig) -> tuple[Vocab, Vocab]:
    """(source, target) vocabularies, checked against the config's sizes and special ids."""
    vocabs = []
    for name, size, side in ((SRC_VOCAB, cfg.src_vocab_size, "src"), (TGT_VOCAB, cfg.tgt_vocab_size, "tgt")):
        try:
            vocab = Vocab.load(folder / name)
        except (ValueError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise _fail(folder / name, f"is not a valid vocabulary ({e})",
                        "Restore it from the training output.") from e
        if len(vocab) != size:
            raise _fail(
                folder / name,
                f"has {len(vocab)} tokens but config.json says {side}_vocab_size = {size}",
                "The vocabulary and the config come from different trainings; copy both from the same one.",
            )
        vocabs.append(vocab)
    tv = vocabs[1]
    disagree = [f"{name} = {want} but the target vocabulary's {role} is {have}"
                for name, want, role, have in (("pad_idx", cfg.pad_idx, "<pad>", tv.pad_idx),
                                               ("decoder_start_idx", cfg.decoder_start_idx, "start token", tv.bos_idx),
                                               ("eos_idx", cfg.eos_idx, "end token", tv.eos_idx))
                if want != have]
    if disagree:
        raise _fail(folder / CONFIG, "disagrees with vocab.tgt.json (" + "; ".join(disagree) + ")",
                    "The vocabulary and the config come from different models; copy both from the same one.")
    return vocabs[0], vocabs[1]


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """The folder's weights file as stored tensors."""
    try:
        state = load_file(str(folder / WEIGHTS))  # safetensors: raw tensors, nothing executed
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise _fail(
            folder / WEIGHTS,
            f"cannot be read as safetensors ({e}); it is truncated, corrupted or not a safetensors file "
            "(pickles are never loaded)",
            "Restore the file from the repository (git checkout) or retrain.",
        ) from e
    return state


def _finite(t: torch.Tensor) -> bool:
    """Every value finite. A NaN or an infinity anywhere makes the sum non-finite, so a finite sum settles it in
    one vectorized pass (torch.isfinite(...).all() is many times slower on a CPU: most of a 600M model's load); only
    a sum that overflowed needs the element-wise check."""
    return bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all())


def _check_weights(folder: Path, model: EncoderDecoder, state: dict[str, torch.Tensor]) -> None:
    """Stored tensors must be exactly the model's (a shared one once, dropped here if stored twice) and finite."""
    links = aliases(model.cfg)
    for k in links:
        state.pop(k, None)
    expected = {k: v for k, v in model.state_dict().items() if k not in links}
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
    bad = sorted(k for k, v in state.items() if v.is_floating_point() and not _finite(v))
    if bad:
        raise _fail(folder / WEIGHTS, f"holds NaN or infinite values ({', '.join(bad[:3])})",
                    "Restore the file or retrain.")


def read_languages(folder: str | Path) -> dict[str, str]:
    """A checkpoint's languages.json: {code: token}; CheckpointError when missing or broken."""
    path = Path(folder) / LANGUAGES
    try:
        codes = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path.name} in {Path(folder).name} cannot be read ({type(e).__name__}): a "
                              "many-to-many model needs its language codes; import the model again") from None
    if not isinstance(codes, dict) or not codes or not all(isinstance(v, str) for v in codes.values()):
        raise CheckpointError(f"{path.name} in {Path(folder).name} must map language codes to tokens")
    return {str(k): v for k, v in codes.items()}
