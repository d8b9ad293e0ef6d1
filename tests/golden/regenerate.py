"""Regenerate the golden greedy continuations of the default model (only when weights change).

    python tests/golden/regenerate.py
"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
from pipeline import load_model  # noqa: E402
from pipeline.generation import decode_loop  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "austen_greedy.json")
PROMPTS = ["It is a truth universally acknowledged", "Mr. Darcy", "Emma was", "The weather was",
           "\u201cI cannot", "She is tolerable; but not handsome enough to"]
N_NEW = 24


def continuation(model, prompt):
    prompt_ids = model.tokenizer.encode(prompt)
    ids = [p.token for p in decode_loop(model, prompt_ids, max_new_tokens=N_NEW)]
    return {"prompt": prompt, "ids": ids, "text": model.tokenizer.decode(ids)}


def main():
    model = load_model()
    with open(GOLDEN, "w") as f:
        json.dump([continuation(model, p) for p in PROMPTS], f, indent=1, ensure_ascii=False)
    print("wrote", GOLDEN)


if __name__ == "__main__":
    main()
