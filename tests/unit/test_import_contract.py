"""The import contract of the package (docs/architecture.md, "Layers"), checked on the source.

A small AST check of our own, over every module of ``procedures/``.  It builds the module import
graph -- imports inside functions included, ``from procedures.x import y`` counted as an import of
the module ``procedures.x.y`` when ``y`` is one -- and asserts:

1. no cycle between modules and none between packages;
2. no import from a higher layer (:data:`LAYERS`);
3. no private name (leading underscore, not a module) imported from another module, by
   ``from m import _x`` or as ``m._x`` on an imported module;
4. own-module imports sit at the top of the file: at most :data:`MAX_INNER_IMPORTS` inside
   functions, each on a line with a ``# noqa: PLC0415 -- <reason>`` comment;
5. no import error swallowed around an own-module import (a missing module is a bug), and no
   own module imported by name (``__import__("procedures.x")``, ``importlib.import_module``), which
   the graph could not see;
6. spec, core, io and catalog never import pyspark, and every module loads with pyspark blocked;
7. capabilities never import each other's internals: a module of a capability package under
   ``procedures/core/`` imports its own package, the kernel and the layers below core only
   (:func:`capability_crossings`); what two capabilities share lives in the kernel;
8. the layers without Spark know no Spark even duck-typed: no Spark session or DataFrame member
   (:data:`DUCK_TYPED_SPARK`) by attribute or by name (:func:`duck_typed_spark`);
9. the Spark Connect contract: no module touches a SparkContext, RDDs,
   accumulators, py4j or the JVM (by attribute or duck-typed by name), and the layers below Spark look
   up no pyspark module by name -- but for the commented allow-lists (:data:`KEEP_SPARK_INTERNALS`, and
   :data:`PENDING_CONNECT_CONVERSION`, emptied as the Spark layer is converted; the front end's guarded
   uses are in the first).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "procedures"

#: the layers, bottom first: a module may import its own layer and the layers below it only.
#: ``""`` is the package's ``__init__`` (the lazy public API), above everything.
LAYERS = ("errors", "spec", "core", "io", "catalog", "spark", "framework", "builtin", "frontend", "")
#: layers that must work without Spark: no pyspark import anywhere in them
NO_PYSPARK = ("spec", "core", "io", "catalog")
MAX_INNER_IMPORTS = 15
REASON = re.compile(r"#\s*noqa:\s*PLC0415\s*(--|-|:)\s*\S")


@dataclass
class Import:
    importer: str
    target: str  # a module of the package
    name: str | None  # the imported name when it is not a module
    line: int
    text: str
    in_function: bool


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)
    private_attributes: list[str] = field(default_factory=list)
    swallowed: list[str] = field(default_factory=list)
    dynamic: list[str] = field(default_factory=list)
    pyspark: list[str] = field(default_factory=list)
    short_aliases: list[str] = field(default_factory=list)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def build_graph(root: Path = PACKAGE) -> Graph:
    g = Graph()
    for path in sorted(root.rglob("*.py")):
        g.modules[module_name(path)] = path
    for name, path in g.modules.items():
        _scan(g, name, path)
    return g


def _scan(g: Graph, name: str, path: Path) -> None:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    is_package = path.name == "__init__.py"
    aliases: dict[str, str] = {}  # local name -> own module it is bound to

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def own(module: str) -> bool:
        return module == "procedures" or module.startswith("procedures.")

    def imports_of(node: ast.AST) -> list[tuple[str, str | None, str]]:
        """(module, name or None, local alias) of an import statement, own modules only."""
        out = []
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ("pyspark", "py4j"):
                    out.append((a.name, None, ""))
                elif own(a.name):
                    out.append((a.name, None, a.asname or ""))
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node)
            if base.split(".")[0] in ("pyspark", "py4j"):
                out.append((base, None, ""))
            elif own(base):
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    if sub in g.modules:
                        out.append((sub, None, a.asname or a.name))
                    else:
                        out.append((base, a.name, a.asname or a.name))
        return out

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for module, imported, alias in imports_of(child):
                    if not own(module):
                        if layer(name) in NO_PYSPARK:
                            g.pyspark.append(f"{path.relative_to(ROOT)}:{child.lineno}: {lines[child.lineno - 1].strip()}")
                        continue
                    g.imports.append(Import(name, module, imported, child.lineno,
                                            lines[child.lineno - 1], in_function))
                    if imported is None and alias:
                        aliases[alias] = module
                        if len(alias) == 1 and any(n.asname == alias for n in child.names):
                            g.short_aliases.append(f"{path.relative_to(ROOT)}:{child.lineno}: {alias} ({module})")
            if isinstance(child, ast.Try):
                body_imports = [n for n in child.body if isinstance(n, (ast.Import, ast.ImportFrom))
                                and any(own(m) for m, _, _ in imports_of(n))]
                catches = [ast.unparse(h.type) if h.type is not None else "" for h in child.handlers]
                if body_imports and any(c == "" or "ImportError" in c or "ModuleNotFoundError" in c for c in catches):
                    g.swallowed.append(f"{path.relative_to(ROOT)}:{body_imports[0].lineno}: {ast.unparse(body_imports[0])}")
            visit(child, inner)

    visit(tree, False)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and node.args
                and (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module")
                     or isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))
                and ast.unparse(node.args[0]).strip("'\"f").startswith("procedures")):
            g.dynamic.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and f"{aliases[node.value.id]}.{node.attr}" not in g.modules):
            g.private_attributes.append(
                f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr} ({aliases[node.value.id]})")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (or a self loop), Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


# ------------------------------------------------------------------------------ the checks
def module_cycles(g: Graph) -> list[list[str]]:
    edges: dict[str, set[str]] = {m: set() for m in g.modules}
    for imp in g.imports:
        if imp.target in g.modules and imp.target != imp.importer:
            edges[imp.importer].add(imp.target)
    return _cycles(edges)


def package_cycles(g: Graph) -> list[list[str]]:
    edges: dict[str, set[str]] = {}
    for imp in g.imports:
        a, b = layer(imp.importer), layer(imp.target)
        if a != b:
            edges.setdefault(a, set()).add(b)
    return _cycles(edges)


def upward_imports(g: Graph) -> list[str]:
    out = []
    for imp in g.imports:
        a, b = layer(imp.importer), layer(imp.target)
        if a not in LAYERS or b not in LAYERS:
            out.append(f"{imp.importer}:{imp.line}: layer {a or b!r} is not in LAYERS")
        elif LAYERS.index(b) > LAYERS.index(a):
            out.append(f"{imp.importer}:{imp.line}: {a or 'procedures'} imports {imp.target} from the higher layer {b}")
    return out


def private_imports(g: Graph) -> list[str]:
    out = [f"{imp.importer}:{imp.line}: {imp.target}.{imp.name}" for imp in g.imports
           if imp.name is not None and imp.name.startswith("_") and not imp.name.startswith("__")
           and imp.target != imp.importer]
    return out + g.private_attributes


def inner_imports(g: Graph) -> list[Import]:
    return [imp for imp in g.imports if imp.in_function]


# ------------------------------------------------------------------------------ the tests
def test_every_module_has_a_layer():
    g = build_graph()
    assert len(g.modules) > 50
    assert {layer(m) for m in g.modules} <= set(LAYERS), sorted({layer(m) for m in g.modules} - set(LAYERS))


def test_no_cycles_between_modules():
    assert module_cycles(build_graph()) == []


def test_no_cycles_between_packages():
    assert package_cycles(build_graph()) == []


def test_imports_go_down_the_layers_only():
    assert upward_imports(build_graph()) == []


def test_no_private_name_imported_across_modules():
    assert private_imports(build_graph()) == []


def test_own_imports_at_the_top_with_few_documented_exceptions():
    inner = inner_imports(build_graph())
    undocumented = [f"{i.importer}:{i.line}: {i.text.strip()}" for i in inner if not REASON.search(i.text)]
    assert undocumented == [], "an import inside a function needs '# noqa: PLC0415 -- <reason>'"
    assert len({(i.importer, i.line) for i in inner}) <= MAX_INNER_IMPORTS


def test_no_swallowed_import_errors_nor_own_modules_imported_by_name():
    g = build_graph()
    assert g.swallowed == []
    assert g.dynamic == [], "import own modules with import statements, so the contract sees them"


def test_lower_layers_never_import_pyspark():
    assert build_graph().pyspark == []


def duplicate_module_names(root: Path | None = None) -> dict[str, list[str]]:
    """Module file names (``__init__`` aside) found in more than one place of the package."""
    seen: dict[str, list[str]] = {}
    for path in sorted((root or PACKAGE).rglob("*.py")):
        if path.name != "__init__.py":
            seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
    return {stem: places for stem, places in seen.items() if len(places) > 1}


def test_module_names_are_unique_across_layers():
    """A module's name says where its logic lives: the same name in two layers (``migrate.py`` in
    core and in builtin) makes a reader learn which is which."""
    assert duplicate_module_names() == {}


def test_no_single_letter_module_aliases():
    """``import ... as P`` hides which module a name comes from (``P`` was ``pruning`` in one file and
    ``Parameter`` in another); own modules are imported under a name that says what they are."""
    assert build_graph().short_aliases == []


# ------------------------------------------------------------------------------ the checks can fail
def write_package(tmp_path: Path, files: dict[str, str], monkeypatch) -> None:
    """A small ``procedures`` package of ``files`` (path -> text) under ``tmp_path``, the checks' ROOT."""
    for rel, text in files.items():
        p = tmp_path / "procedures" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)


