"""FSMT (FSMTForConditionalGeneration: fairseq's WMT19 transformers, facebook/wmt19-de-en) in our one config, and where
its weights go in our network.

What differs from today's model, each a field of the one config: post-norm without final norms (norm_first False);
fairseq's sines (sines, then cosines) with position p at row p + pad + 1, as make_positions counts from padding_idx
+ 1 (pe_layout "fairseq", pos_offset); embeddings × √d_model where scale_embedding says so; a vocabulary per side
(vocab-src.json, vocab-tgt.json) with embeddings of its own (share_embeddings False unless both are one); the
decoder's output_projection, without a bias (final_logits_bias False), tied to the target embedding or not as the
weights have it; decoding starts from </s>. Text is read by Moses and byte-pair merges (model/text/moses_bpe.py,
config tokenizer "moses_bpe"), not SentencePiece. model/io/import_hf.py runs these functions and checks the result.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from model.io.hf_families import ImportRefused, fairseq_shape, layer_map, read_json
from model.nn.config import ModelConfig
from model.nn.layers import sinusoidal_encoding
from model.nn.transformer import EncoderDecoder
from model.text.moses_bpe import MERGES_FILE, MosesBpeCodec, read_merges, write_options
from model.text.vocab import Vocab

SRC_VOCAB, TGT_VOCAB = "vocab-src.json", "vocab-tgt.json"  # FSMTTokenizer's files, beside merges.txt
TOKENIZER_FILES = (SRC_VOCAB, TGT_VOCAB, MERGES_FILE)


def fsmt_config(hf: dict) -> dict:
    """ModelConfig fields (without vocabularies and languages) of a saved FSMTConfig; ImportRefused naming the field
    our network cannot run exactly."""
    act, d_model, heads, ids = fairseq_shape(hf, "relu")
    return dict(
        d_model=d_model, n_heads=heads, n_encoder_layers=int(hf["encoder_layers"]),
        n_decoder_layers=int(hf["decoder_layers"]), d_ff=int(hf["encoder_ffn_dim"]),
        dropout=float(hf.get("dropout", 0.1)), attn_dropout=float(hf.get("attention_dropout", 0.0)),
        max_len=int(hf.get("max_position_embeddings", 1024)), norm_first=False, activation=act,
        scale_embedding=bool(hf.get("scale_embedding", True)), final_logits_bias=False, positions="sinusoidal",
        pe_layout="fairseq", pos_offset=ids["pad_idx"] + 1, tokenizer="moses_bpe", **ids)


def tokenizer_files(folder: Path) -> None:
    """ImportRefused naming the first of FSMTTokenizer's files that the folder lacks."""
    for name in TOKENIZER_FILES:
        if not (folder / name).is_file():
            raise ImportRefused(f"{folder / name} is missing: an FSMT folder holds the tokenizer's "
                                f"{', '.join(TOKENIZER_FILES)} (FSMTTokenizer.save_pretrained writes them)")


def _itos(path: Path, size: int, field: str) -> list[str]:
    stoi = read_json(path)
    if not isinstance(stoi, dict) or sorted(v for v in stoi.values() if isinstance(v, int)) != list(range(len(stoi))):
        raise ImportRefused(f"{path.name} does not number its tokens 0..{len(stoi) - 1} once each")
    if len(stoi) != size:  # a row past the file would be read as <unk> by FSMTTokenizer: not one name per id
        raise ImportRefused(f"{field} is {size} but {path.name} holds {len(stoi)} tokens")
    return [t for t, _ in sorted(stoi.items(), key=lambda kv: kv[1])]


