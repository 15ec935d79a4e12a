"""Import a Hugging Face translation model of any family we run into our checkpoint format.

    python -m model.import_hf FOLDER --out checkpoints/NAME [--src-lang CODE] [--tgt-lang CODE] [--prefix TEXT]

FOLDER is written by save_pretrained (model and tokenizer, with the tokenizer's SentencePiece model beside it as
the hub's folders have it: spiece.model or sentencepiece.bpe.model), or a hub id where the machine is online.
Families (model/io/hf_families.py): Marian (opus-mt, with its own vocabularies and two SentencePiece models; also
`python -m model.import_marian`), M2M100 and NLLB-200, mBART-50, T5 (v1.0, v1.1, mT5, Flan-T5, MADLAD-400) and FSMT
(model/io/hf_fsmt.py). The folder written holds the weights (safetensors), the config, the vocabularies, the
SentencePiece model (source.spm = target.spm but Marian's; FSMT: merges.txt, moses_bpe.json), a many-to-many model's
language codes (languages.json) and a model card in metrics.json: the app reads it without transformers.

Before writing, the import reads a few sentences beside the original: the same token ids as its tokenizer, and
log-probabilities within AGREE of its own, or nothing is written.

`transformers` is imported here only, inside the functions that need it: the app never loads it.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import torch

from model.io import hf_families as fam
from model.io import hf_t5gemma
from model.io.checkpoint import LANGUAGES, SRC_SPM, TGT_SPM, load_weights_into, save_checkpoint
from model.io.cli import command
from model.io.hf_families import WEIGHT_FILES, ImportRefused, read_json
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder, parameter_counts
from model.text.vocab import Vocab

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
METADATA = ("config.json", "source.spm", "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json",
            "generation_config.json", "README.md", "spiece.model", "sentencepiece.bpe.model", "tokenizer.json",
            "special_tokens_map.json", "added_tokens.json",  # Marian's, and the other families' (model.import_hf)
            "tokenizer.model",  # T5Gemma's: Gemma's SentencePiece model
            "vocab-src.json", "vocab-tgt.json", "merges.txt")  # FSMT's
AGREE = 1e-3  # largest |Δ log-probability| accepted in the check against transformers (float32 differs by ~1e-6)
SPM_FILES = ("spiece.model", "sentencepiece.bpe.model", "source.spm", "tokenizer.model")
PROBES = ("A short sentence to compare the two implementations, 1 2 3.", "Der Hund läuft im Park.")
LANG_CODE = re.compile(r"^[a-z]{2,3}(_[A-Za-z]{2,4})?$")


def load_transformers():
    """The transformers package, quiet (the outcome is one line); ImportRefused where it is not installed."""
    try:
        import transformers
    except ImportError:
        raise ImportRefused("the importer needs transformers: pip install -r requirements.txt") from None
    transformers.utils.logging.set_verbosity_error()  # the outcome is one line, not progress bars and notices
    transformers.utils.logging.disable_progress_bar()
    return transformers


def resolve_source(src: str) -> tuple[Path, str | None]:
    """(local folder, hub id or None): a folder as it is, a hub id downloaded (metadata and one weights file)."""
    path = Path(src)
    if path.is_dir():
        return path, None
    if path.exists() or not HUB_ID.match(src):
        raise ImportRefused(f"{src} is neither a folder nor a hub id such as Helsinki-NLP/opus-mt-de-en")
    try:
        from huggingface_hub import HfApi, constants, snapshot_download
        from huggingface_hub.utils import logging as hub_logging
    except ImportError:
        raise ImportRefused("downloading needs huggingface_hub (it comes with transformers): "
                            "pip install -r requirements.txt") from None
    hub_logging.set_verbosity_error()  # no retry chatter: the outcome is one line
    if not constants.HF_HUB_OFFLINE:
        _probe(src, constants.ENDPOINT)
    try:
        files = set(HfApi().list_repo_files(src))
        weights = next((w for w in WEIGHT_FILES if w in files), None)
        if weights is None:
            raise ImportRefused(f"{src} on the hub holds no {' or '.join(WEIGHT_FILES)}")
        folder = snapshot_download(src, allow_patterns=[m for m in METADATA if m in files] + [weights])
    except ImportRefused:
        raise
    except Exception as e:  # offline, unknown repository, gated: one line, never a traceback
        name = type(e).__name__
        if "NotFound" in name:
            raise ImportRefused(f"{src} was not found on the hub ({name})") from None
        raise ImportRefused(f"cannot download {src}: the hub cannot be reached ({name}); "
                            "import from a folder written by save_pretrained instead") from None
    return Path(folder), src


def _probe(src: str, endpoint: str) -> None:
    """Fail at once when the hub's host cannot be reached (the client would retry for half a minute)."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(endpoint)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=5).close()
    except OSError as e:
        raise ImportRefused(f"cannot download {src}: offline, {url.hostname} cannot be reached ({type(e).__name__}); "
                            "import from a folder written by save_pretrained instead") from None


