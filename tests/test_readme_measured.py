"""The measured figures (docs/measured.md, linked from the README) are the benchmark scripts'
committed output, rendered by bench/report.py, never typed in; the default model's perplexities
(docs/models.md) are its own measurements."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_measured_block_is_what_the_results_render():
    with open(os.path.join(ROOT, "docs", "measured.md"), encoding="utf-8") as f:
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


def test_the_default_models_perplexities_in_the_docs_are_the_measured_ones():
    """docs/models.md's "held-out perplexity (X vs Y for a unigram model)" is models/austen's
    measurements.json (written by training/model_card.py), to one decimal."""
    import json
    with open(os.path.join(ROOT, "models", "austen", "measurements.json")) as f:
        m = json.load(f)
    with open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    assert (f"perplexity ({m['heldout_perplexity']:.1f} vs {m['unigram_perplexity']:.1f} for a "
            "unigram model)") in text
