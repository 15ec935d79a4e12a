"""The head report under torchrun: 2 ranks on gloo split the sentences and write the 1-process report (to 1e-6)."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from model.analysis import sharded
from model.analysis.measures import HeadStats
from model.training.distributed import Ranks
from tiny_checkpoint import make_tiny_checkpoint

pytestmark = pytest.mark.slow  # torchrun starts processes of its own: tens of seconds

ROOT = Path(__file__).resolve().parents[2]

# 72 distinct pairs (6 subjects x 4 verbs x 3 places): more than one decode chunk (64), so that both ranks decode
SUBJECTS = [("Ein Mann", "A man"), ("Eine Frau", "A woman"), ("Ein Hund", "A dog"), ("Ein Kind", "A child"),
            ("Ein brauner Hund", "A brown dog"), ("Ein alter Mann", "An old man")]
VERBS = [("läuft", "runs"), ("schläft", "sleeps"), ("spielt", "plays"), ("rennt", "is running")]
PLACES = [("im Schnee.", "in the snow."), ("auf einem Sofa.", "on a couch."), ("im hohen Gras", "in the tall grass")]
PAIRS = [(f"{s} {v} {p}", f"{s2} {v2} {p2}") for s, s2 in SUBJECTS for v, v2 in VERBS for p, p2 in PLACES]
LEFT_OUT = {("timings",), ("created",), ("settings", "ranks")}  # the clock, and the one setting that differs


def start_report(cmd: list[str], folder: Path, src: Path, ref: Path, out: Path, log: Path) -> subprocess.Popen:
    """`cmd -m model.analyze ...` writing the report to `out`, its stdout and stderr to `log` (no pipe to fill)."""
    args = ["-m", "model.analyze", "--checkpoint", str(folder), "--src", str(src), "--ref", str(ref),
            "--out", str(out), "--batch-tokens", "60", "--pruning-limit", "0", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    with open(log, "w", encoding="utf-8") as f:
        return subprocess.Popen(cmd + args, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)  # its own process group, with torchrun's ranks


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """(report of one process, report of 2 ranks, the 2 ranks' output, checkpoint folder, 2-rank output folder)."""
    base = tmp_path_factory.mktemp("sharded_report")
    folder = make_tiny_checkpoint(base / "demo")
    src, ref = base / "corpus.de", base / "corpus.en"
    src.write_text("\n".join(de for de, _ in PAIRS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(en for _, en in PAIRS) + "\n", encoding="utf-8")
    one, two = base / "one", base / "two"
    # Both at once: the start-up of three processes and torchrun's own overlaps
    logs = [base / "one.log", base / "two.log"]
    runs = [start_report([sys.executable], folder, src, ref, one / "report.json", logs[0]),
            start_report([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
                         folder, src, ref, two / "report.json", logs[1])]
    try:
        for proc, log in zip(runs, logs):
            proc.wait(timeout=300)
            assert proc.returncode == 0, log.read_text(encoding="utf-8")[-3000:]
    finally:  # a failed or hung run takes its ranks with it
        for proc in runs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    load = lambda p: json.loads(p.read_text(encoding="utf-8"))  # noqa: E731
    return load(one / "report.json"), load(two / "report.json"), logs[1].read_text(encoding="utf-8"), folder, two


def differences(a, b, path=()) -> list[str]:
    """Where two JSON trees differ: other keys or lengths, other strings, or numbers more than 1e-6 apart."""
    if path in LEFT_OUT:
        return []
    where = "/".join(map(str, path))
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], path + (k,))]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for n, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, path + (n,))]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return [] if math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6) else [f"{where}: {a} != {b}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]


def test_two_ranks_write_the_one_process_report(reports):
    one, two, _, _, _ = reports
    assert one["settings"]["ranks"] == 1 and two["settings"]["ranks"] == 2
    assert one["corpus"]["sentences"] == len(PAIRS) and one["pruning"]["sentences"] == len(PAIRS)
    assert one["ablation"]["sentences"] == len(PAIRS)
    assert differences(one, two) == []


def test_the_comparison_sees_a_changed_number(reports):
    one, _, _, _, _ = reports
    changed = json.loads(json.dumps(one))
    changed["kinds"]["cross"]["measures"]["entropy"][1][2] += 1e-5
    assert differences(one, changed) == ["kinds/cross/measures/entropy/1/2: "
                                         f"{one['kinds']['cross']['measures']['entropy'][1][2]} != "
                                         f"{changed['kinds']['cross']['measures']['entropy'][1][2]}"]


def test_only_rank_0_writes_and_prints(reports):
    _, _, output, folder, two = reports
    assert [p.name for p in two.rglob("*") if p.is_file()] == ["report.json"]
    assert not (folder / "head_report.json").exists()
    assert output.count("wrote ") == 1


def test_combined_head_stats_equal_one_fed_every_batch():
    """Two HeadStats fed disjoint halves of the batches, combined, give one HeadStats' result (every field combined)."""
    rng = np.random.default_rng(0)
    whole, halves = HeadStats("cross", 2, 3, 8), [HeadStats("cross", 2, 3, 8) for _ in range(2)]
    for n in range(4):  # 4 batches of 2 sentences, 5 queries, 6 keys
        p = rng.random((2, 2, 3, 5, 6))
        p /= p.sum(-1, keepdims=True)
        batch = (p, np.ones((2, 5, 6), bool), np.ones((2, 5), bool), np.array([6, 6]), np.array([5, 5]),
                 np.array([4, -1]), rng.random((2, 6)) > 0.7, np.array([True, True]), np.array([2 * n, 2 * n + 1]))
        whole.add(*batch)
        halves[n % 2].add(*batch)
    combined = HeadStats.combine(halves)
    fields = set(HeadStats._summed) | set(HeadStats._listed) | {"sums", "sent_conf", "kind", "L", "h", "self_attn",
                                                                  "src_eos"}
    assert set(vars(whole)) == fields  # a field combine() does not know would be lost on several ranks
    a, b = whole.result(), combined.result()
    for name in a["measures"]:
        np.testing.assert_allclose(b["measures"][name], a["measures"][name], rtol=1e-12, atol=0)
    assert a["top_sentences"] == b["top_sentences"] and a["best_layer"] == b["best_layer"]
    assert (combined.sent_conf >= 0).all() and (halves[0].sent_conf < 0).any()


def test_each_rank_gets_every_world_th_batch():
    shares = [sharded.my_batches(7, Ranks(rank=r, world=3)) for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4], [2, 5]]
    assert sharded.my_batches(7, Ranks()) == list(range(7))