def licence(folder: Path) -> str | None:
    """The `license:` field of the model card's front matter (README.md), when there is one."""
    card = folder / "README.md"
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    front = text.split("---", 2)[1] if text.startswith("---") and text.count("---") >= 2 else ""
    found = re.search(r"^license:\s*(\S+)", front, flags=re.MULTILINE)
    return found.group(1) if found else None


def spm_file(folder: Path) -> Path:
    found = next((folder / n for n in SPM_FILES if (folder / n).is_file()), None)
    if found is None:
        raise ImportRefused(f"{folder.name} holds no SentencePiece model ({' or '.join(SPM_FILES[:2])}): the app reads "
                            "text with it; copy it from the model's hub folder")
    return found


def vocabulary(tok, size: int, hf: dict) -> Vocab:
    """The model's `size` ids as the tokenizer names them; ids past the tokenizer's (embedding rows kept for
    padding to a round size) get names of their own that no text produces."""
    itos, seen = [], set()
    for i in range(size):
        try:
            t = tok.convert_ids_to_tokens(i)  # not `i < len(tok)`: M2M100's len() leaves its language tokens out
        except (IndexError, KeyError, ValueError, OverflowError):
            t = None
        if t is None or t in seen:
            t = f"<unused id {i}>"
        itos.append(t)
        seen.add(t)
    stoi = {t: i for i, t in enumerate(itos)}
    for role, key in (("pad", "pad_token_id"), ("eos", "eos_token_id")):
        token = str(getattr(tok, f"{role}_token"))
        if stoi.get(token) != hf[key]:
            raise ImportRefused(f"{key} is {hf[key]} but the tokenizer has {token} at {stoi.get(token)}")
    if str(tok.unk_token) not in stoi:
        raise ImportRefused(f"the vocabulary has no unknown token {tok.unk_token}")
    return Vocab(itos, {"unk": str(tok.unk_token), "pad": str(tok.pad_token), "bos": itos[hf["decoder_start_token_id"]],
                        "eos": str(tok.eos_token)})


def language_table(tok, vocab: Vocab) -> dict[str, str]:
    """code -> token of a many-to-many tokenizer: M2M100's __de__ for de; NLLB's and mBART-50's codes are tokens."""
    table = getattr(tok, "lang_code_to_token", None)
    if table is None:
        codes = getattr(tok, "lang_code_to_id", None) or list(getattr(tok, "extra_special_tokens", None) or [])
        table = {c: c for c in codes if LANG_CODE.match(str(c))}
    table = {str(c): str(t) for c, t in table.items() if str(t) in vocab}
    if not table:
        raise ImportRefused("the tokenizer names no language codes, but the model starts from language tokens")
    return table


def choose(given: str | None, tokenizer_default: str | None, table: dict[str, str], side: str) -> str:
    code = given or tokenizer_default
    if not code:
        raise ImportRefused(f"--{side}-lang is needed: the model reads {len(table)} languages, e.g. "
                            f"{', '.join(list(table)[:5])}")
    if code not in table:
        raise ImportRefused(f"--{side}-lang {code!r} is not one of the model's {len(table)} languages "
                            f"(e.g. {', '.join(list(table)[:5])})")
    return code