def fsmt_vocabularies(folder: Path, hf: dict, tok) -> tuple[Vocab, Vocab]:
    """(source, target) vocabularies from the tokenizer's files; the specials at the same ids in both, those of
    the config."""
    specials = {"unk": str(tok.unk_token), "pad": str(tok.pad_token), "eos": str(tok.sep_token)}
    vocabs = []
    for name, field in ((SRC_VOCAB, "src_vocab_size"), (TGT_VOCAB, "tgt_vocab_size")):
        itos = _itos(folder / name, int(hf[field]), field)
        stoi = {t: i for i, t in enumerate(itos)}
        for token in tok.all_special_tokens:  # the tokenizer names a special by its source id, also when decoding
            if stoi.get(token) != tok.convert_tokens_to_ids(token):
                raise ImportRefused(f"{name} has {token} at {stoi.get(token)}, the tokenizer at "
                                    f"{tok.convert_tokens_to_ids(token)}: the specials must share their ids")
        for role, key in (("pad", "pad_token_id"), ("eos", "eos_token_id")):
            if stoi.get(specials[role]) != hf[key]:
                raise ImportRefused(f"{key} is {hf[key]} but {name} has {specials[role]} at {stoi.get(specials[role])}")
        if not 0 <= hf["decoder_start_token_id"] < len(itos):
            raise ImportRefused(f"decoder_start_token_id {hf['decoder_start_token_id']} is outside {name}")
        vocabs.append(Vocab(itos, {**specials, "bos": itos[hf["decoder_start_token_id"]]}))
    return vocabs[0], vocabs[1]


def tokenizer_options(tok) -> dict:
    """MosesBpeCodec's settings as the loaded FSMTTokenizer has them; ImportRefused for what the codec lacks."""
    specials = [str(t) for t in tok.all_special_tokens]
    for token in tok.added_tokens_decoder.values():
        if str(token) not in specials or token.lstrip or token.rstrip or token.single_word:
            raise ImportRefused(f"the tokenizer's added token {str(token)!r} is not supported: only its specials, "
                                "kept whole, are read as the tokenizer reads them")
    return {"langs": (str(tok.src_lang), str(tok.tgt_lang)), "specials": specials,
            "lowercase": bool(tok.do_lower_case), "clean_up": bool(tok.clean_up_tokenization_spaces)}


def fsmt_codec(folder: Path, tok, vocabs: tuple[Vocab, Vocab]) -> MosesBpeCodec:
    """The codec the checkpoint will read text with, from the source folder's merges."""
    o = tokenizer_options(tok)
    return MosesBpeCodec(read_merges(folder / MERGES_FILE), o["langs"], (vocabs[0].stoi, vocabs[1].stoi),
                         o["specials"], o["lowercase"], o["clean_up"])


def write_tokenizer(out: Path, folder: Path, tok) -> None:
    """The codec's files in the checkpoint folder: FSMT's merges as they are, and its settings."""
    o = tokenizer_options(tok)
    shutil.copyfile(folder / MERGES_FILE, out / MERGES_FILE)
    write_options(out, o["langs"], o["specials"], o["lowercase"], o["clean_up"])


def sharing(theirs: dict[str, torch.Tensor], vocabs: tuple[Vocab, Vocab]) -> dict[str, bool]:
    """share_embeddings (one vocabulary and one matrix) and tie_weights as the loaded weights have them."""
    enc, dec = theirs["model.encoder.embed_tokens.weight"], theirs["model.decoder.embed_tokens.weight"]
    head = theirs["model.decoder.output_projection.weight"]
    same = vocabs[0].itos == vocabs[1].itos and enc.shape == dec.shape and bool(torch.equal(enc, dec))
    return {"share_embeddings": same, "tie_weights": head.shape == dec.shape and bool(torch.equal(head, dec))}