def test_each_rank_decodes_whole_chunks_of_the_one_process_batching(monkeypatch):
    """ShardedTranslator hands each rank every world-th chunk of translate_batch's batches (sorted by length)."""
    class Fake:
        tgt_lang = "en"

        def prepare(self, text):
            return SimpleNamespace(ids=text.split())

        def translate_batch(self, texts, batch_size=3, progress=None, off_heads=None):
            self.calls.append((list(texts), batch_size, off_heads))
            return [t.upper() for t in texts]

    texts = [" ".join("w" * (1 + (n * 7) % 5)) + f" s{n}" for n in range(8)]
    monkeypatch.setattr(sharded, "gather", lambda obj, ranks: [obj])  # each rank sees its own share only
    order = sorted(range(8), key=lambda i: len(texts[i].split()))
    seen = []
    for rank in range(2):
        fake = Fake()
        fake.calls = []
        shard = sharded.ShardedTranslator(fake, Ranks(rank=rank, world=2))
        out = shard.translate_batch(texts, off_heads=[1])
        (decoded, batch_size, off), = fake.calls
        assert batch_size == 3 and off == [1] and shard.tgt_lang == "en"  # the rest is the translator's
        chunks = [order[s : s + 3] for s in range(0, 8, 3)][rank::2]
        assert decoded == [texts[i] for chunk in chunks for i in chunk]
        assert [i for i, h in enumerate(out) if h] == sorted(i for chunk in chunks for i in chunk)
        assert all(out[i] == texts[i].upper() for i in range(8) if out[i])
        seen += decoded
    assert sorted(seen) == sorted(texts)
