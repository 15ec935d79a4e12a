"""Import a Hugging Face translation model of any family we run into our checkpoint format.

    python -m model.import_hf FOLDER --out checkpoints/NAME [--src-lang CODE] [--tgt-lang CODE] [--prefix TEXT]

FOLDER is written by save_pretrained (model and tokenizer, with the tokenizer's SentencePiece model beside it as
the hub's folders have it: spiece.model or sentencepiece.bpe.model), or a hub id where the machine is online.
Families (model/io/hf_families.py): Marian (opus-mt; model/io/import_marian.py does the work), M2M100 and NLLB-200,
mBART-50, and T5 (v1.0, v1.1, mT5, Flan-T5, MADLAD-400). The folder written holds the weights (safetensors), the
config, the vocabularies, the SentencePiece model (source.spm = target.spm), a many-to-many model's language codes
(languages.json) and a model card in metrics.json: the app reads it with safetensors and SentencePiece alone.

Before writing, the import reads a few sentences beside the original: the same token ids as its tokenizer, and
log-probabilities within AGREE of its own, or nothing is written.
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
from model.io.checkpoint import LANGUAGES, SRC_SPM, TGT_SPM, load_weights_into, save_checkpoint
from model.io.import_marian import AGREE, ImportRefused, _json, import_marian, licence, resolve_source
from model.nn.config import ModelConfig
from model.nn.transformer import EncoderDecoder, parameter_counts
from model.text.vocab import Vocab

SPM_FILES = ("spiece.model", "sentencepiece.bpe.model", "source.spm")
PROBES = ("A short sentence to compare the two implementations, 1 2 3.", "Der Hund läuft im Park.")
LANG_CODE = re.compile(r"^[a-z]{2,3}(_[A-Za-z]{2,4})?$")


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportRefused("the importer needs transformers: pip install -r requirements.txt") from None
    transformers.utils.logging.set_verbosity_error()  # the outcome is one line, not progress bars and notices
    transformers.utils.logging.disable_progress_bar()
    return transformers


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
        kw = {k: v for k, v in zip(("src_lang", "tgt_lang"), langs) if v} if family != "t5" else {}
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
              tgt_lang: str | None = None, prefix: str | None = None) -> dict:
    """Import SRC into the checkpoint folder `out`; returns the model card written to metrics.json."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise ImportRefused(f"{out} exists and is not empty: choose another --out or pass --force")
    folder, hub_id = resolve_source(src)
    if not (folder / "config.json").is_file():
        raise ImportRefused(f"{folder / 'config.json'} is missing: SRC must be a folder written by save_pretrained")
    hf = _json(folder / "config.json")
    family = fam.family_of(hf)
    if family == "marian":
        return import_marian(src, out, force, src_lang, tgt_lang)
    transformers = _transformers()
    tok = _tokenizer(transformers, folder, family, (src_lang, tgt_lang))
    spm = spm_file(folder)
    fields = fam.t5_config(hf) if family == "t5" else fam.bart_like_config(hf, family)
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
                      tokenizer="sentencepiece", src_prefix=prefix or "", **fam.sharing(theirs, family), **fields)
    model = EncoderDecoder(cfg)
    try:
        load_weights_into(model, fam.convert(theirs, cfg, family))
    except (RuntimeError, KeyError) as e:
        raise ImportRefused(f"the weights do not fit the config: {str(e).splitlines()[0][:200]}") from None
    from model.inference.translator import Translator
    from model.text.pieces import PieceCodec

    codec = PieceCodec(spm, spm, set(vocab.specials.values()) | set(table.values()), language_codes=False)
    tr = Translator(model.eval(), vocab, vocab, pieces=codec, draft=False, languages=table)
    _check_reading(tr, tok, cfg.src_prefix)
    diff = _agreement(hf_model, tr)
    if not diff <= AGREE:
        raise ImportRefused(f"the imported model disagrees with transformers (max |Δ log p| = {diff:.2e} > {AGREE}); "
                            "not written")
    card = model_card(hf_model, model, family, hub_id, src, folder, table, diff, transformers.__version__)
    metrics = {"model": {"parameters": card["parameters"], "config": cfg.to_dict()}, "imported": card,
               "note": f"{card['class']} imported from {card['source']} (licence: {card['licence']}); "
                       "its quality is its authors', not measured here"}
    if out.exists() and force:
        shutil.rmtree(out)
    save_checkpoint(out, model, vocab, vocab, metrics)
    for name in (SRC_SPM, TGT_SPM):
        shutil.copyfile(spm, out / name)
    if table:
        (out / LANGUAGES).write_text(json.dumps(table, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return card


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
    try:
        card = import_hf(args.src, args.out, args.force, args.src_lang, args.tgt_lang, args.prefix)
    except ImportRefused as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {card.get('family', 'marian')}, {card['parameters']:,} parameters, "
          f"{card['src_lang']}→{card['tgt_lang']}, licence {card['licence']}; agrees with transformers within "
          f"{card['agreement_max_abs_log_prob']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
