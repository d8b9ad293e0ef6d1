"""Measure the trained models with the NumPy engine and write their model cards.

Everything in the cards is measured or counted here, on the shipped files and the corpus:
held-out perplexity (engine), the unigram baseline on the same tokens, the famous-lines check,
greedy sample completions, the loss curve from training_log.json (also drawn as an SVG), the
corpus split (data/corpus/split.json), the tokenizer's merges (its ranks file), the models'
shapes (config.json) and how often each name occurs in its novel's training chapters.

    python training/model_card.py            # after training; rewrites models/*/MODEL_CARD.md
"""
import json
import math
import os
import re
import statistics
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
from pipeline import load_model  # noqa: E402
from pipeline.generation import decode_loop  # noqa: E402
from pipeline.model import token_nll  # noqa: E402

# Well-known lines and the original next word. The source is "<novel>, ch. <n>" for a line of
# the novel, "<novel> (a name)" for a name the novel repeats (write_card counts how often), or
# says where else the line comes from.
FAMOUS_LINES = [
    ("Pride and Prejudice, ch. 1",
     "It is a truth universally acknowledged, that a single man in possession of a good "
     "fortune, must be in want of a", " wife"),
    ("Pride and Prejudice, ch. 1",
     "\u201cMy dear Mr. Bennet,\u201d said his lady to him one day, \u201chave you heard that "
     "Netherfield Park is let at", " last"),
    ("Pride and Prejudice, ch. 3", "She is tolerable; but not handsome enough to", " tempt"),
    ("Pride and Prejudice (the 2005 film's line, not the novel's)",
     "you have bewitched me, body and", " soul"),
    ("Emma, ch. 1",
     "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy",
     " disposition"),
    ("Sense and Sensibility, ch. 1", "The family of Dashwood had long been settled in",
     " Sussex"),
    ("Northanger Abbey, ch. 1",
     "No one who had ever seen Catherine Morland in her infancy would have supposed her born "
     "to be an", " heroine"),
    ("Persuasion, ch. 1", "Sir Walter Elliot, of Kellynch Hall, in", " Somersetshire"),
    ("Mansfield Park, ch. 1", "About thirty years ago Miss Maria Ward, of Huntingdon, with only "
     "seven thousand", " pounds"),
    ("Pride and Prejudice, ch. 1", "You mistake me, my dear. I have a high respect for your",
     " nerves"),
    ("Pride and Prejudice, ch. 1", "You take delight in vexing me. You have no compassion for my "
     "poor", " nerves"),
    ("Pride and Prejudice (a name)", "the advice of Lady Catherine de", " Bourgh"),
    ("Emma (a name)", "Mr. Weston's son, Frank", " Churchill"),
    ("Persuasion (a name)", "Anne had never seen Captain", " Wentworth"),
    ("Sense and Sensibility (a name)", "Marianne and Colonel", " Brandon"),
    ("Mansfield Park (a name)", "Fanny could not help thinking of Sir", " Thomas"),
    ("Emma (a name)", "Emma's little friend, Harriet", " Smith"),
]

SAMPLE_PROMPTS = ["It is a truth universally acknowledged", "Mr. Darcy", "Emma was",
                  "The weather was", "\u201cI cannot"]


def token_ids(enc, path):
    ids = []
    for chapter in open(path, encoding="utf-8").read().strip().split("\n\n"):
        ids.extend(enc.encode_ordinary(chapter))
        ids.append(enc.eot_token)
    return np.array(ids)


def heldout_nll(model, ids):
    """Mean negative log-likelihood (nats/token) over non-overlapping windows as long as the
    model's context (n_ctx tokens)."""
    total, n = 0.0, 0
    window = model.config.n_ctx
    for s in range(0, len(ids) - 1, window):
        x, y = ids[s:s + window], ids[s + 1:s + window + 1]
        x = x[:len(y)]
        total += float(token_nll(model.forward(list(x)), y).sum())
        n += len(y)
    return total / n


def unigram_nll(train_ids, held_ids, vocab):
    counts = np.bincount(train_ids, minlength=vocab) + 1.0  # add-one smoothing
    logp = np.log(counts / counts.sum())
    return float(-logp[held_ids[1:]].mean())  # same targets as the model's windows


def famous_lines(model):
    enc, rows = model.tokenizer, []
    for source, prompt, word in FAMOUS_LINES:
        logits = model.forward(enc.encode(prompt))[-1]
        order = np.argsort(-logits)
        first = enc.encode(word)[0]
        rows.append({"source": source, "prompt": prompt, "expected": word,
                     "expected_token": enc.decode([first]),
                     "top1": enc.decode([int(order[0])]),
                     "rank": int(np.where(order == first)[0][0]) + 1})
    return rows


