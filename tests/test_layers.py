"""The layers of docs/ARCHITECTURE.md hold: the pipeline imports no Flask, no Plotly and nothing of
web/ (Jinja2 only for a model's own chat template), and web/figures is the only code that imports
Plotly."""
import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def imported_roots(path: str) -> set:
    """The top-level names of every module the file imports (at any depth of its code)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def python_files(*folders: str) -> list:
    return sorted(os.path.relpath(os.path.join(d, n), ROOT)
                  for folder in folders
                  for d, _, names in os.walk(os.path.join(ROOT, folder))
                  for n in names if n.endswith(".py"))


def loaded_after_importing(modules) -> tuple:
    """Imported for real in a fresh interpreter: how many modules are loaded, and which of the
    web's libraries among them (directly or not)."""
    code = ("import importlib, sys\n"
            f"for m in {list(modules)!r}:\n"
            "    importlib.import_module('pipeline.' + m)\n"
            "print(len(sys.modules), sorted({n.split('.')[0] for n in sys.modules}"
            " & {'flask', 'werkzeug', 'jinja2', 'markupsafe', 'plotly', 'web'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    return int(out[0]), out[1].strip()


def pipeline_modules() -> list:
    return sorted(n[:-3] for n in os.listdir(os.path.join(ROOT, "pipeline"))
                  if n.endswith(".py") and not n.startswith("_"))


def test_importing_every_pipeline_module_loads_no_flask_plotly_or_web():
    """Jinja2 is the one exception, and only for pipeline/chat.py: a GGUF file's chat template
    is a Jinja template, rendered in a sandbox as transformers renders it (not a page)."""
    others = [m for m in pipeline_modules() if m != "chat"]
    assert "model" in others and "chat" in pipeline_modules()
    count, libraries = loaded_after_importing(others)
    assert count > 50 and libraries == "[]"
    count, libraries = loaded_after_importing(["chat"])
    assert libraries == "['jinja2', 'markupsafe']"


def test_no_pipeline_file_names_flask_plotly_or_web():
    files = python_files("pipeline")
    assert "pipeline/model.py" in files
    assert {f: sorted(imported_roots(os.path.join(ROOT, f)) & {"flask", "plotly", "web"})
            for f in files} == {f: [] for f in files}


def test_web_figures_is_the_only_code_of_the_app_that_imports_plotly():
    files = python_files("web", "pipeline") + ["app.py"]
    users = {f for f in files if "plotly" in imported_roots(os.path.join(ROOT, f))}
    assert users and all(f.startswith("web/figures/") for f in users), users


def pipeline_imports(path: str) -> set:
    """The pipeline modules a pipeline file imports, at any depth of its code (a function's own
    import included): `from .x import`, `from . import x`, `from pipeline.x import`,
    `import pipeline.x`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                names.add(node.module.split(".")[0])
            elif node.level == 1 or node.module == "pipeline":
                names.update(a.name for a in node.names)
            elif node.level == 0 and node.module and node.module.startswith("pipeline."):
                names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names
                         if a.name.startswith("pipeline."))
    return names & set(pipeline_modules())


def import_cycles(graph: dict) -> list:
    """Every cycle a depth-first walk of the graph meets, each as [a, b, ..., a]."""
    state, cycles = {}, []

    def walk(node, path):
        state[node] = "open"
        path.append(node)
        for other in sorted(graph[node]):
            if state.get(other) == "open":
                cycles.append(path[path.index(other):] + [other])
            elif other not in state:
                walk(other, path)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            walk(node, [])
    return cycles


def test_the_pipeline_has_no_import_cycle():
    """Each pipeline module's imports go one way: the KV cache and the activation cache are
    imported by the model, never the reverse; the GGUF reader, the loader and the tokenizer
    form no circle."""
    graph = {m: pipeline_imports(os.path.join(ROOT, "pipeline", m + ".py"))
             for m in pipeline_modules()}
    assert {"activations", "kvcache"} <= graph["model"]
    assert "activations" in graph["kvcache"] and "model" not in graph["kvcache"]
    assert graph["activations"] == set()
    assert {"gguf_file", "tokenizer"} <= graph["loader"] and "tokenizer" in graph["gguf_file"]
    assert import_cycles(graph) == []
    # the walk finds a circle when there is one
    assert import_cycles({**graph, "tokenizer": graph["tokenizer"] | {"loader"}}) == [
        ["tokenizer", "loader", "gguf_file", "tokenizer"], ["tokenizer", "loader", "tokenizer"]]
