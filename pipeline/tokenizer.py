"""Tokenizers, always as a `tiktoken.Encoding`.

A model directory holds either
  - tokenizer.tiktoken (base64 token + rank per line) and tiktoken_config.json
    ({"pat_str": ..., "special_tokens": {...}}): the project's own format, or
  - vocab.json + merges.txt: Hugging Face byte-level BPE (GPT-2 style).
"""
import base64
import json
import os

import tiktoken

RANKS_FILE = "tokenizer.tiktoken"
TIKTOKEN_CONFIG = "tiktoken_config.json"


def read_ranks(path: str) -> dict:
    """tiktoken's ranks file: one `base64(token) rank` per line."""
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_tiktoken_dir(directory: str, name: str = None) -> tiktoken.Encoding:
    ranks = read_ranks(os.path.join(directory, RANKS_FILE))
    with open(os.path.join(directory, TIKTOKEN_CONFIG)) as f:
        cfg = json.load(f)
    return tiktoken.Encoding(name or os.path.basename(os.path.normpath(directory)),
                             pat_str=cfg["pat_str"], mergeable_ranks=ranks,
                             special_tokens=cfg.get("special_tokens", {}))