def test_the_checks_catch_violations(tmp_path, monkeypatch):
    """A small package with one of each violation: every check reports it."""
    files = {
        "__init__.py": "",
        "errors.py": "",
        "core/__init__.py": "",
        "core/a.py": "from procedures.spark import b\nfrom procedures.core.c import _hidden\n",
        "core/c.py": "import pyspark\nfrom procedures.core import a\n_hidden = 1\n",
        "core/b.py": "from procedures.core import a as A\n",
        "spark/__init__.py": "",
        "spark/b.py": ("from procedures.core import a\n"
                       "def f():\n    from procedures.core import c\n    return a._x\n"
                       "try:\n    from procedures.spark import missing\nexcept ModuleNotFoundError:\n    pass\n"
                       "__import__(f'procedures.spark.{1}')\n"),
    }
    write_package(tmp_path, files, monkeypatch)
    g = build_graph(tmp_path / "procedures")
    assert module_cycles(g) == [["procedures.core.a", "procedures.core.c", "procedures.spark.b"]]
    assert package_cycles(g) == [["core", "spark"]]
    assert upward_imports(g) == ["procedures.core.a:1: core imports procedures.spark.b from the higher layer spark"]
    assert private_imports(g) == ["procedures.core.a:2: procedures.core.c._hidden",
                                  "procedures/spark/b.py:4: a._x (procedures.core.a)"]
    assert [(i.importer, i.line) for i in inner_imports(g)] == [("procedures.spark.b", 3)]
    assert not REASON.search(inner_imports(g)[0].text)
    assert g.swallowed == ["procedures/spark/b.py:6: from procedures.spark import missing"]
    assert g.pyspark == ["procedures/core/c.py:1: import pyspark"]
    assert g.dynamic == ["procedures/spark/b.py:9: __import__(f'procedures.spark.{1}')"]
    assert g.short_aliases == ["procedures/core/b.py:1: A (procedures.core.a)"]
    assert duplicate_module_names(tmp_path / "procedures") == {"b": ["procedures/core/b.py", "procedures/spark/b.py"]}


