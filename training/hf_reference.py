"""Record what Hugging Face `transformers` computes on the shipped default models.

Loads models/austen and models/austen-draft with `LlamaForCausalLM.from_pretrained` (no
network) and writes tests/fixtures/austen_hf_reference.json: for a few prompts, the token ids,
the last position's logits and 20 greedy tokens. tests/test_default_model.py compares the
NumPy engine with these numbers (so the suite needs no torch), and live when transformers is
installed. Rerun whenever the weights change:

    pip install -r training/requirements.txt && python training/hf_reference.py
"""
import json
import os
import sys

import torch
from transformers import LlamaForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
from pipeline.tokenizer import load_tiktoken_dir  # noqa: E402

PROMPTS = ["It is a truth universally acknowledged", "Mr. Darcy was", "\u201cI cannot"]


@torch.inference_mode()
def reference(directory):
    enc = load_tiktoken_dir(directory)
    model = LlamaForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    out = []
    for prompt in PROMPTS:
        ids = enc.encode(prompt)
        logits = model(torch.tensor([ids])).logits[0, -1]
        seq = list(ids)
        for _ in range(20):  # greedy, recomputing the whole sequence each step
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
        out.append({"prompt": prompt, "input_ids": ids,
                    "last_logits": [round(float(v), 6) for v in logits],
                    "greedy_ids": seq[len(ids):]})
    return out


def main():
    torch.set_num_threads(2)
    data = {name: reference(os.path.join(ROOT, "models", name))
            for name in ("austen", "austen-draft")}
    path = os.path.join(ROOT, "tests/fixtures/austen_hf_reference.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"transformers_version": __import__("transformers").__version__,
                   "models": data}, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
