"""Shipped files hold no machine's absolute path: a checkpoint folder, a doc or a benchmark's result written on one
machine must not show another user where that machine kept its files (and the Heads page shows what the reports
hold)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT = {".json", ".md", ".log", ".txt", ".py", ".toml", ".yaml", ".yml", ".csv"}
# A path from a filesystem root into someone's files. Docs may show a command writing to /tmp (any machine has
# one); checkpoints may not name any absolute path.
MACHINE_PATH = re.compile(r"(?<![\w.~])(/(?:home|root|work|Users|mnt|srv|opt|var)/[^\s\"']*|[A-Za-z]:\\\\[^\s\"']+)")
ANY_ABSOLUTE = re.compile(r"(?<![\w.~])(/(?:home|root|work|Users|mnt|srv|opt|var|tmp)/[^\s\"']*"
                          r"|[A-Za-z]:\\\\[^\s\"']+)")


def text_files(folder: Path):
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in TEXT)


@pytest.mark.parametrize("folder, pattern", [("checkpoints", ANY_ABSOLUTE), ("docs", MACHINE_PATH),
                                             ("benchmarks/results", ANY_ABSOLUTE)],
                         ids=["checkpoints", "docs", "benchmark results"])
def test_no_machine_path_in_shipped_files(folder, pattern):
    files = text_files(ROOT / folder)
    assert files, f"nothing to check under {folder}/"
    found = [(str(p.relative_to(ROOT)), m.group(0)[:80]) for p in files
             for m in pattern.finditer(p.read_text(encoding="utf-8", errors="replace"))]
    assert found == [], f"absolute paths in shipped files: {found[:5]}"


def test_the_pattern_finds_what_it_should():
    assert ANY_ABSOLUTE.search('"src": "/work/shared/data/multi30k/val.de.gz"')
    assert ANY_ABSOLUTE.search("wrote /tmp/pytest-of-root/x")
    assert MACHINE_PATH.search("C:\\\\Users\\\\me\\\\atlas")
    assert not MACHINE_PATH.search("python -m model.train --out /tmp/smoke")
    assert not ANY_ABSOLUTE.search("multi30k/val.de.gz, ../shared/data/multi30k")