@pytest.mark.slow  # a subprocess importing every module
def test_every_module_imports_without_pyspark():
    """No module imports pyspark at its top: the whole package loads with pyspark blocked (Spark is
    only needed when a Spark step runs)."""
    import subprocess

    code = (
        "import importlib, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'py4j'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {sorted(build_graph().modules)!r}:\n"
        "    importlib.import_module(m)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------ Spark Connect (issue 33)
# Every distributed step goes through the DataFrame API only, so one code path runs on a classic
# session and on a Spark Connect session (docs/spark-connect.md).  No module touches a SparkContext,
# RDDs, accumulators or the JVM gateway -- neither by attribute (``spark.sparkContext``) nor duck-typed
# by name (``getattr(spark, "_jvm")``) -- but for the front end's guarded uses of a classic session's
# extras (the console's log level and status tracker) and the entries of the allow-lists below.

#: attributes that reach the SparkContext, the JVM or RDDs
SPARK_INTERNALS = frozenset({
    # the JVM side of a classic session, and py4j's gateway
    "sparkContext", "_jvm", "_jsc", "_jsparkSession", "_jrdd", "_jdf", "_gateway",
    # SparkContext-only members (a context reached through a parameter, not ``.sparkContext``)
    "defaultParallelism", "statusTracker", "accumulator", "emptyRDD", "parallelize",
    # RDD methods (a DataFrame has none of these: ``df.rdd`` is the way in)
    "rdd", "mapPartitions", "mapPartitionsWithIndex", "flatMap", "reduceByKey", "groupByKey",
    "aggregateByKey", "combineByKey", "foreachPartition", "glom", "partitionBy",
})
#: ``partitionBy`` is also a DataFrameWriter's and a window spec's (both fine on Connect): a call whose
#: receiver names one of these is not an RDD's
_PARTITION_BY_RECEIVERS = ("write", "Window", "writeStream")
#: modules of pyspark that carry no DataFrame API (RDD accumulators), and py4j; and pyspark.sql.functions,
#: which builds the columns of one session kind only in a process holding both (a notebook beside a
#: remote session, the tests): package code asks ``procedures.spark.dataframes.functions(spark)``
FORBIDDEN_PYSPARK_MODULES = ("py4j", "pyspark.accumulators", "pyspark.rdd", "pyspark.core", "pyspark.context",
                             "pyspark.sql.functions")
_PYSPARK_NAME = re.compile(r"^(pyspark|py4j)(\.[A-Za-z_.]+)?$")

#: Spark internals the package keeps for good, each where the two session kinds really differ and a
#: classic session has no DataFrame way; every use sits behind ``is_connect`` or a guard.
KEEP_SPARK_INTERNALS: dict[str, set[str]] = {
    # job descriptions and groups of a classic session are SparkContext local properties, copied to pool
    # threads through the JVM (Connect: job tags)
    "procedures.spark.session": {"sparkContext", "_jsc", "_gateway"},
    # the Java version of a classic session's JVM (Connect has no local JVM: pyspark alone is checked)
    "procedures.spark.environment": {"sparkContext", "_jvm"},
    # the one place that picks the functions module of a session's kind
    "procedures.spark.dataframes": {"pyspark.sql.functions"},
    # the front end may use a classic session's extras where it guards them: the console's JVM log
    # level (a classic session, or the local Connect server's own SparkContext) and the status
    # tracker of its progress (Connect: a progress handler instead)
    "procedures.frontend.cli": {"sparkContext"},
    "procedures.frontend.progress": {"sparkContext", "statusTracker"},
    # the hive catalog on a classic session's own embedded metastore (no uri): that metastore lives in the
    # session's JVM and only py4j reaches it; on Connect the catalog asks for uri=thrift://... instead
    # (docs/spark-connect.md, "What needs a classic session")
    "procedures.spark.hive_jvm": {"_jvm", "_jsparkSession"},
    # the running session (classic or Connect) is found through sys.modules (looking loads no pyspark), a
    # classic one told by its JVM; a classic session's conf is read from its JVM in one JSON text (1-2 ms
    # against 6-14 ms through pyspark), falling back to pyspark's getAll or SET, and on pyspark 3.5 to the
    # SparkContext's static conf (a Connect session has no JVM here and lists its conf with getAll)
    "procedures.spark.catalog_conf": {"sparkContext", "_jvm", "_jsparkSession"},
}
#: The offenders the Spark-layer conversion (issue 33) removes.  The lead empties this list when the
#: conversions are merged; an entry that is no longer needed fails
#: ``test_allowed_spark_internals_are_still_used``, so the list only shrinks.
PENDING_CONNECT_CONVERSION: dict[str, set[str]] = {}


def _receiver_text(node: ast.Attribute) -> str:
    return ast.unparse(node.value)


def spark_internals(root: Path = PACKAGE) -> dict[str, set[str]]:
    """What each module touches of :data:`SPARK_INTERNALS`: attributes,
    ``getattr``/``hasattr``/``setattr`` by name, imports of :data:`FORBIDDEN_PYSPARK_MODULES`, and,
    in the layers without Spark (:data:`NO_PYSPARK`), any pyspark module looked up by name
    (``sys.modules.get("pyspark.sql.session")``, a duck-typed import)."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        hits = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SPARK_INTERNALS:
                if node.attr == "partitionBy" and any(r in _receiver_text(node) for r in _PARTITION_BY_RECEIVERS):
                    continue
                hits.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in SPARK_INTERNALS):
                hits.add(node.args[1].value)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names])
                hits.update(m for m in modules if m.startswith(FORBIDDEN_PYSPARK_MODULES))
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and layer(name) in NO_PYSPARK and _PYSPARK_NAME.match(node.value)):
                hits.add(node.value)
        if hits:
            found[name] = hits
    return found


def _allowed(module: str) -> set[str]:
    return KEEP_SPARK_INTERNALS.get(module, set()) | PENDING_CONNECT_CONVERSION.get(module, set())


def test_no_spark_context_rdd_accumulator_or_jvm_outside_the_front_end():
    """The Spark Connect contract: no module touches a SparkContext, RDDs, accumulators, py4j or the
    JVM, except the commented allow-lists above (the front end's guarded uses among them)."""
    offenders = {m: sorted(names - _allowed(m)) for m, names in spark_internals().items() if names - _allowed(m)}
    assert offenders == {}, ("these need a classic session and fail on Spark Connect: use the DataFrame API "
                             "(procedures.spark.dataframes, procedures.spark.session) instead")


def test_allowed_spark_internals_are_still_used():
    """An allow-list entry whose module no longer needs it goes (the lists only shrink)."""
    found = spark_internals()
    stale = {m: sorted(names - found.get(m, set()))
             for m, names in {**PENDING_CONNECT_CONVERSION, **KEEP_SPARK_INTERNALS}.items()
             if names - found.get(m, set())}
    assert stale == {}
    assert not set(KEEP_SPARK_INTERNALS) & set(PENDING_CONNECT_CONVERSION)


def test_the_spark_connect_check_catches_each_kind_of_use(tmp_path, monkeypatch):
    files = {
        "__init__.py": "",
        "catalog/__init__.py": "",
        "catalog/c.py": ("import sys\n"
                         "def f(s):\n    '''pyspark.sql.session in a docstring is fine'''\n"
                         "    m = sys.modules.get('pyspark.sql.session')\n    return getattr(s, '_jvm', None)\n"),
        "spark/__init__.py": "",
        "spark/a.py": ("from pyspark import accumulators\nfrom py4j.java_gateway import JavaObject\n"
                       "from pyspark.sql import functions as F\n"
                       "def f(spark, df, Window):\n"
                       "    spark.sparkContext.parallelize([1]).mapPartitions(len).partitionBy(2, hash)\n"
                       "    df.write.partitionBy('x'); Window.partitionBy('y')\n"
                       "    return df.rdd, hasattr(spark, 'sparkContext')\n"),
        "frontend/__init__.py": "",
        "frontend/cli.py": "def f(spark):\n    return spark.table('v')._jdf\n",
    }
    write_package(tmp_path, files, monkeypatch)
    assert spark_internals(tmp_path / "procedures") == {
        "procedures.catalog.c": {"pyspark.sql.session", "_jvm"},
        "procedures.frontend.cli": {"_jdf"},
        "procedures.spark.a": {"pyspark.accumulators", "py4j.java_gateway", "py4j.java_gateway.JavaObject",
                               "pyspark.sql.functions", "sparkContext", "parallelize", "mapPartitions", "partitionBy",
                               "rdd"},
    }


# ------------------------------------------------------------------------ capabilities (issue 32)
#: the packages of ``procedures/core`` that are not a capability: the commit kernel every capability
#: builds on (and the composite engine protocol, ``procedures.core.engine``, a module)
CORE_SHARED = ("kernel",)


def capability_of(module: str) -> str | None:
    """The capability a module of ``procedures.core`` belongs to (its sub-package, or the name of a
    flat module), None for the kernel, ``core/engine.py`` and modules outside core."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "core" or parts[2] in CORE_SHARED or parts[2] == "engine":
        return None
    return parts[2]


def capability_crossings(g: Graph) -> list[str]:
    """Imports from a capability package into another capability (sub-package or flat module) of
    core; flat modules are checked as targets only (they become packages one by one)."""
    out = []
    for imp in g.imports:
        importer_path = g.modules.get(imp.importer)
        own = capability_of(imp.importer)
        if own is None or importer_path is None or len(imp.importer.split(".")) < 4:
            continue  # not inside a capability package
        target = capability_of(imp.target)
        if target is not None and target != own:
            out.append(f"{imp.importer}:{imp.line}: capability {own} imports {imp.target} of capability {target}")
    return out


def test_capabilities_never_import_each_other():
    """A capability imports the kernel, its own package and the layers below; anything two share
    moves to the kernel (issue 32)."""
    assert capability_crossings(build_graph()) == []


#: members of a Spark session, DataFrame or its conf that code below the Spark layer could reach duck-typed
#: (an object handed in, never imported): iterating, persisting or building frames, finding a session,
#: running SQL on it or reading its conf are the Spark layer's (``procedures.spark``, the engine steps)
DUCK_TYPED_SPARK = frozenset({
    "toLocalIterator", "createDataFrame", "getActiveSession", "sparkSession", "persist", "unpersist", "mapInArrow",
    "mapInPandas", "selectExpr", "withColumn", "unionByName", "sparkContext", "_jvm", "_jsparkSession", "getAll",
    "SparkSession",
})
#: Spark SQL statements a lower layer could run on a session handed in (``spark.sql("SET")``)
_SPARK_STATEMENT = re.compile(r"^\s*(SET|SHOW|SELECT|CALL|DESCRIBE)\b", re.I)


def duck_typed_spark(root: Path = PACKAGE) -> dict[str, set[str]]:
    """What each module of the layers without Spark (:data:`NO_PYSPARK`) touches of
    :data:`DUCK_TYPED_SPARK` (attributes, ``getattr``/``hasattr`` by name), ``sys.modules`` lookups,
    and ``.sql(...)`` calls with a Spark statement."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = module_name(path)
        if layer(name) not in NO_PYSPARK:
            continue
        tree = ast.parse(path.read_text(), str(path))
        hits = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in DUCK_TYPED_SPARK:
                hits.add(node.attr)
            elif isinstance(node, ast.Attribute) and node.attr == "modules" and ast.unparse(node.value) == "sys":
                hits.add("sys.modules")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value in DUCK_TYPED_SPARK):
                hits.add(node.args[1].value)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql"
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                  and _SPARK_STATEMENT.match(node.args[0].value)):
                hits.add(f"sql({node.args[0].value!r})")
        if hits:
            found[name] = hits
    return found


