"""Command line: run the engine without the web app.

    python -m pipeline generate [--model DIR|FILE.gguf] [--max-new-tokens N] "prompt"
        streams the greedy continuation to the terminal, token by token
    python -m pipeline logits [--model DIR|FILE.gguf] (--text "..." | --ids 1,2,3) [--top K]
        prints {"ids": [...], "top": [{"id", "text", "logit", "prob"}, ...]} for the last position

--model is a Hugging Face style directory or a llama.cpp .gguf file; without it, the project's
default model (models/austen).
"""
import argparse
import json
import sys

from .generation import TextStream, decode_loop
from .loader import ModelLoadError, load_model
from .model import softmax
from .ranking import top_k


def generate(model, prompt: str, max_new_tokens: int, out=sys.stdout) -> None:
    tok = model.tokenizer
    ids = tok.encode(prompt, allowed_special="all")
    # A token may end in the middle of a UTF-8 character: TextStream holds those bytes back
    # until the rest arrives.
    text = TextStream(tok)
    out.write(prompt)
    out.flush()
    for token in (p.token for p in decode_loop(model, ids, max_new_tokens)):
        if token == model.config.eos_token_id:
            break
        out.write(text.push(token))
        out.flush()
    out.write(text.flush() + "\n")
    out.flush()


def top_logits(model, ids: list, k: int) -> dict:
    logits = model.forward(ids)[-1]                                      # [V]
    probs = softmax(logits)
    top = top_k(logits, k)
    tok = model.tokenizer

    def text(i):  # ids past the tokenizer's vocabulary (padding rows) have no text
        try:
            return tok.decode_single_token_bytes(i).decode("utf-8", errors="replace")
        except KeyError:
            return None

    return {"ids": [int(i) for i in ids],
            "top": [{"id": int(i), "text": text(int(i)), "logit": float(logits[i]),
                     "prob": float(probs[i])} for i in top]}


def parse_ids(s: str) -> list:
    try:
        return [int(x) for x in s.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="stream a greedy continuation of a prompt")
    g.add_argument("prompt")
    g.add_argument("--max-new-tokens", type=int, default=50)
    lg = sub.add_parser("logits", help="top-k next-token logits as JSON")
    which = lg.add_mutually_exclusive_group(required=True)
    which.add_argument("--text")
    which.add_argument("--ids", type=parse_ids)
    lg.add_argument("--top", type=int, default=10)
    for p in (g, lg):
        p.add_argument("--model", metavar="DIR or .gguf",
                       help="model directory or .gguf file (default: models/austen)")
    args = ap.parse_args(argv)

    try:
        model = load_model(args.model)
    except ModelLoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.command == "generate":
            generate(model, args.prompt, args.max_new_tokens)
        else:
            ids = args.ids if args.ids is not None else \
                model.tokenizer.encode(args.text, allowed_special="all")
            print(json.dumps(top_logits(model, ids, args.top), ensure_ascii=False))
    except ValueError as e:  # empty prompt, ids out of range, longer than the context
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