def novel_chapters(corpus_dir) -> dict:
    """title -> its training chapters' text. train.txt holds the novels' chapters in the order
    of split.json, held-out chapters removed (training/prepare_corpus.py)."""
    split = json.load(open(os.path.join(corpus_dir, "split.json"), encoding="utf-8"))
    chapters = open(os.path.join(corpus_dir, "train.txt"), encoding="utf-8").read() \
        .strip().split("\n\n")
    out, start = {}, 0
    for title, info in split.items():
        n = info["chapters"] - len(info["heldout_chapter_indices"])
        out[title] = "\n\n".join(chapters[start:start + n])
        start += n
    if start != len(chapters):
        raise ValueError(f"split.json accounts for {start} training chapters, train.txt holds "
                         f"{len(chapters)}")
    return out


def occurrences(phrase, text) -> int:
    """Whole-word occurrences of phrase in text."""
    return len(re.findall(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text))


def name_phrase(prompt, word) -> str:
    """The name a '(a name)' line tests: the prompt's last word and the original next word."""
    return prompt.split()[-1] + word


def corpus_facts(corpus_dir, train_ids, held_ids) -> dict:
    """What the card says about the corpus, counted from prepare_corpus.py's output."""
    split = json.load(open(os.path.join(corpus_dir, "split.json"), encoding="utf-8"))
    chars = {name: len(open(os.path.join(corpus_dir, f"{name}.txt"), encoding="utf-8").read()
                       .strip()) for name in ("train", "heldout")}
    novels = novel_chapters(corpus_dir)
    train_text = "\n\n".join(novels.values())
    return dict(
        titles=list(split), n_chapters=sum(v["chapters"] for v in split.values()),
        n_heldout_chapters=sum(len(v["heldout_chapter_indices"]) for v in split.values()),
        heldout_share=chars["heldout"] / (chars["train"] + chars["heldout"]),
        novels=novels, train_text=train_text,
        n_train_tokens=len(train_ids), n_heldout_tokens=len(held_ids))


def tokenizer_facts(model_dir) -> dict:
    """Byte tokens, merges and special tokens of the ranks file and its config."""
    from pipeline.tokenizer import read_ranks
    ranks = read_ranks(os.path.join(model_dir, "tokenizer.tiktoken"))
    special = json.load(open(os.path.join(model_dir, "tiktoken_config.json"),
                             encoding="utf-8")).get("special_tokens", {})
    n_bytes = sum(len(token) == 1 for token in ranks)
    return dict(n_bytes=n_bytes, n_merges=len(ranks) - n_bytes, special=special,
                n_vocab=len(ranks) + len(special))


def famous_source(row, facts) -> str:
    """The row's source, with the count of its name in the novel's training chapters."""
    source = row["source"]
    if source.endswith("(a name)"):
        novel = source[:-len(" (a name)")]
        phrase = name_phrase(row["prompt"], row["expected"])
        n = occurrences(phrase, facts["novels"][novel])
        source = f"{novel} (a name: {phrase.strip()!r}, {n:,} times)"
    return source


def greedy(model, prompt, n=30):
    enc = model.tokenizer
    ids = enc.encode(prompt)
    out = [p.token for p in decode_loop(model, ids, max_new_tokens=n)]
    return enc.decode(out)


