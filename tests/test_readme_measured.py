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


def test_the_app_against_transformers_tables_are_the_committed_result():
    """docs/measured.md's tables of bench/results/bench_vs_transformers.json: one per file (SmolLM2
    and the random 0.5 B one, both measured in the one run), each row read back from it: the
    chat's "same input ids, same tokens" cells and the decode steps' medians."""
    import json
    with open(os.path.join(ROOT, "bench", "results", "bench_vs_transformers.json")) as f:
        r = json.load(f)
    assert [x["model"] for x in r["runs"]] == ["smollm2", "qwen2-0.5b"]
    with open(os.path.join(ROOT, "docs", "measured.md"), encoding="utf-8") as f:
        block = f.read().split('<a id="vs-transformers"></a>', 1)[1].split("<a id=", 1)[0]
    same = [line for line in block.splitlines()
            if line.startswith("| chat: the same input ids, the same answer tokens |")]
    assert len(same) == len(r["runs"])
    yes = {True: "yes", False: "no"}
    for line, run in zip(same, r["runs"], strict=True):
        assert line.split("|")[2].strip() == (f"{yes[run['chat_input_ids_equal']]}, "
                                              f"{yes[run['chat_tokens_equal']]}")
        for side in ("app", "transformers"):
            d = run[side]["decode_step"]
            assert (f"{d['median_cpu_s'] * 1000:.1f} ms CPU, {d['median_wall_s'] * 1000:.1f} ms "
                    "wall") in block
        assert run["server"]["workers"] == 2
