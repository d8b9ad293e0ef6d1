"""GGUF parity: the engine against transformers' committed outputs, checkpoint by checkpoint.

For every tiny checkpoint in tests/fixtures/gguf_reference.json this writes the checkpoint with
the tests' own writer (tests/gguf_support.write_checkpoint, as llama.cpp's converter writes that
architecture) into a temporary directory, loads it with the engine (pipeline.load_model), and
compares with what transformers computed from the same bytes (tests/fixtures/
make_gguf_fixtures.py): the largest |logit difference| over every position of the prompt, the
top-5 tokens at every position, the greedy tokens, and the tokenizer's cases (encode and decode
both equal). The versions of transformers and torch are the ones the reference records. Then
each pre-tokenizer of the reference's "pretokenizers" (tokenizer.ggml.pre "gpt-4o", "tekken",
...): the pieces the engine's regex splits the hard cases into, and the ids, against Hugging Face
tokenizers with the pre-tokenizer of that model's tokenizer.json.

    python bench/bench_gguf_parity.py [--no-save]

Writes bench/results/gguf_parity.json; bench/report.py renders it in docs/measured.md.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gguf_support import CHECKPOINTS, write_checkpoint  # noqa: E402
from pipeline import load_model  # noqa: E402
from pipeline.generation import decode_loop  # noqa: E402

REFERENCE = os.path.join(ROOT, "tests", "fixtures", "gguf_reference.json")


def tokenizer_cases(tok, ref) -> tuple:
    """(cases whose ids and decoded text both equal transformers', cases)."""
    equal = 0
    for case in ref.get("tokenizer_cases", []):
        allowed = "all" if case.get("special") else set()
        same = (tok.encode(case["text"], allowed_special=allowed) == case["ids"]
                and tok.decode(case["ids"]) == case.get("decoded", case["text"]))
        equal += same
    return equal, len(ref.get("tokenizer_cases", []))


def compare(name, ref, directory) -> dict:
    path = write_checkpoint(os.path.join(directory, f"{name}.gguf"), name, ref["seed"])
    model = load_model(path)
    expected = np.array(ref["logits"], dtype=np.float32)
    logits = model.forward(ref["input_ids"])
    top = lambda x: np.argsort(-x, axis=-1, kind="stable")[:, :5]  # noqa: E731
    greedy = [p.token for p in decode_loop(model, ref["input_ids"], len(ref["greedy_ids"]),
                                           stop_at_eos=False)]
    equal, total = tokenizer_cases(model.tokenizer, ref)
    opts = CHECKPOINTS[name][2]
    return {"checkpoint": name, "architecture": ref["arch"], "tensor_type": ref["type"],
            "pre_tokenizer": "SentencePiece" if opts.get("spm") else opts.get("pre", "default"),
            "reference": ref.get("reference", "transformers"),
            "positions": int(expected.shape[0]), "vocab": int(expected.shape[1]),
            "max_abs_logit_diff": float(np.abs(logits - expected).max()),
            "top5_equal": bool(logits.shape == expected.shape
                               and np.array_equal(top(logits), top(expected))),
            "greedy_equal": greedy == ref["greedy_ids"], "greedy_tokens": len(greedy),
            "tokenizer_cases_equal": equal, "tokenizer_cases": total}


def compare_pretokenizer(pre, ref, directory) -> dict:
    """The tiny vocabulary written with tokenizer.ggml.pre = `pre`: the engine's pieces and ids
    against Hugging Face tokenizers' with the pre-tokenizer of that model's tokenizer.json."""
    import regex

    from pipeline.tokenizer import BYTE_TO_CHAR
    model = load_model(write_checkpoint(os.path.join(directory, f"pre-{pre}.gguf"), "llama_f32",
                                        1, pre=pre))
    spell = lambda piece: "".join(BYTE_TO_CHAR[b] for b in piece.encode())  # noqa: E731
    pieces = sum([spell(p) for p in regex.findall(model.pat_str, c["text"])] == c["pieces"]
                 for c in ref["cases"])
    ids = sum(model.tokenizer.encode(c["text"]) == c["ids"]
              and model.tokenizer.decode(c["ids"]) == c["text"] for c in ref["cases"])
    hf = ref["pre_tokenizer"]
    steps = [x["type"] for x in hf.get("pretokenizers", [hf])]
    return {"pre_tokenizer": pre, "hf_pre_tokenizer": " + ".join(steps),
            "cases": len(ref["cases"]), "pieces_equal": int(pieces), "ids_equal": int(ids)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-save", action="store_true",
                    help="do not write bench/results/gguf_parity.json")
    args = ap.parse_args(argv)
    with open(REFERENCE, encoding="utf-8") as f:
        ref = json.load(f)
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gguf_parity_") as directory:
        for name in sorted(ref["tiny"]):
            row = compare(name, ref["tiny"][name], directory)
            rows.append(row)
            print(f"{name:18} {row['architecture']:7} {row['tensor_type']:5} "
                  f"max|diff| {row['max_abs_logit_diff']:.2e}  top-5 {row['top5_equal']}  "
                  f"greedy {row['greedy_equal']}  tokenizer {row['tokenizer_cases_equal']}/"
                  f"{row['tokenizer_cases']}")
        pre_rows = []
        for pre in sorted(ref.get("pretokenizers", {})):
            row = compare_pretokenizer(pre, ref["pretokenizers"][pre], directory)
            pre_rows.append(row)
            print(f"pre-tokenizer {pre:10} ({row['hf_pre_tokenizer']}): pieces "
                  f"{row['pieces_equal']}/{row['cases']}  ids {row['ids_equal']}/{row['cases']}")
    result = {"reference_file": "tests/fixtures/gguf_reference.json",
              "transformers": ref.get("transformers"), "torch": ref.get("torch"),
              "gguf": ref.get("gguf"), "seconds": round(time.perf_counter() - t0, 1),
              "rows": rows, "pretokenizers": pre_rows}
    print(f"{len(rows)} checkpoints; reference: transformers {result['transformers']}, "
          f"torch {result['torch']}")
    if not args.no_save:
        from local_server import save_result
        print("saved", save_result("gguf_parity", result, "bench_gguf_parity.py",
                                   argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