def fsmt_weights(theirs: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict (each shared tensor once, in float32) from an FSMTForConditionalGeneration's; ImportRefused
    where its position table is not the fairseq sines we compute."""
    theirs = {k: v.detach().float().cpu() for k, v in theirs.items()}
    ours = {a: theirs[b] for a, b in layer_map(cfg.n_encoder_layers, cfg.n_decoder_layers).items()}
    ours["src_embed.lut.weight"] = theirs["model.encoder.embed_tokens.weight"]
    if not cfg.share_embeddings:
        ours["tgt_embed.lut.weight"] = theirs["model.decoder.embed_tokens.weight"]
    if not cfg.tie_weights:
        ours["generator.proj.weight"] = theirs["model.decoder.output_projection.weight"]
    table = sinusoidal_encoding(cfg.max_len + cfg.pos_offset, cfg.d_model, "fairseq")
    for side in ("encoder", "decoder"):  # rows before pos_offset (the padding's) are never read
        stored = theirs.get(f"model.{side}.embed_positions.weight")
        n = min(len(table), 0 if stored is None else len(stored))
        if stored is not None and (stored[cfg.pos_offset:n] - table[cfg.pos_offset:n]).abs().max() > 1e-5:
            raise ImportRefused(f"model.{side}.embed_positions holds another table than fairseq's sines")
    return ours


def fsmt_model(hf: dict, theirs: dict[str, torch.Tensor], vocabs: tuple[Vocab, Vocab],
               langs: tuple[str, str]) -> EncoderDecoder:
    """Our network holding the FSMT's weights (ImportRefused where they do not fit)."""
    from model.io.checkpoint import load_weights_into

    cfg = ModelConfig(src_vocab_size=len(vocabs[0]), tgt_vocab_size=len(vocabs[1]), src_lang=langs[0],
                      tgt_lang=langs[1], **sharing(theirs, vocabs), **fsmt_config(hf))
    model = EncoderDecoder(cfg)
    try:
        load_weights_into(model, fsmt_weights(theirs, cfg))
    except (RuntimeError, KeyError) as e:
        raise ImportRefused(f"the weights do not fit the config: {str(e).splitlines()[0][:200]}") from None
    return model.eval()


def load(transformers, folder: Path, hf: dict, langs: tuple[str | None, str | None]):
    """(tokenizer, the original with eager attention, our network, (source, target) vocabularies, codec) of an FSMT
    folder; what cannot be run exactly is refused before the weights load."""
    fsmt_config(hf)
    tokenizer_files(folder)
    try:
        tok = transformers.FSMTTokenizer.from_pretrained(str(folder))
    except Exception as e:  # a broken tokenizer: one line
        raise ImportRefused(f"{folder.name}: its tokenizer cannot be loaded ({type(e).__name__}: {str(e)[:160]})") \
            from None
    vocabs = fsmt_vocabularies(folder, hf, tok)
    codec = fsmt_codec(folder, tok, vocabs)
    try:
        hf_model = transformers.FSMTForConditionalGeneration.from_pretrained(
            str(folder), attn_implementation="eager").float().eval()
    except Exception as e:  # a broken weights file: one line
        raise ImportRefused(f"{folder.name}: the weights cannot be loaded by transformers "
                            f"({type(e).__name__}: {str(e)[:200]})") from None
    model = fsmt_model(hf, hf_model.state_dict(), vocabs, (langs[0] or tok.src_lang, langs[1] or tok.tgt_lang))
    return tok, hf_model, model, vocabs, codec


def check_reading(tr, tok, probes: tuple[str, ...]) -> None:
    """Our Moses + BPE reading must give the tokenizer's ids, or the app would feed the model other input."""
    for text in probes:
        ours, theirs = tr.prepare(text).ids, tok(text)["input_ids"]
        if ours != theirs:
            raise ImportRefused(f"Moses + BPE here reads {text!r} as {ours[:12]} but the tokenizer as {theirs[:12]}; "
                                "not written")


def agreement(hf_model, tr, probes: tuple[str, ...]) -> float:
    """Largest |Δ log-probability| between the original and the import, teacher-forced on the probes (the target:
    the start token, then the probe's first target pieces). use_cache=False: with its cache on (the config's
    default) FSMTModel makes no causal mask, as generate() feeds one position at a time, and a teacher-forced pass
    would let every position see the later ones."""
    worst = 0.0
    for text in probes:
        src = tr.prepare(text).ids
        tgt = [tr.cfg.decoder_start_idx] + tr.tgt_vocab.encode(tr.target_tokens(text))[:8]
        with torch.inference_mode():
            theirs = torch.log_softmax(hf_model(input_ids=torch.tensor([src]),
                                                decoder_input_ids=torch.tensor([tgt]),
                                                use_cache=False).logits.float(), dim=-1)
            ours = tr.model(torch.tensor([src]), torch.tensor([tgt]))
        worst = max(worst, float((theirs - ours).abs().max()))
    return worst
