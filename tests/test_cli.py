"""Every command line as a user runs it: a fresh `python -m model.X` process, several times, each must exit 0
and have done its job (its output checked against the same work done here, in-process).

One run proves little: a process can write its file and still die at exit (a thread left inside torch when the
interpreter shut down aborted `python -m model.export` with exit 134 in most runs). So export (with the shipped
checkpoint, the one whose first trace starts the int8 draft's thread; a tiny model gets no draft) and translate
run 10 times each; analyze, attribution, import_marian and evaluate, slower (spaCy, gradients, transformers),
3 times each. Every process imports torch (a few seconds), so the runs go two at a time, one per core of the
2-core CI machine; each run still is its own process with its own exit. Data: the tiny checkpoint of
tests/tiny_checkpoint.py and its four sentence pairs, written here; import_marian imports a tiny Marian model
built here (tests/model/test_marian.py's build_marian).

The --help test runs in-process: every option of every command line has a help text, and each help shows a
full example.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MANY, FEW = 10, 3  # runs of the commands that failed (export, translate) and of the slower ones
MAX_LEN = 3
CLIS = ["translate", "export", "attribution", "analyze", "evaluate", "import_marian", "train"]


def run_cli(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"model.{module}", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def run_many(n: int, module: str, args_of) -> list[subprocess.CompletedProcess]:
    """`n` runs of `python -m model.<module> *args_of(i)`, two at a time; asserts that every one exited 0."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = list(pool.map(lambda i: run_cli(module, *args_of(i)), range(n)))
    codes = [p.returncode for p in procs]
    bad = next((p for p in procs if p.returncode != 0), None)
    assert codes == [0] * n, f"model.{module} exit codes {codes}; a failed run's stderr:\n{bad.stderr[-2000:]}"
    for p in procs:
        assert "terminate called" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    return procs


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(tiny checkpoint folder, German file, English file, its Translator)."""
    from model.inference.translator import Translator
    from tiny_checkpoint import ENGLISH, GERMAN, make_tiny_checkpoint

    root = tmp_path_factory.mktemp("cli")
    folder = make_tiny_checkpoint(root / "tiny")
    de, en = root / "pairs.de", root / "pairs.en"
    de.write_text("\n".join(GERMAN) + "\n", encoding="utf-8")
    en.write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    return folder, de, en, Translator.from_checkpoint(folder)


# ---------------------------------------------------------------------------------------------------------------
# every option has a help text, every help an example

def help_text(module: str, capsys, monkeypatch) -> str:
    import importlib

    monkeypatch.setenv("COLUMNS", "120")  # argparse wraps to the terminal; a fixed width parses the same everywhere
    main = importlib.import_module(f"model.{module}").main
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def entries_without_help(text: str) -> list[str]:
    """The argument entries of a --help text (positional and options, every group) that have no help text.

    An entry is a line indented by two spaces after the first section heading; its help follows on the same line
    after two or more spaces, or on the next line, indented deeper.
    """
    lines = text.splitlines()
    start = next(i for i, s in enumerate(lines) if s in ("positional arguments:", "options:", "optional arguments:"))
    missing = []
    for i in range(start, len(lines)):
        line = lines[i]
        if not re.match(r"^  \S", line):
            continue
        same_line = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if len(same_line) < 2 and not re.match(r"^ {3,}\S", following):
            missing.append(line.strip())
    return missing


def test_entries_without_help_finds_a_missing_help():
    text = ("usage: x\n\ndesc:\n  not an entry\n\noptions:\n  -h, --help   show this help\n  --a A\n"
            "  --bb BB\n                   help of bb\n  --c C        help of c\n  --d\n\ngroup (x):\n  --e E\n")
    assert entries_without_help(text) == ["--a A", "--d", "--e E"]


@pytest.mark.parametrize("module", CLIS)
def test_every_option_has_help_and_the_help_an_example(module, capsys, monkeypatch):
    text = help_text(module, capsys, monkeypatch)
    assert entries_without_help(text) == [], f"model.{module} --help: options without a help text"
    description = text.split("\n\n", 1)[1]  # after the usage block
    examples = [s for s in description.splitlines() if f"python -m model.{module} " in s and "--" in s]
    assert examples, f"model.{module} --help shows no example command line"


@pytest.mark.parametrize("module, args, message", [
    ("translate", ["Ein Hund.", "--max-len", "0"], "--max-len must be at least 1"),
    ("export", ["Ein Hund.", "--top-k", "-2"], "--top-k must be at least 1"),
    ("export", ["Ein Hund.", "--max-len", "-1"], "--max-len must be 0 (automatic) or more"),
])
def test_bad_numbers_get_a_clear_message(module, args, message, capsys):
    import importlib

    with pytest.raises(SystemExit) as e:
        importlib.import_module(f"model.{module}").main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_translate_file_keeps_to_max_len_in_process(tiny, capsys):
    """The quick twin of the subprocess test below: --max-len reaches the batch translation of --file."""
    from model import translate

    folder, de, _, tr = tiny
    lines = de.read_text(encoding="utf-8").splitlines()
    assert translate.main(["--file", str(de), "--checkpoint", str(folder), "--max-len", str(MAX_LEN)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [tr.translate(s, max_len=MAX_LEN).text for s in lines] != [tr.translate(s).text for s in lines]
    assert all(len(tr.target_tokens(s)) <= MAX_LEN for s in out), out


# ---------------------------------------------------------------------------------------------------------------
# each command line, run again and again

@pytest.mark.slow
@pytest.mark.checkpoint
def test_export_exits_0_every_time_and_writes_the_trace(tmp_path):
    """The shipped checkpoint's first trace starts the draft thread: every process must still exit 0."""
    from model.inference.translator import Translator
    from model.io.checkpoint import DEFAULT_CHECKPOINT
    from model.io.export import SCHEMA

    sentence = "Ein Hund läuft im Schnee."
    expected = Translator.from_checkpoint(DEFAULT_CHECKPOINT, draft=False).trace(sentence)
    run_many(MANY, "export", lambda i: [sentence, "--checkpoint", DEFAULT_CHECKPOINT, "--out", tmp_path / f"{i}.json"])
    for i in range(MANY):
        data = json.loads((tmp_path / f"{i}.json").read_text(encoding="utf-8"))
        assert data["schema"] == SCHEMA and data["translation"] == expected.text
        assert data["tgt_tokens"] == expected.trace.tgt_tokens
        assert len(data["cross"][0][0]) == len(data["tgt_tokens"])


