"""The docs say what the code is, read from the source (no module is imported):

- docs/architecture.md names every module of views/, viz/, model/ and atlas/ in its package's section, and lists
  every `python -m model.<name>` command line;
- docs/settings.md has one table row for every ATLAS_* setting the code reads, and no other;
- docs/architecture.md's map of threads, caches and process-wide patches names every module that starts a thread,
  keeps a cache or patches a library;
- every path that docs/architecture.md, docs/extending.md and docs/settings.md name exists.

How a doc names a path. Inline code (`...`) that looks like a path: it holds a `/` or ends in a code or doc file's
extension (.py, .md, ...), and no component is a placeholder in capitals (`checkpoints/NAME`). It is read relative
to the repository, to the package of the section it stands in (`### \\`views/\\`: ...` holds `plumbing/state.py`),
or to a folder named earlier in the same table row or paragraph (`pages/overview.py`, `embeddings.py` names
views/pages/embeddings.py; `rooms/` ... `codes.py` names views/rooms/codes.py). In a ```text block that draws a
package's tree (its first line is `model/`), a line indented by two spaces starts an entry (`  nn/   ...`, or a file),
the lines indented further continue it, and every `name.py` in an entry of a folder `room/` names `model/room/name.py`
(in a file's entry, `model/name.py`).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "architecture.md"
SETTINGS = DOCS / "settings.md"
EXTENDING = DOCS / "extending.md"
PACKAGES = ("views", "viz", "model", "atlas")  # whose every module the architecture names
CODE = ("app.py", "views", "viz", "model", "deploy", "atlas")  # what the server and its tools run
MAP = "## Threads, caches and process-wide patches"
COMMANDS = "## Command lines"

FILE_EXTENSIONS = (".py", ".md", ".ipynb", ".toml", ".txt", ".ini", ".cfg", ".sh")
PATHLIKE = re.compile(r"\.?[\w-][\w.-]*(?:/[\w.-]+)*/?")
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")
INLINE = re.compile(r"`([^`\n]+)`")


# --------------------------------------------------------------------------------------------- reading the code

def code_files() -> list[Path]:
    out = []
    for name in CODE:
        path = ROOT / name
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def holds_code(path: Path) -> bool:
    """Does the file define a function or a class (an `__init__.py` that only has a docstring or imports does not)?"""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)


def modules(package: str) -> list[str]:
    """Every module of the package, as a repository path. An `__init__.py` counts only where it holds code
    (views/rooms/__init__.py: the rooms' records and interface; model/__init__.py: `from model import Translator`;
    atlas/__init__.py: `atlas.load`); one that is a docstring, or empty, names nothing worth naming."""
    return [rel(p) for p in sorted((ROOT / package).rglob("*.py"))
            if p.name != "__init__.py" or holds_code(p)]


def command_lines() -> set[str]:
    """The names of `python -m model.<name>`: each model/*.py with a `main` (defined or imported) and a
    `if __name__ == "__main__":` block."""
    out = set()
    for path in sorted((ROOT / "model").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body) or any(
            isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == "main" for a in n.names) for n in tree.body)
        runs = any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test) and "__main__" in ast.unparse(n.test)
                   for n in tree.body)
        if has_main and runs:
            out.add(path.stem)
    return out


def settings_in_code() -> dict[str, set[str]]:
    """{ATLAS_* name: the files that hold it}: a string literal whose whole value is the name, as code names an
    environment variable (`os.environ.get("ATLAS_PREFETCH", "1")`, `DATA_ENV = "ATLAS_DATA_DIR"`, an environment
    handed to a child process). Messages and docstrings that mention a name in a sentence do not count."""
    out: dict[str, set[str]] = {}
    for path in code_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"ATLAS_[A-Z0-9_]+",
                                                                                               node.value):
                out.setdefault(node.value, set()).add(rel(path))
    return out


CONCURRENCY = re.compile(r"threading \. Thread \(|ThreadPoolExecutor \(|\bcache_resource\b|\bcache_data\b"
                         r"|\blru_cache\b|\bfunctools \. cache\b|@ cache\b")
_SKIPPED_TOKENS = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def code_text(path: Path) -> str:
    """The file's tokens, strings and comments left out, one space apart (so a docstring naming a cache is no cache)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return " ".join(t.string for t in tokens if t.type not in _SKIPPED_TOKENS and t.string.strip())


def threads_and_caches() -> dict[str, list[str]]:
    """{module: what it has}: `threading.Thread(`, `ThreadPoolExecutor(`, `st.cache_resource`, `st.cache_data`,
    `functools.lru_cache` / `functools.cache`, in code (not in a string or a comment)."""
    out = {}
    for path in code_files():
        found = sorted({m.group(0).replace(" ", "") for m in CONCURRENCY.finditer(code_text(path))})
        if found:
            out[rel(path)] = found
    return out


PER_SESSION = ("st.session_state", "st.query_params")  # Streamlit's own per-session objects: not process-wide


def patches() -> dict[str, list[str]]:
    """{module: what it assigns}: an assignment to an attribute of something imported (`plotly.io.to_json = ...`,
    `setattr(module, ...)`), or to an item of one (`os.environ[...] = ...`): each changes the process for everyone."""
    out: dict[str, list[str]] = {}
    for path in code_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.asname or a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t for target in node.targets
                           for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                targets = [ast.Attribute(node.args[0], "?")] if node.args else []
            for target in targets:
                if not isinstance(target, (ast.Attribute, ast.Subscript)):
                    continue
                base = target.value
                while isinstance(base, (ast.Attribute, ast.Subscript)):
                    base = base.value
                said = ast.unparse(target)
                if isinstance(base, ast.Name) and base.id in imported and not said.startswith(PER_SESSION):
                    out.setdefault(rel(path), []).append(said)
    return out


# --------------------------------------------------------------------------------------------- reading the docs

def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading line, body) for every heading of level 1 to 3 (a body runs to the next of those); lines inside
    fenced code blocks are never headings."""
    out, heading, body, fenced = [], "", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,3} ", line):
            out.append((heading, "\n".join(body)))
            heading, body = line, []
        else:
            body.append(line)
    out.append((heading, "\n".join(body)))
    return out


def section(text: str, start: str) -> str:
    found = [body for heading, body in sections(text) if heading.startswith(start)]
    assert len(found) == 1, f"expected one section starting {start!r}, found {len(found)}"
    return found[0]


def package_section(package: str) -> str:
    return section(text_of(ARCHITECTURE), f"### `{package}/`")


def blocks(body: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(text blocks: a table row, a list item or a paragraph each; fenced blocks: (info string, lines))."""
    texts, fences, current, fence = [], [], [], None
    for line in body.splitlines():
        if fence is not None:
            if line.startswith("```"):
                fences.append(fence)
                fence = None
            else:
                fence[1].append(line)
            continue
        if line.startswith("```"):
            texts.append("\n".join(current))
            current, fence = [], (line[3:].strip(), [])
        elif not line.strip():
            texts.append("\n".join(current))
            current = []
        elif line.startswith("|") or re.match(r"\s*(?:[-*]|\d+\.) ", line):
            texts.append("\n".join(current))
            current = [line]
        else:
            current.append(line)
    texts.append("\n".join(current))
    return [t for t in texts if t.strip()], fences


def is_path(token: str) -> bool:
    token = token.strip()
    if not PATHLIKE.fullmatch(token) or token.startswith("../"):
        return False
    if any(PLACEHOLDER.fullmatch(part) for part in token.strip("/").split("/")):
        return False
    return "/" in token or token.endswith(FILE_EXTENSIONS)


def resolved(token: str, bases: list[Path]) -> list[Path]:
    """Where a named path is, read against each base folder in turn: every existing place."""
    return [b / token.strip("/") for b in bases if (b / token.strip("/")).exists()]


def named_paths(body: str, package: str | None) -> tuple[set[str], list[str]]:
    """(repository paths the section names, the path-like names that are nowhere)."""
    found, missing = set(), []
    base = [ROOT] + ([ROOT / package] if package else [])
    texts, fences = blocks(body)
    for block in texts:
        folders: list[Path] = []
        for token in INLINE.findall(block):
            if not is_path(token):
                continue
            places = resolved(token, base + folders)
            if not places:
                missing.append(token)
            for place in places:
                found.add(rel(place))
                folders.append(place if place.is_dir() else place.parent)
    for info, lines in fences:
        if info == "text" and lines and re.fullmatch(r"\w+/", lines[0].strip()):
            tree_found, tree_missing = tree_paths(lines)
            found |= tree_found
            missing += tree_missing
    return found, missing


def tree_paths(lines: list[str]) -> tuple[set[str], list[str]]:
    """The paths a package tree names (see the module's docstring)."""
    root = ROOT / lines[0].strip().strip("/")
    entries: list[list[str]] = []
    for line in lines[1:]:
        if re.match(r"  \S", line):
            entries.append([line])
        elif re.match(r"   +\S", line) and entries:
            entries[-1].append(line)
    found, missing = set(), []
    for entry in entries:
        text = " ".join(entry)
        head = text.split()[0]
        folder = root / head.strip("/") if head.endswith("/") else root
        if head.endswith("/"):
            (found.add(rel(folder)) if folder.is_dir() else missing.append(head))
        for token in re.findall(r"(?<![\w./-])([\w./-]+\.py)\b", text):
            places = resolved(token, [folder, root, ROOT])
            found |= {rel(p) for p in places}
            missing += [] if places else [token]
    return found, missing


def links(text: str) -> list[str]:
    """Relative link targets of a Markdown text (no web address, no anchor of the page itself)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:|#", t)]


# --------------------------------------------------------------------------------------------- the tests

@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_in_the_architecture_doc(package):
    named, _ = named_paths(package_section(package), package)
    missing = [m for m in modules(package) if m not in named]
    assert not missing, (f"docs/architecture.md's section ### `{package}/` does not name {missing}: add each to its "
                         "table (or, for model/, to the tree), by its path relative to the package")


def test_the_architecture_doc_lists_every_command_line():
    listed = set(re.findall(r"python -m model\.(\w+)", section(text_of(ARCHITECTURE), COMMANDS)))
    code = command_lines()
    assert code, "found no command line: the test reads model/*.py wrongly"
    assert not code - listed, f"{COMMANDS} lacks python -m model.{sorted(code - listed)}"
    assert not listed - code, f"{COMMANDS} lists model.{sorted(listed - code)}, which is no command line any more"


def _settings_rows() -> tuple[list[list[str]], int]:
    """(the rows of docs/settings.md that name an ATLAS_* setting, split into cells; how many tables hold one)."""
    rows, tables, counted = [], 0, False  # counted: the table the line is in has been counted
    for line in text_of(SETTINGS).splitlines():
        if not line.startswith("|"):
            counted = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if re.fullmatch(r"`ATLAS_[A-Z0-9_]+`", cells[0]):
            rows.append(cells)
            if not counted:
                tables, counted = tables + 1, True
    return rows, tables


def test_every_setting_is_in_the_settings_table():
    code = settings_in_code()
    assert {"ATLAS_CHECKPOINT_DIR", "ATLAS_SPEED_OFF"} <= set(code), "the test no longer finds settings it should"
    rows, tables = _settings_rows()
    assert tables == 1, f"docs/settings.md: every setting goes in one table, not {tables}"
    documented = [cells[0].strip("`") for cells in rows]
    assert len(documented) == len(set(documented)), "a setting has two rows"
    assert not set(code) - set(documented), f"docs/settings.md lacks {sorted(set(code) - set(documented))}"
    assert not set(documented) - set(code), (f"docs/settings.md documents {sorted(set(documented) - set(code))}, "
                                             "which the code no longer reads")


def test_each_setting_row_says_what_it_does_its_default_and_who_reads_it():
    code = settings_in_code()
    for cells in _settings_rows()[0]:
        name = cells[0].strip("`")
        assert len(cells) == 4 and all(cells), f"{name}: | name | what it does | default | read (or set) by |"
        readers = {t for t in INLINE.findall(cells[3]) if t.endswith(".py")}
        assert readers == code.get(name, set()), (f"{name}: the row names {sorted(readers)} as its readers, the code "
                                                  f"has it in {sorted(code.get(name, set()))}")


def test_the_settings_page_is_linked_from_the_readme_and_the_architecture():
    readme = text_of(ROOT / "README.md")
    assert "docs/settings.md" in links(readme) and "docs/extending.md" in links(readme)
    assert "settings.md" in links(text_of(ARCHITECTURE)) and "extending.md" in links(text_of(ARCHITECTURE))
    assert len(readme.splitlines()) <= 300


def test_the_map_names_every_thread_and_cache():
    map_ = set(INLINE.findall(section(text_of(ARCHITECTURE), MAP)))
    found = threads_and_caches()
    assert {"views/plumbing/jobs.py", "views/plumbing/state.py"} <= set(found), "the grep finds too little"
    missing = {module: what for module, what in found.items() if module not in map_}
    assert not missing, f"docs/architecture.md's {MAP!r} does not name these modules (as `path`): {missing}"


def test_the_map_names_every_process_wide_patch():
    map_ = set(INLINE.findall(section(text_of(ARCHITECTURE), MAP)))
    found = patches()
    assert "views/plumbing/streamlit_internals.py" in found, "the search no longer finds plotly.io.to_json's patch"
    missing = {module: what for module, what in found.items() if module not in map_}
    assert not missing, f"docs/architecture.md's {MAP!r} does not name these modules (as `path`): {missing}"


@pytest.mark.parametrize("doc", [ARCHITECTURE, EXTENDING, SETTINGS], ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc):
    missing = []
    for heading, body in sections(text_of(doc)):
        package = re.match(r"### `(\w+)/`", heading)
        missing += named_paths(body, package.group(1) if package else None)[1]
    assert not missing, f"{doc.name} names paths that are not in the repository: {missing}"


@pytest.mark.parametrize("doc", [ARCHITECTURE, EXTENDING, SETTINGS], ids=lambda p: p.name)
def test_every_link_of_a_doc_leads_somewhere(doc):
    broken = [t for t in links(text_of(doc)) if not (doc.parent / t).exists()]
    assert not broken, f"{doc.name} links to {broken}"


def test_the_path_reader_reads_what_the_docstring_says():
    body = ("| `pages/overview.py`, `embeddings.py` | pages |\n\n`rooms/` keeps rooms: `codes.py` and `store.py`.\n\n"
            "```text\nmodel/\n  nn/            config.py attention.py\n                 cache.py\n"
            "  records.py     the data\n```\n")
    found, missing = named_paths(body, "views")
    assert {"views/pages/overview.py", "views/pages/embeddings.py", "views/rooms/codes.py", "views/rooms/store.py",
            "model/nn/config.py", "model/nn/attention.py", "model/nn/cache.py", "model/records.py"} <= found
    assert not missing
    assert named_paths("`nowhere/gone.py` and `checkpoints/NAME` and `../shared/x`", None)[1] == ["nowhere/gone.py"]
    assert not is_path("st.*") and not is_path("ATLAS_SPEED_OFF=look") and not is_path("redis://host:6379/0")
