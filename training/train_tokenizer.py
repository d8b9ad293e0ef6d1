"""Learn the default model's byte-level BPE tokenizer with the project's own trainer.

Writes a tiktoken ranks file (base64 token, rank per line) and tiktoken_config.json
(pattern and special tokens). Vocabulary: 256 bytes + 3839 merges + <|endoftext|> = 4096.

    python training/train_tokenizer.py [--corpus data/corpus/train.txt] [--out models/austen]
"""
import argparse
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from pipeline.bpe import ENDOFTEXT, GPT2_PAT, learn_bpe, ranks_from_merges  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="data/corpus/train.txt")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--out", nargs="+", default=["models/austen"])
    args = ap.parse_args()
    text = open(args.corpus, encoding="utf-8").read()
    t0 = time.time()
    merges = learn_bpe(text, args.vocab_size - 256 - 1)
    ranks = ranks_from_merges(merges)
    print(f"learned {len(merges)} merges in {time.time() - t0:.1f} s")
    for out in args.out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "tokenizer.tiktoken"), "w") as f:
            for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
                f.write(f"{base64.b64encode(token).decode()} {rank}\n")
        with open(os.path.join(out, "tiktoken_config.json"), "w") as f:
            json.dump({"pat_str": GPT2_PAT, "special_tokens": {ENDOFTEXT: len(ranks)}}, f,
                      indent=1)


if __name__ == "__main__":
    main()
