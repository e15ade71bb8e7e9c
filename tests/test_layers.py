"""The package's import rules, as each subpackage's ``__init__`` docstring states them.

Data flows one way: capture -> timeline -> analysis -> render -> report (nsys reads exports into the
same tables). A module may import its own subpackage, the foundation modules and the layers the
table below allows; torch only in capture and bench. Checked on the source (every import statement,
function-level ones too) and at run time (the reading side really loads without torch).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "profiler"
FOUNDATION = {
    "profiler",
    "profiler._version",
    "profiler.errors",
    "profiler.settings",
    "profiler.modes",
    "profiler.units",
    "profiler.atomic",
    "profiler.names",
}
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "timeline": {"timeline"},
    "analysis": {"timeline", "analysis"},
    "render": {"timeline", "analysis", "render"},
    "report": {"timeline", "analysis", "render", "report"},
    "nsys": {"timeline", "analysis", "render", "report", "nsys"},
    "capture": {"capture", "timeline", "render.palette"},
    "drivers": {"capture", "timeline", "analysis", "render", "report", "nsys", "drivers"},
    "integrations": {"capture", "timeline", "report", "drivers", "integrations"},
    "bench": {"capture", "timeline", "analysis", "render", "report", "nsys", "drivers", "bench"},
    "cli": {"capture", "timeline", "analysis", "render", "report", "nsys", "drivers", "cli"},
}
TORCH = ("torch", "torchvision", "cuda")  # cuda.bindings
TORCH_LAYERS = {"capture", "drivers", "integrations", "bench"}
EXCEPTIONS = {("profiler.bench.quoted", "profiler.cli")}  # the quoted benchmarks are `pinprof run` arguments


def layer_of(module: str) -> str:
    parts = module.split(".")
    return "foundation" if module in FOUNDATION or len(parts) < 2 or parts[1] not in ALLOWED else parts[1]


def imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, whether at module level) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; the rules are checked on absolute names"
            found += [(node.module or "", id(node) in top)]
            # ``from profiler.render import plots`` imports the submodule profiler.render.plots
            found += [
                (f"{node.module}.{a.name}", id(node) in top)
                for a in node.names
                if (PACKAGE.parent / f"{node.module}.{a.name}".replace(".", "/")).with_suffix(".py").exists()
            ]
    return found


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((name, path))
    return out


def allowed(importer: str, imported: str) -> bool:
    if imported in FOUNDATION or (importer, imported) in EXCEPTIONS or importer == "profiler.__main__":
        return True
    if importer == "profiler" and imported.startswith("profiler."):
        return True  # the package's lazy public names
    target = imported.removeprefix("profiler.")
    return any(target == a or target.startswith(a + ".") for a in ALLOWED[layer_of(importer)])


@pytest.mark.parametrize("name,path", modules(), ids=[m for m, _ in modules()])
def test_module_imports_only_what_its_layer_may(name: str, path: Path) -> None:
    layer = layer_of(name)
    for imported, at_top in imports(path):
        if imported.split(".")[0] == "profiler":
            assert allowed(name, imported), f"{name} ({layer}) imports {imported}"
        elif imported.split(".")[0] in TORCH and layer not in TORCH_LAYERS:
            # the CLI may load torch inside a verb that needs it, never when it starts
            assert layer == "cli" and not at_top, f"{name} ({layer}) imports {imported}"
        if imported.startswith("matplotlib"):
            assert name == "profiler.render.plots" and not at_top, f"{name} imports matplotlib"


def test_the_rules_catch_a_bad_import() -> None:
    assert not allowed("profiler.analysis.rules", "profiler.capture.profiler")
    assert not allowed("profiler.timeline.build", "profiler.analysis.summary")
    assert not allowed("profiler.render.plots", "profiler.report.files")
    assert not allowed("profiler.capture.profiler", "profiler.analysis.diagnose")
    assert allowed("profiler.report.folder", "profiler.analysis.diagnose")


def test_the_package_never_imports_bench() -> None:
    """bench/ is pinprof measuring itself, for scripts/ and tests/: no module outside it imports it."""
    assert not allowed("profiler.cli.run", "profiler.bench.baseline")
    assert not allowed("profiler.drivers.tune", "profiler.bench.rounds")
    for name, path in modules():
        if layer_of(name) != "bench":
            assert not [i for i, _ in imports(path) if i.startswith("profiler.bench")], name


def test_every_subpackage_init_says_what_it_holds_and_may_import() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "May import" in doc, f"{init}: docstring must say what the subpackage may import"


def test_the_reading_side_starts_without_torch() -> None:
    reading = [
        m
        for m, _ in modules()
        if layer_of(m) in {"foundation", "timeline", "analysis", "render", "report", "nsys", "cli"}
        and m != "profiler.__main__"
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {reading!r}: importlib.import_module(m)\n"
        "from profiler.cli import build_parser\n"
        "build_parser()\n"
        "import profiler\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'matplotlib')))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", f"torch or matplotlib loaded: {run.stdout[:300]}"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (module -> the modules it imports): its strongly connected
    components of more than one module, or of one that imports itself (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1 or v in graph.get(v, ()):
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_among_the_packages_modules() -> None:
    """Every import counts, ``TYPE_CHECKING`` and function-level ones too: a circle makes the
    modules in it one unit that cannot be read, tested or moved apart. The package root, whose lazy
    public names import the rooms, is left out."""
    names = {name for name, _ in modules()}
    graph = {
        name: {imp for imp, _ in imports(path) if imp in names and imp not in (name, "profiler")}
        for name, path in modules()
        if name != "profiler"
    }
    assert circles(graph) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_house_stays_small_enough_to_read() -> None:
    """No module of the package over 400 lines, the README at most 300, ``reports/`` at most 3 MB."""
    long = {
        str(p.relative_to(PACKAGE)): n for p in (PACKAGE).rglob("*.py") if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long
    assert len((PACKAGE.parent / "README.md").read_text().splitlines()) <= 300
    assert sum(p.stat().st_size for p in (PACKAGE.parent / "reports").rglob("*") if p.is_file()) <= 3_000_000


# What names a clock in a test: the clocks' names (``PINPROF_BACKEND``'s values among them), the
# timeline's column of them, and their per-batch keys (``_calls``: the copy calls CUPTI's clock logs). Outside ``capture/clocks`` no branch
# asks these; a clock's own properties (``records_copies``) are asked of the batch's clock itself. After
# the capture, a row's raw ``on_host`` says which fields are host ms (``profiler.timeline.schema``), and
# one module reads the recorded clock: ``analysis/clock.py`` (the report's clock line, and which rows'
# compute_ms is the kernels' busy time). ``nsys`` reads Nsight Systems' own CUPTI tables: not pinprof's clock.
CLOCK_WORDS = ("cupti", "gpu_clock", "_calls", "events", "eventsclock", "hostclock")
CLOCK_FREE = ("capture", "drivers", "integrations", "cli", "timeline", "analysis", "report", "render")
CLOCK_READER = "profiler.analysis.clock"


def clock_asks(source: str) -> list[tuple[int, str]]:
    """(line, word) of every branch in ``source`` whose test names a clock: ``if``/``elif``/``while``
    conditions, conditional expressions, ``and``/``or`` operands, comprehension filters and matches."""
    tree = ast.parse(source)
    tests: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            tests.append(node.test)
        elif isinstance(node, ast.BoolOp):
            tests.extend(node.values)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
        elif isinstance(node, ast.Match):
            tests.append(node.subject)
    found = []
    for test in tests:
        for sub in ast.walk(test):
            word = (
                sub.id
                if isinstance(sub, ast.Name)
                else sub.attr
                if isinstance(sub, ast.Attribute)
                else sub.value
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
                else ""
            )
            if any(w in word.lower() for w in CLOCK_WORDS):
                found.append((getattr(sub, "lineno", 0), word))
    return found


def test_no_branch_on_the_clock_outside_the_clocks() -> None:
    """The clock is chosen in ``capture/clocks/choice.py`` and asked nowhere else: each batch's clock
    does what differs (``profiler.capture.clocks``)."""
    asks = {}
    for name, path in modules():
        parts = name.split(".")
        if len(parts) > 2 and parts[1] in CLOCK_FREE and parts[1:3] != ["capture", "clocks"] and name != CLOCK_READER:
            if got := clock_asks(path.read_text(encoding="utf-8")):
                asks[name] = got
    assert not asks, asks


def test_the_clock_check_finds_a_branch_on_the_clock() -> None:
    assert clock_asks('if "_calls" in rec:\n    pass\n') == [(1, "_calls")]
    assert clock_asks("x = a if prof._cupti_on() else b\n") == [(1, "_cupti_on")]
    assert clock_asks("ok = prof.cuda and current().backend == 'events'\n") == [(1, "events")]
    assert clock_asks("if rec['_clock'].records_copies:\n    pass\n") == []
