"""The model cards' counted figures (training/model_card.py): each is computed from the model
files or the corpus, and the shipped cards say what the computation gives."""
import json
import os
import sys

import pytest

from pipeline import load_model

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "training"))
import model_card  # noqa: E402

MODELS = {name: os.path.join(ROOT, "models", name) for name in ("austen", "austen-draft")}
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "models")
CORPUS = os.path.join(ROOT, "data", "corpus")


def card(name):
    return open(os.path.join(MODELS[name], "MODEL_CARD.md"), encoding="utf-8").read()


def test_tokenizer_figures_are_counted_from_the_ranks_file():
    tok = model_card.tokenizer_facts(MODELS["austen"])
    with open(os.path.join(MODELS["austen"], "tokenizer.tiktoken")) as f:
        n_ranks = sum(1 for line in f if line.strip())
    assert tok["n_bytes"] == 256                       # every single byte is a token
    assert tok["n_merges"] == n_ranks - 256
    assert tok["special"] == {"<|endoftext|>": 4095}
    assert tok["n_vocab"] == load_model(MODELS["austen"]).config.vocab_size
    assert (f"{tok['n_bytes']:,} byte tokens + {tok['n_merges']:,} merges + `<|endoftext|>` "
            f"(id 4095) = {tok['n_vocab']:,}") in card("austen")


@pytest.mark.parametrize("name", list(MODELS))
def test_architecture_and_context_follow_config_json(name):
    model = load_model(MODELS[name])
    c = model.config
    assert f"- Architecture: {model_card.architecture(c)}." in card(name)
    assert f"context {c.n_ctx} tokens" in model_card.architecture(c)
    assert f"- Parameters: {model.n_params():,} " in card(name)
    assert f"in windows of {c.n_ctx} tokens" in card(name)
    if name == "austen":
        assert f"Context is {c.n_ctx} tokens" in card(name)


def test_architecture_of_other_shapes():
    untied = load_model(os.path.join(FIXTURES, "llama_untied")).config
    assert untied.tied_embeddings is False
    text = model_card.architecture(untied)
    assert "separate input and output embeddings" in text and "tied" not in text
    mqa = load_model(os.path.join(FIXTURES, "llama_mqa")).config
    assert "multi-query attention" in model_card.architecture(mqa)
    mha = load_model(os.path.join(FIXTURES, "llama_mha")).config
    assert "multi-head attention" in model_card.architecture(mha)
    assert f"{mha.n_heads} heads (head size" in model_card.architecture(mha)
    gpt2 = load_model(os.path.join(FIXTURES, "gpt2")).config
    text = model_card.architecture(gpt2)
    assert text.startswith("GPT-2-style decoder (LayerNorm, learned position table, GELU")


def test_names_are_counted_in_their_novel_s_training_chapters(tmp_path):
    split = {"Book A": {"chapters": 3, "heldout_chapter_indices": [1]},
             "Book B": {"chapters": 2, "heldout_chapter_indices": []}}
    (tmp_path / "split.json").write_text(json.dumps(split))
    chapters = ["Sir Thomas came. Sir Thomasina left.", "Sir Thomas, again; sir Thomas.",
                "Sir Thomas", "Sir Thomas in B"]
    (tmp_path / "train.txt").write_text("\n\n".join(chapters) + "\n")
    novels = model_card.novel_chapters(str(tmp_path))
    assert novels == {"Book A": "\n\n".join(chapters[:2]), "Book B": "\n\n".join(chapters[2:])}
    assert list(novels) == ["Book A", "Book B"]
    # whole words only, case as written
    assert model_card.occurrences("Sir Thomas", novels["Book A"]) == 2
    assert model_card.occurrences("Sir Thomas", novels["Book B"]) == 2
    assert model_card.name_phrase("Fanny could not help thinking of Sir", " Thomas") == \
        "Sir Thomas"
    # a split that does not account for every chapter is refused
    (tmp_path / "train.txt").write_text("\n\n".join(chapters + ["extra"]) + "\n")
    with pytest.raises(ValueError, match="accounts for 4 training chapters"):
        model_card.novel_chapters(str(tmp_path))


def test_famous_summary_counts_what_the_table_shows():
    facts = dict(novels={"Emma": "Harriet Smith and Harriet Smith."},
                 train_text="It is a truth universally acknowledged. Harriet Smith")
    rows = [dict(source="Emma (a name)", prompt="little friend, Harriet", expected=" Smith",
                 rank=1),
            dict(source="X, ch. 1", prompt="It is a truth universally", expected=" acknowledged",
                 rank=3),
            dict(source="X, ch. 2", prompt="not in it", expected=" at all", rank=40),
            dict(source="X, ch. 3", prompt="It is a", expected=" truth", rank=1)]
    s = model_card.famous_summary(rows, facts)
    assert (s["hits"], s["name_hits"], s["name_counts"]) == (2, 1, [2])
    assert (s["n_lines"], s["n_verbatim"], s["line_hits"]) == (3, 2, 1)
    assert s["median_line_rank"] == 3 and s["verbatim_counts"] == [1]
    assert model_card.times([1]) == "once each" and model_card.times([1, 3]) == \
        "1 to 3 times each"


@pytest.mark.skipif(not os.path.exists(os.path.join(CORPUS, "split.json")),
                    reason="data/corpus is made by python training/prepare_corpus.py")
def test_corpus_figures_in_the_card_are_the_corpus_s():
    from pipeline.tokenizer import load_tiktoken_dir
    enc = load_tiktoken_dir(MODELS["austen"])
    train = model_card.token_ids(enc, os.path.join(CORPUS, "train.txt"))
    held = model_card.token_ids(enc, os.path.join(CORPUS, "heldout.txt"))
    facts = model_card.corpus_facts(CORPUS, train, held)
    text = card("austen")
    assert (f"is held out ({facts['n_heldout_chapters']} of {facts['n_chapters']} chapters, "
            f"{100 * facts['heldout_share']:.0f}% of the characters") in text
    assert f"Tokens: {len(train):,} for training, {len(held):,} held out." in text
    measured = json.load(open(os.path.join(MODELS["austen"], "measurements.json")))
    for row in measured["famous_lines"]:
        assert f"| {model_card.famous_source(row, facts)} |" in text
        if row["source"].endswith("(a name)"):
            assert "times)" in model_card.famous_source(row, facts)


def test_held_out_token_counts_agree_with_the_measurement():
    """The card's held-out tokens, and those scored (one fewer: the first has no context), are
    the numbers measurements.json's perplexity was computed on."""
    with open(os.path.join(MODELS["austen"], "measurements.json")) as f:
        scored = json.load(f)["heldout_tokens"]
    assert (f"{scored + 1:,} held out ({scored:,} of them scored for the held-out perplexity"
            in card("austen"))