@pytest.mark.slow
def test_translate_file_exits_0_every_time_and_keeps_to_max_len(tiny):
    folder, de, _, tr = tiny
    lines = de.read_text(encoding="utf-8").splitlines()
    assert any(len(tr.translate(s).raw_tokens) > MAX_LEN for s in lines)  # the limit has something to cut
    beams = [1 + i % 2 for i in range(MANY)]  # greedy and beam search in turn
    procs = run_many(MANY, "translate", lambda i: ["--file", de, "--checkpoint", folder, "--max-len", MAX_LEN,
                                                   "--beam", beams[i]])
    for beam, p in zip(beams, procs):
        out = p.stdout.splitlines()
        assert out == [tr.translate(s, beam=beam, max_len=MAX_LEN).text for s in lines]
        assert all(len(tr.target_tokens(s)) <= MAX_LEN for s in out), out


@pytest.mark.slow
def test_analyze_exits_0_every_time_and_writes_its_report(tiny, tmp_path):
    from model.analysis.report import SCHEMA

    folder, de, en, tr = tiny
    procs = run_many(FEW, "analyze", lambda i: ["--checkpoint", folder, "--src", de, "--ref", en,
                                                "--out", tmp_path / f"{i}.json", "--threads", 1])
    for i, p in enumerate(procs):
        path = tmp_path / f"{i}.json"
        assert f"wrote {path}" in p.stdout
        report = json.loads(path.read_text(encoding="utf-8"))
        assert report["schema"] == SCHEMA and report["corpus"]["sentences"] == len(de.read_text().splitlines())
        assert report["kinds"]["cross"]["heads"] == tr.cfg.n_heads


@pytest.mark.slow
def test_attribution_exits_0_every_time_and_writes_its_report(tiny, tmp_path):
    from model.analysis.faithfulness import SCHEMA

    folder, de, _, _ = tiny
    procs = run_many(FEW, "attribution", lambda i: ["--checkpoint", folder, "--src", de, "--limit", 2, "--ks", 1,
                                                    "--out", tmp_path / f"{i}.json"])
    for i, p in enumerate(procs):
        path = tmp_path / f"{i}.json"
        assert f"wrote {path}" in p.stdout
        report = json.loads(path.read_text(encoding="utf-8"))
        assert report["schema"] == SCHEMA and report["n_sentences"] == 2 and report["n_tokens"] > 0


@pytest.mark.slow
def test_evaluate_exits_0_every_time_and_scores_the_translations(tiny, tmp_path):
    from model.training.evaluate import bleu_scores

    folder, de, en, tr = tiny
    src, ref = de.read_text().splitlines(), en.read_text().splitlines()
    hyps = tr.translate_batch(src)
    procs = run_many(FEW, "evaluate", lambda i: ["--checkpoint", folder, "--src", de, "--ref", en, "--json",
                                                 "--out", tmp_path / f"{i}.en"])
    for i, p in enumerate(procs):
        assert json.loads(p.stdout) == bleu_scores(hyps, ref)
        assert (tmp_path / f"{i}.en").read_text(encoding="utf-8").splitlines() == hyps


@pytest.mark.slow
def test_import_marian_exits_0_every_time_and_writes_a_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from test_marian import SENTENCES, build_marian

    from model.inference.translator import Translator

    marian = build_marian(tmp_path / "hf")
    procs = run_many(FEW, "import_marian", lambda i: [marian, "--out", tmp_path / f"ours{i}"])
    first = Translator.from_checkpoint(tmp_path / "ours0")
    assert first.cfg.tokenizer == "sentencepiece"
    for i, p in enumerate(procs):
        assert p.stdout.startswith(f"wrote {tmp_path / f'ours{i}'}:") and "agrees with transformers" in p.stdout
        ours = Translator.from_checkpoint(tmp_path / f"ours{i}")
        assert [ours.translate(s).text for s in SENTENCES[:3]] == [first.translate(s).text for s in SENTENCES[:3]]