def _tokenizer(transformers, folder: Path, family: str, langs: tuple[str | None, str | None]):
    try:
        kw = {k: v for k, v in zip(("src_lang", "tgt_lang"), langs) if v} if family not in ("t5", "t5gemma") else {}
        return transformers.AutoTokenizer.from_pretrained(str(folder), **kw)
    except Exception as e:  # a missing or broken tokenizer: one line
        raise ImportRefused(f"{folder.name}: its tokenizer cannot be loaded ({type(e).__name__}: {str(e)[:160]})") \
            from None


def _check_reading(tr, tok, prefix: str) -> None:
    """Our SentencePiece reading must give the tokenizer's ids, or the app would feed the model other input."""
    for text in PROBES:
        ours, theirs = tr.prepare(text).ids, tok(prefix + text)["input_ids"]
        if ours != theirs:
            raise ImportRefused(f"the SentencePiece model reads {text!r} as {ours[:12]} but the tokenizer as "
                                f"{theirs[:12]}; not written")


def _agreement(hf_model, tr) -> float:
    """Largest |Δ log-probability| between the original and the import, teacher-forced on the probes."""
    worst = 0.0
    for text in PROBES:
        src = tr.prepare(text).ids
        tgt = [tr.cfg.decoder_start_idx] + tr.start_prefix + src[1:9]  # any target ids do for a comparison
        with torch.inference_mode():
            theirs = torch.log_softmax(hf_model(input_ids=torch.tensor([src]),
                                                decoder_input_ids=torch.tensor([tgt])).logits.float(), dim=-1)
            ours = tr.model(torch.tensor([src]), torch.tensor([tgt]))
        worst = max(worst, float((theirs - ours).abs().max()))
    return worst


