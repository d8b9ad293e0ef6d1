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


def test_the_gguf_parity_table_is_the_committed_result():
    """docs/measured.md's GGUF table holds one row per checkpoint of
    bench/results/gguf_parity.json, read back cell by cell, and that result covers every
    checkpoint whose transformers outputs tests/fixtures/gguf_reference.json commits."""
    import json
    import re
    with open(os.path.join(ROOT, "bench", "results", "gguf_parity.json")) as f:
        r = json.load(f)
    with open(os.path.join(ROOT, "tests", "fixtures", "gguf_reference.json")) as f:
        ref = json.load(f)
    assert sorted(x["checkpoint"] for x in r["rows"]) == sorted(ref["tiny"])
    assert (r["transformers"], r["torch"]) == (ref["transformers"], ref["torch"])
    with open(os.path.join(ROOT, "docs", "measured.md"), encoding="utf-8") as f:
        text = f.read()
    head = ("| checkpoint | architecture | tensor type | pre-tokenizer | max \\|logit diff\\| "
            "| top-5 equal | greedy equal | tokenizer cases equal |")
    assert text.count(head) == 1
    table = text.split(head, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
    assert len(cells) == len(r["rows"])
    yes = {"yes": True, "no": False}
    for row, x in zip(cells, r["rows"], strict=True):
        name, arch, qtype, pre, diff, top5, greedy, tok = row
        assert (name, arch, qtype, pre) == (x["checkpoint"], x["architecture"],
                                            x["tensor_type"], x["pre_tokenizer"])
        assert abs(float(diff) - x["max_abs_logit_diff"]) <= 0.051 * x["max_abs_logit_diff"]
        assert (yes[top5], yes[greedy]) == (x["top5_equal"], x["greedy_equal"])
        assert re.fullmatch(r"(\d+) / (\d+)", tok).groups() == (
            str(x["tokenizer_cases_equal"]), str(x["tokenizer_cases"]))
    assert f"transformers {r['transformers']} (torch {r['torch']})" in text