def test_no_spark_below_the_spark_layer_even_duck_typed():
    """spec, core, io and catalog neither import pyspark (above) nor use a session or DataFrame handed
    to them: those steps are engine steps (procedures.spark.engine) or the Spark layer's catalog
    glue (procedures.spark.catalog_conf)."""
    assert duck_typed_spark() == {}


def test_the_capability_and_duck_typing_checks_catch_violations(tmp_path, monkeypatch):
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/engine.py": "from procedures.core.gc import gc_engine\n",
        "core/kernel/__init__.py": "",
        "core/kernel/paths.py": "",
        "core/flat.py": "",
        "core/gc/__init__.py": "",
        "core/gc/gc_engine.py": "",
        "core/gc/expire.py": ("from procedures.core.kernel import paths\nfrom procedures.core.gc import gc_engine\n"
                              "from procedures.core import engine as composite\n"
                              "def f(rows):\n    return [r for r in rows.toLocalIterator()]\n"),
        "core/health/__init__.py": "",
        "core/health/checks.py": ("from procedures.core.gc.expire import f\nfrom procedures.core import flat\n"
                                  "import sys\n"
                                  "def g(spark):\n    sys.modules.get('x')\n    return spark.sql('SET'), "
                                  "getattr(spark, 'sparkContext', None)\n"),
        "catalog/__init__.py": "",
        "catalog/conf.py": "def h(db):\n    return db.sql('DELETE FROM t')\n",
        "spark/__init__.py": "",
        "spark/steps.py": "def i(df):\n    return df.toLocalIterator()\n",
    }
    write_package(tmp_path, files, monkeypatch)
    g = build_graph(tmp_path / "procedures")
    assert capability_crossings(g) == [
        "procedures.core.health.checks:1: capability health imports procedures.core.gc.expire of capability gc",
        "procedures.core.health.checks:2: capability health imports procedures.core.flat of capability flat",
    ]
    assert duck_typed_spark(tmp_path / "procedures") == {
        "procedures.core.gc.expire": {"toLocalIterator"},
        "procedures.core.health.checks": {"sys.modules", "sql('SET')", "sparkContext"},
    }