def import_hf(src: str, out: str | Path, force: bool = False, src_lang: str | None = None,
              tgt_lang: str | None = None, prefix: str | None = None, family: str | None = None) -> dict:
    """Import SRC into the checkpoint folder `out`; returns the model card written to metrics.json. `family`
    "marian" (model.import_marian) reads SRC as a Marian folder, whose checks refuse any other model; None takes
    the family its config.json names."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise ImportRefused(f"{out} exists and is not empty: choose another --out or pass --force")
    folder, hub_id = resolve_source(src)
    if family != "marian":
        if not (folder / "config.json").is_file():
            raise ImportRefused(f"{folder / 'config.json'} is missing: SRC must be a folder written by save_pretrained")
        hf = read_json(folder / "config.json")
        family = fam.family_of(hf)
    if family == "marian":
        return _import_marian(src, folder, hub_id, out, force, (src_lang, tgt_lang))
    if family == "fsmt":  # Moses + BPE, a vocabulary per side: model/io/hf_fsmt.py
        return _import_fsmt(src, folder, hub_id, out, force, hf, (src_lang, tgt_lang))
    transformers = load_transformers()
    tok = _tokenizer(transformers, folder, family, (src_lang, tgt_lang))
    spm = spm_file(folder)
    hf, conv = (hf_t5gemma.with_ids(hf), hf_t5gemma) if family == "t5gemma" else (hf, fam)  # conv: where weights go
    fields = (fam.t5_config(hf) if family == "t5" else hf_t5gemma.config_fields(hf, tok) if family == "t5gemma"
              else fam.bart_like_config(hf, family))
    vocab = vocabulary(tok, int(hf["vocab_size"]), hf)
    table = language_table(tok, vocab) if fields.get("lang_tokens") else {}
    if table:
        langs = (choose(src_lang, getattr(tok, "src_lang", None), table, "src"),
                 choose(tgt_lang, getattr(tok, "tgt_lang", None), table, "tgt"))
    else:
        langs = (src_lang or "src", tgt_lang or "tgt")
    try:
        hf_model = getattr(transformers, fam.class_name(hf)).from_pretrained(
            str(folder), attn_implementation="eager").float().eval()
    except Exception as e:  # a broken weights file: one line
        raise ImportRefused(f"{folder.name}: the weights cannot be loaded by transformers "
                            f"({type(e).__name__}: {str(e)[:200]})") from None
    theirs = hf_model.state_dict()
    cfg = ModelConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), src_lang=langs[0], tgt_lang=langs[1],
                      tokenizer="sentencepiece", src_prefix=prefix or "", **conv.sharing(theirs, family), **fields)
    model = EncoderDecoder(cfg)
    try:
        load_weights_into(model, conv.convert(theirs, cfg, family))
    except (RuntimeError, KeyError) as e:
        raise ImportRefused(f"the weights do not fit the config: {str(e).splitlines()[0][:200]}") from None
    from model.inference.translator import Translator
    from model.text.pieces import PieceCodec

    codec = PieceCodec(spm, spm, set(vocab.specials.values()) | set(table.values()), language_codes=False)
    tr = Translator(model.eval(), vocab, vocab, pieces=codec, draft=False, languages=table)
    _check_reading(tr, tok, cfg.src_prefix)
    diff = _agrees(_agreement(hf_model, tr))
    card = model_card(hf_model, model, family, hub_id, src, folder, table, diff, transformers.__version__)
    _save(out, force, model, (vocab, vocab), card, card["class"], (spm, spm))
    if table:
        (out / LANGUAGES).write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return card


def _import_fsmt(src: str, folder: Path, hub_id: str | None, out: Path, force: bool, hf: dict,
                 langs: tuple[str | None, str | None]) -> dict:
    """An FSMT folder (model/io/hf_fsmt.py): Moses and BPE, a vocabulary per side (model/text/moses_bpe.py)."""
    from model.inference.translator import Translator
    from model.io import hf_fsmt

    transformers = load_transformers()
    tok, hf_model, model, vocabs, codec = hf_fsmt.load(transformers, folder, hf, langs)
    tr = Translator(model, *vocabs, pieces=codec, draft=False)
    hf_fsmt.check_reading(tr, tok, PROBES)
    diff = _agrees(hf_fsmt.agreement(hf_model, tr, PROBES))
    card = model_card(hf_model, model, "fsmt", hub_id, src, folder, {}, diff, transformers.__version__)
    card["sizes"]["vocabulary"] = [len(vocabs[0]), len(vocabs[1])]
    _save(out, force, model, vocabs, card, card["class"], ())  # no SentencePiece model: the codec's files below
    hf_fsmt.write_tokenizer(out, folder, tok)
    return card


def _import_marian(src: str, folder: Path, hub_id: str | None, out: Path, force: bool,
                   langs: tuple[str | None, str | None]) -> dict:
    """A Marian folder (model/io/hf_families.py's marian_*): its own vocabularies and SentencePiece models."""
    hf_cfg, tok_cfg, weights = fam.marian_files(folder)
    cfg, sv, tv = fam.marian_config(hf_cfg, tok_cfg, folder, fam.marian_languages(tok_cfg, hub_id, Path(src), langs))
    transformers = load_transformers()
    try:
        hf_model = transformers.MarianMTModel.from_pretrained(str(folder)).float().eval()
    except Exception as e:  # a broken weights file: one line
        raise ImportRefused(f"{weights} cannot be loaded by transformers "
                            f"({type(e).__name__}: {str(e)[:200]})") from None
    model = EncoderDecoder(cfg)
    state = fam.marian_weights(hf_model, cfg)
    try:
        load_weights_into(model, state)
    except RuntimeError as e:
        raise ImportRefused(f"{weights} does not fit the config: {str(e).splitlines()[0]}") from None
    model.eval()
    from model.text.pieces import PieceCodec

    codec = PieceCodec(folder / "source.spm", folder / "target.spm", set(sv.specials.values()))
    diff = _agrees(_marian_agreement(hf_model, model, sv.encode(codec.source_pieces(PROBES[0])) + [sv.eos_idx]))
    card = {
        "family": "marian",
        # a local folder by its name only: a checkpoint may be shipped, and must not hold this machine's paths
        "source": hub_id or f"local folder {Path(src).resolve().name}",
        "hub_id": hub_id,
        "licence": licence(folder) or "unknown: the source has no model card (README.md) with a license field",
        "parameters": int(sum(parameter_counts(model).values())),
        "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang,
        "vocabulary": len(sv) if cfg.share_embeddings else [len(sv), len(tv)],
        "transformers_version": transformers.__version__,
        "agreement_max_abs_log_prob": diff,
        "importer": "python -m model.import_marian",
    }
    _save(out, force, model, (sv, tv), card, "Marian model", (folder / "source.spm", folder / "target.spm"))
    return card


def _marian_agreement(hf_model, model: EncoderDecoder, src_ids: list[int]) -> float:
    """Largest |Δ log-probability| between a MarianMTModel and its import, teacher-forced on a few tokens."""
    cfg = model.cfg
    src = torch.tensor([src_ids])
    tgt = torch.tensor([[cfg.decoder_start_idx] + src_ids[:-1][:8]])  # any target ids do for a comparison
    with torch.inference_mode():
        theirs = torch.log_softmax(hf_model(input_ids=src, decoder_input_ids=tgt).logits.float(), dim=-1)
        ours = model(src, tgt)
    return float((theirs - ours).abs().max())


def _agrees(diff: float) -> float:
    """`diff`, or ImportRefused when the import disagrees with the original by more than AGREE."""
    if not diff <= AGREE:
        raise ImportRefused(f"the imported model disagrees with transformers (max |Δ log p| = {diff:.2e} > {AGREE}); "
                            "not written")
    return diff


def _save(out: Path, force: bool, model: EncoderDecoder, vocabs: tuple[Vocab, Vocab], card: dict, what: str,
          spms: tuple[Path, Path]) -> None:
    """The checkpoint folder: weights, config, vocabularies, metrics.json with the card, source.spm, target.spm."""
    metrics = {"model": {"parameters": card["parameters"], "config": model.cfg.to_dict()}, "imported": card,
               "note": f"{what} imported from {card['source']} (licence: {card['licence']}); "
                       "its quality is its authors', not measured here"}
    if out.exists() and force:
        shutil.rmtree(out)
    save_checkpoint(out, model, vocabs[0], vocabs[1], metrics)
    for spm, name in zip(spms, (SRC_SPM, TGT_SPM)):
        shutil.copyfile(spm, out / name)


def model_card(hf_model, model: EncoderDecoder, family: str, hub_id: str | None, src: str, folder: Path,
               table: dict, diff: float, version: str) -> dict:
    cfg = model.cfg
    return {
        "family": family, "class": type(hf_model).__name__, "model_type": hf_model.config.model_type,
        # a local folder by its name only: a checkpoint may be shipped, and must not hold this machine's paths
        "source": hub_id or f"local folder {Path(src).resolve().name}", "hub_id": hub_id,
        "licence": licence(folder) or "unknown: the source has no model card (README.md) with a license field",
        "parameters": int(sum(parameter_counts(model).values())),
        "sizes": {"d_model": cfg.d_model, "heads": cfg.n_heads, "encoder_layers": cfg.n_encoder_layers,
                  "decoder_layers": cfg.n_decoder_layers, "d_ff": cfg.d_ff, "d_head": cfg.d_k,
                  "vocabulary": cfg.src_vocab_size},
        "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang, "languages": len(table), "prefix": cfg.src_prefix,
        "transformers_version": version, "agreement_max_abs_log_prob": diff,
        "importer": "python -m model.import_hf",
    }


def summary(out: str, card: dict, family: bool = True) -> str:
    """The line a finished import prints (model.import_marian's names no family)."""
    what = f"{card.get('family', 'marian')}, " if family else ""
    return (f"wrote {out}: {what}{card['parameters']:,} parameters, {card['src_lang']}→{card['tgt_lang']}, licence "
            f"{card['licence']}; agrees with transformers within {card['agreement_max_abs_log_prob']:.1e}")


@command(ImportRefused)
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="folder from save_pretrained, or a hub id such as facebook/nllb-200-distilled-600M")
    ap.add_argument("--out", required=True, help="checkpoint folder to write, e.g. checkpoints/nllb-600m")
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--src-lang", help="source language code, the sidebar's default (NLLB: deu_Latn; M2M100: de)")
    ap.add_argument("--tgt-lang", help="target language code, the sidebar's default (NLLB: eng_Latn; mBART-50: en_XX)")
    ap.add_argument("--prefix", help="T5 family: the prompt put before every sentence, e.g. "
                                     "'translate German to English: '")
    args = ap.parse_args(argv)
    card = import_hf(args.src, args.out, args.force, args.src_lang, args.tgt_lang, args.prefix)
    print(summary(args.out, card))
    return 0


if __name__ == "__main__":
    sys.exit(main())