def svg_curve(curve, title):
    w, h, pad = 640, 320, 48
    xs = [p["tokens_seen"] / 1e6 for p in curve]
    series = {"train": [p["train_loss"] for p in curve],
              "held-out": [p["heldout_loss"] for p in curve]}
    lo = math.floor(min(min(v) for v in series.values()))
    hi = math.ceil(max(max(v) for v in series.values()))
    X = lambda x: pad + (w - 2 * pad) * x / max(xs)  # noqa: E731
    Y = lambda y: h - pad - (h - 2 * pad) * (y - lo) / (hi - lo)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle">{title}</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">tokens seen (millions)</text>',
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" '
             f'text-anchor="middle">loss (nats/token)</text>']
    for v in range(lo, hi + 1):
        parts.append(f'<text x="{pad - 6}" y="{Y(v) + 4}" text-anchor="end">{v}</text>')
    for t in range(0, int(max(xs)) + 1, max(1, int(max(xs)) // 8)):
        parts.append(f'<text x="{X(t)}" y="{h - pad + 16}" text-anchor="middle">{t}</text>')
    for (name, ys), color, ly in zip(series.items(), ("#1f77b4", "#d62728"), (40, 58), strict=True):
        pts = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in zip(xs, ys, strict=True))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{w - pad - 80}" y="{ly}" fill="{color}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def measure(directory, train_ids, held_ids):
    model = load_model(directory)
    log = json.load(open(os.path.join(directory, "training_log.json")))
    nll = heldout_nll(model, held_ids)
    uni = unigram_nll(train_ids, held_ids, model.config.vocab_size)
    with open(os.path.join(directory, "loss_curve.svg"), "w") as f:
        f.write(svg_curve(log["curve"], f"{os.path.basename(directory)}: loss while training"))
    return model, log, nll, uni


def main():
    from pipeline.tokenizer import load_tiktoken_dir
    main_dir, draft_dir = os.path.join(ROOT,
                                       "models/austen"), os.path.join(ROOT, "models/austen-draft")
    corpus_dir = os.path.join(ROOT, "data/corpus")
    enc = load_tiktoken_dir(main_dir)
    train_ids = token_ids(enc, os.path.join(corpus_dir, "train.txt"))
    held_ids = token_ids(enc, os.path.join(corpus_dir, "heldout.txt"))
    facts = corpus_facts(corpus_dir, train_ids, held_ids)
    facts["tokenizer"] = tokenizer_facts(main_dir)
    results = {}
    for d in (main_dir, draft_dir):
        model, log, nll, uni = measure(d, train_ids, held_ids)
        results[d] = dict(model=model, log=log, nll=nll, uni=uni,
                          famous=famous_lines(model),
                          samples=[(p, greedy(model, p)) for p in SAMPLE_PROMPTS])
        with open(os.path.join(d, "measurements.json"), "w") as f:
            json.dump({"heldout_nll": nll, "heldout_perplexity": math.exp(nll),
                       "unigram_nll": uni, "unigram_perplexity": math.exp(uni),
                       "heldout_tokens": int(len(held_ids) - 1),
                       "famous_lines": results[d]["famous"]}, f, indent=1, ensure_ascii=False)
    write_cards(main_dir, draft_dir, results, facts)


def count_words(n) -> str:
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    return words[n] if n < len(words) else f"{n:,}"


def architecture(c) -> str:
    """The model's shape in words, from its config.json."""
    family = "Llama-style" if c.model_type == "llama" else "GPT-2-style"
    norm = {"rms_norm": "RMSNorm", "layer_norm": "LayerNorm"}[c.norm]
    positions = (f"RoPE base {c.rope_theta:g}" if c.positions == "rope"
                 else "learned position table")
    mlp = {"swiglu": "SwiGLU", "gelu": "GELU"}[c.mlp]
    if c.n_kv_heads == c.n_heads:
        attention, heads = "multi-head attention", f"{c.n_heads} heads"
    else:
        attention = "multi-query attention" if c.n_kv_heads == 1 else "grouped-query attention"
        heads = f"{c.n_heads} query heads sharing {c.n_kv_heads} key/value heads"
    embeddings = ("tied input/output embeddings" if c.tied_embeddings
                  else "separate input and output embeddings")
    return (f"{family} decoder ({norm}, {positions}, {mlp}, {attention}), {c.n_layers} layers, "
            f"width {c.d_model}, {heads} (head size {c.head_dim}), feed-forward {c.d_ff}, "
            f"context {c.n_ctx} tokens, {embeddings}")


def card_section(name, r, len_train):
    model, log = r["model"], r["log"]
    last = log["curve"][-1]
    exported = next(p for p in log["curve"] if p["step"] == log["exported_at_step"])
    n_params = model.n_params()
    if n_params != log["parameters"]:
        raise ValueError(f"{name}: the weights hold {n_params:,} parameters, the training log "
                         f"says {log['parameters']:,}")
    lines = [f"### {name}", "",
             f"- Architecture: {architecture(model.config)}.",
             f"- Parameters: {n_params:,} (float32: {n_params * 4 / 1e6:.1f} MB).",
             f"- Trained: {last['step']:,} steps of {log['batch_tokens']:,} tokens = "
             f"{last['tokens_seen']:,} tokens seen in {last['minutes']:.0f} minutes on "
             f"{log['hardware']}; AdamW (lr {log['lr']}, weight decay {log['weight_decay']}), "
             f"dropout {log['dropout']}. The shipped weights are those of step "
             f"{exported['step']:,} (the best held-out loss), after "
             f"{exported['tokens_seen']:,} tokens ({exported['tokens_seen'] / len_train:.1f} "
             f"passes over the training text).",
             f"- Held-out perplexity: **{math.exp(r['nll']):.1f}** ({r['nll']:.3f} nats/token, "
             f"in windows of {model.config.n_ctx} tokens) "
             f"vs a unigram baseline (token frequencies of the training text, add-one "
             f"smoothed) on the same tokens: {math.exp(r['uni']):.1f} "
             f"({r['uni']:.3f} nats/token).", ""]
    return lines


def famous_summary(rows, facts) -> dict:
    """What the famous-lines table shows, counted: the hits, which of them are names and how
    often those names occur in their novel's training chapters, and the ranks of the others."""
    hits = [r for r in rows if r["rank"] == 1]
    name_hits = [r for r in hits if r["source"].endswith("(a name)")]
    name_counts = [occurrences(name_phrase(r["prompt"], r["expected"]),
                               facts["novels"][r["source"][:-len(" (a name)")]])
                   for r in name_hits]
    lines = [r for r in rows if not r["source"].endswith("(a name)")]
    seen = [facts["train_text"].count(r["prompt"] + r["expected"]) for r in lines]
    return dict(hits=len(hits), name_hits=len(name_hits), name_counts=name_counts,
                n_lines=len(lines), n_verbatim=sum(n > 0 for n in seen),
                verbatim_counts=sorted({n for n in seen if n > 0}),
                curly_quotes="\u201c" in facts["train_text"],
                line_hits=sum(r["rank"] == 1 for r in lines),
                median_line_rank=statistics.median(r["rank"] for r in lines))


def times(counts) -> str:
    """'once each', 'twice each' or '1 to 3 times each' for a sorted list of counts."""
    if len(counts) == 1:
        return {1: "once each", 2: "twice each"}.get(counts[0], f"{counts[0]} times each")
    return f"{counts[0]} to {counts[-1]} times each"


def write_cards(main_dir, draft_dir, results, facts):
    main_r, draft_r = results[main_dir], results[draft_dir]
    tok = facts["tokenizer"]
    (eot, eot_id), = tok["special"].items()
    n_train = facts["n_train_tokens"]
    main_params = main_r["model"].n_params()
    summary = famous_summary(main_r["famous"], facts)
    out = ["# Model card: austen (default model) and austen-draft", "",
           "Two small Llama-style language models trained by this project, from scratch, on the "
           f"{count_words(len(facts['titles']))} novels of Jane Austen. They exist so the "
           "explainer runs a real transformer on any machine with no download. Every number "
           "below was measured or counted by `python training/model_card.py` on the shipped "
           "files and the corpus, with the project's NumPy engine.", "",
           "## Corpus and licence", "",
           f"Jane Austen's {count_words(len(facts['titles']))} completed novels "
           f"({', '.join(facts['titles'])}), as packaged in Debian's "
           "`r-cran-janeaustenr` (texts from Project Gutenberg, public domain; R packaging MIT, "
           "Julia Silge). `training/prepare_corpus.py` fetches the package with `apt-get "
           "download`, reads the R data with the standard library, unwraps the hard-wrapped "
           "paragraphs, drops the `_` italics marks, and splits by whole chapters: every 20th "
           f"chapter of each novel, from the 10th, is held out ({facts['n_heldout_chapters']} "
           f"of {facts['n_chapters']} chapters, {100 * facts['heldout_share']:.0f}% of the "
           "characters; `data/corpus/split.json`). Chapters are separate documents ending in "
           f"`{eot}`.", "",
           f"Tokens: {n_train:,} for training, {facts['n_heldout_tokens']:,} held out "
           f"({facts['n_heldout_tokens'] - 1:,} of them scored for the held-out perplexity: "
           "each is predicted from the ones before it, the first has none).", "",
           "## Tokenizer", "",
           "Byte-level BPE learned by the project's own trainer (`pipeline/bpe.py`, run by "
           "`training/train_tokenizer.py`) on the training text with GPT-2's pre-tokenizer "
           f"pattern: {tok['n_bytes']:,} byte tokens + {tok['n_merges']:,} merges + `{eot}` "
           f"(id {eot_id}) = {tok['n_vocab']:,}. Stored "
           "as a tiktoken ranks file (`tokenizer.tiktoken` + `tiktoken_config.json`) and used "
           "through `tiktoken.Encoding`. The draft model shares it.", "",
           "## Models", ""]
    out += card_section("austen (the default model)", main_r, n_train)
    out += card_section("austen-draft (draft model for speculative decoding)", draft_r, n_train)
    out += ["The weights are a standard Hugging Face checkpoint: `config.json` + "
            "`model.safetensors`, loadable by `transformers.LlamaForCausalLM` with the same "
            "logits as the engine (checked by `tests/test_default_model.py`).", "",
            "## Loss curve", "",
            "![austen loss curve](loss_curve.svg)", "",
            "Data: `training_log.json` (`curve`: step, tokens seen, minutes, learning rate, "
            "training-batch loss, held-out loss). The draft's is in "
            "`../austen-draft/training_log.json`.", "",
            "## Does it know its corpus?", "",
            "The next token after well-known lines, top-1 of the default model and the rank of "
            "the original word's first token. A name's count is how often it occurs in its "
            f"novel's training chapters. {summary['n_verbatim']} of the "
            f"{summary['n_lines']} other lines occur word for word in the training text "
            f"({times(summary['verbatim_counts'])}); the rest differ from the corpus's wording"
            + ("" if summary["curly_quotes"] else
               " or quotation marks (the corpus has straight quotes only)")
            + " or are not in the novel:", "",
            "| source | prompt ends | original | model's top-1 | rank (austen) | rank (draft) |",
            "|---|---|---|---|---|---|"]
    for row, drow in zip(main_r["famous"], draft_r["famous"], strict=True):
        tail = row["prompt"][-48:].replace("|", "\\|")
        out.append(f"| {famous_source(row, facts)} | \u2026{tail} | `{row['expected']}` | "
                   f"`{row['top1']}` | {row['rank']} | {drow['rank']} |")
    counts = summary["name_counts"]
    out += ["", f"{summary['hits']} of {len(main_r['famous'])} are top-1 for the default model: "
            f"{summary['name_hits']} names, which occur {min(counts):,} to {max(counts):,} times "
            f"in their novel's training chapters, and {summary['line_hits']} of the "
            f"{summary['n_lines']} lines. For the lines, the original word's median rank is "
            f"{summary['median_line_rank']:g}: a {main_params / 1e6:.1f} M-parameter model "
            "trained with dropout and stopped at its best held-out loss generalises rather than "
            "memorises sentences it saw once.", "",
            "## Sample completions (greedy, 30 tokens)", ""]
    for name, r in (("austen", main_r), ("austen-draft", draft_r)):
        out.append(f"**{name}**")
        out.append("")
        for prompt, text in r["samples"]:
            out.append(f"- *{prompt}* \u2192 {json.dumps(text, ensure_ascii=False)}")
        out.append("")
    main_log, draft_log = main_r["log"], draft_r["log"]
    out += ["## Known limits", "",
            f"- It knows only Austen's English of 1811-1817 and {n_train:,} training tokens of "
            "it: modern words split into many tokens and it has no facts about the world.",
            "- Greedy decoding soon falls into loops; sampling reads better but wanders. It "
            "knows the names the novels repeat, not the famous sentences they say once "
            f"(median rank {summary['median_line_rank']:g} above).",
            f"- Context is {main_r['model'].config.n_ctx} tokens"
            + (f" ({draft_r['model'].config.n_ctx} for the draft)"
               if draft_r['model'].config.n_ctx != main_r['model'].config.n_ctx else "")
            + ": the engine refuses longer inputs.",
            "- The draft model is much weaker; it exists to propose tokens cheaply.", "",
            "## Reproduce", "",
            "```", "pip install -r training/requirements.txt",
            "python training/prepare_corpus.py", "python training/train_tokenizer.py "
            "--out models/austen models/austen-draft",
            f"python training/train_model.py --preset {main_log['preset']} "
            f"--minutes {main_log['curve'][-1]['minutes']:.0f}",
            f"python training/train_model.py --preset {draft_log['preset']} "
            f"--minutes {draft_log['curve'][-1]['minutes']:.0f}",
            "python training/model_card.py", "```", "",
            "Wall-clock times include periods when other jobs shared the two cores. "
            "Training on CPU threads is not bit-reproducible and the learning-rate schedule "
            "follows wall-clock time, so a rerun gives a similar, not identical, model."]
    with open(os.path.join(main_dir, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    draft_card = ["# Model card: austen-draft", "",
                  "The draft model for speculative decoding: the default model's small sibling, "
                  "same corpus and tokenizer. Its card is shared with the default model's: "
                  "[../austen/MODEL_CARD.md](../austen/MODEL_CARD.md).", ""]
    draft_card += card_section("austen-draft", draft_r, n_train)
    with open(os.path.join(draft_dir, "MODEL_CARD.md"), "w") as f:
        f.write("\n".join(draft_card))


if __name__ == "__main__":
    main()
