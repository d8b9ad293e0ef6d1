"""The layers of docs/ARCHITECTURE.md hold: the pipeline imports no Flask, no Plotly and nothing of
web/, and web/figures is the only code that imports Plotly."""
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


def test_importing_every_pipeline_module_loads_no_flask_plotly_or_web():
    """Imported for real in a fresh interpreter: what they import, directly or not."""
    code = ("import importlib, pkgutil, sys, pipeline\n"
            "for m in pkgutil.iter_modules(pipeline.__path__):\n"
            "    if not m.name.startswith('_'):\n"
            "        importlib.import_module('pipeline.' + m.name)\n"
            "print(len(sys.modules), sorted({n.split('.')[0] for n in sys.modules}"
            " & {'flask', 'werkzeug', 'jinja2', 'plotly', 'web'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    assert int(out[0]) > 50 and out[1].strip() == "[]"


def test_no_pipeline_file_names_flask_plotly_or_web():
    files = python_files("pipeline")
    assert "pipeline/model.py" in files
    assert {f: sorted(imported_roots(os.path.join(ROOT, f)) & {"flask", "plotly", "web"})
            for f in files} == {f: [] for f in files}


def test_web_figures_is_the_only_code_of_the_app_that_imports_plotly():
    files = python_files("web", "pipeline") + ["app.py"]
    users = {f for f in files if "plotly" in imported_roots(os.path.join(ROOT, f))}
    assert users and all(f.startswith("web/figures/") for f in users), users
