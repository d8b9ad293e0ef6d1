"""The README's measured figures are the benchmark scripts' committed output, rendered by
bench/report.py, never typed in."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_measured_block_is_what_the_results_render():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert text.count("<!-- measured:begin -->") == 1 and text.count("<!-- measured:end -->") == 1
    check = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "report.py"), "--check"],
                           cwd=ROOT)
    assert check.returncode == 0, "run `python bench/report.py` after the benchmarks"


def test_every_result_names_when_where_and_how_it_was_made():
    import json
    results = os.path.join(ROOT, "bench", "results")
    names = [n for n in os.listdir(results) if n.endswith(".json")]
    assert names
    for n in names:
        with open(os.path.join(results, n)) as f:
            r = json.load(f)
        for key in ("date", "machine", "commit", "command"):
            assert r.get(key), f"{n} has no {key}"
