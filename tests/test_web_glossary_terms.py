"""Every glossary term (web/presentation/glossary.py) is defined where a reader first meets it in
each part of
the page: the overview and every section, on the default model and on SmolLM2, with every "Go
deeper" disclosure open. A section is read on its own (it loads as it nears the screen, a link
or a slide opens it), so each marks its own first use of a term: its first occurrence in running
text is a glossary term element (the `term` macro) of that very term, and it is marked once."""
import html
import re

from web.core.registry import SECTIONS
from web.presentation.glossary import GLOSSARY, PATTERNS
from web_support import HX, every_disclosure, text_of, url

# The terms the page had used without defining them; each must be in the glossary and met,
# marked, somewhere on the page (on one model or the other).
ONCE_UNDEFINED = ["GGUF", "Q4_1", "safetensors", "activation cache", "nbytes", "BLAS", "bf16",
                  "fp8", "HBM", "streaming multiprocessor", "GPTQ", "AWQ", "zero point",
                  "entropy", "tied embeddings", "NoPE", "causal mask"]
# ...and the page's other technical words: defined and marked too.
OTHERS = ["logits", "softmax", "RoPE", "residual stream", "KV cache", "quantization", "int8",
          "perplexity", "top-p", "top-k", "min-p", "temperature", "embedding", "float32", "fp16",
          "BPE", "UTF-8", "cosine similarity", "PCA", "attention head", "induction head",
          "RMSNorm", "SwiGLU", "SiLU", "grouped-query attention", "logit lens", "unembedding",
          "greedy", "beam search", "repetition penalty", "chi-square test", "prefill", "decode",
          "roofline", "ridge point", "FLOP per byte", "FLOP", "continuous batching",
          "static batching", "paged KV cache", "throughput", "latency", "speculative decoding",
          "draft model", "prompt lookup", "FlashAttention", "online softmax", "SRAM",
          "dequantize", "held-out", "sinusoidal encoding"]
TERMS = ONCE_UNDEFINED + OTHERS

# Text that cannot hold a button, or is not the page's own prose: links, buttons, labels,
# headings, disclosure summaries, options, form fields, token chips and the model's own text.
NOT_RUNNING_TEXT = [r"<script\b.*?</script>", r"<!--.*?-->", r"<a\b.*?</a>",
                    r"<option\b.*?</option>", r"<label\b.*?</label>", r"<summary\b.*?</summary>",
                    r"<h[1-6]\b.*?</h[1-6]>", r"<textarea\b.*?</textarea>",
                    r'<li class="chip\b.*?</li>', r'<span class="tok\b[^"]*"[^>]*>.*?</span>',
                    r'<p class="greedy"[^>]*>.*?</p>',
                    r'<p class="stream-text">.*?</p>', r"<button\b.*?</button>",
                    # a gated answer's note names the section that asks ("in Logits")
                    r'<p class="answer-gate-note">.*?</p>', r'<p class="ov-gate-note">.*?</p>',
                    # code: names of files, functions, arrays (model.safetensors, hook_q)
                    r"<code\b.*?</code>"]

# a marked term: its key, what the sentence writes before it inside its span ("("), its words
MARKED = re.compile(r'<span class="term" data-term="([^"]+)">([^<]*)<button type="button" '
                    r'class="term-btn"[^>]*>(.*?)</button><span class="term-def"[^>]*>.*?'
                    r'</span></span>', re.S)


def running_text(doc: str) -> tuple:
    """(the running text of an HTML fragment, [(start, end, key)] of its marked terms)."""
    keys = []

    def mark(m):
        keys.append(m.group(1))
        return m.group(2) + "\x01" + m.group(3) + "\x02"
    doc = MARKED.sub(mark, doc)
    for pattern in NOT_RUNNING_TEXT:
        doc = re.sub(pattern, lambda m: " " * 0 + " " + "".join(
            c for c in m.group(0) if c in "\x01\x02"), doc, flags=re.S)
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", doc)))
    spans, out, start, n = [], [], None, 0
    for c in text:                      # the markers out, each marked span's place kept
        if c == "\x01":
            start = len(out)
        elif c == "\x02":
            spans.append((start, len(out), keys[n]))
            n += 1
        else:
            out.append(c)
    assert n == len(keys)
    return "".join(out), spans


def unmarked_first_uses(doc: str, terms=TERMS) -> dict:
    """term -> what is wrong with its first use in `doc`: used unmarked, or marked as another
    term, or marked more than once; terms not used are left out."""
    text, spans = running_text(doc)
    wrong = {}
    for key in terms:
        marks = [s for s in spans if s[2] == key]
        if len(marks) > 1:
            wrong[key] = f"marked {len(marks)} times"
            continue
        # its first use: a match not inside another term's marked words ("logit lens" is
        # not a use of "logits")
        m = next((m for m in PATTERNS[key].finditer(text)
                  if not any(s <= m.start() and m.end() <= e and k != key for s, e, k in spans)
                  and not in_file_name(text, m)), None)
        if m is None:
            continue

        # marked there, or before in other words ("ridge" for the ridge point)
        if not any(s <= m.start() and (m.end() <= e or e <= m.start()) for s, e, _ in marks):

            wrong[key] = "first used unmarked: …" + text[max(0, m.start() - 70):m.end() + 20]
    return wrong


def in_file_name(text: str, m) -> bool:
    """The words are part of a file's name (SmolLM2-135M-Instruct.Q4_1.gguf), not a use."""
    before, after = text[m.start() - 1:m.start()], text[m.end():m.end() + 2]
    return before == "." or (after[:1] == "." and after[1:].isalnum())


def used(doc: str, terms=TERMS) -> set:

    text, _ = running_text(doc)
    return {k for k in terms
            if any(not in_file_name(text, m) for m in PATTERNS[k].finditer(text))}



def test_the_list_s_terms_are_defined_briefly():
    for key in TERMS:
        assert key in GLOSSARY, key
        assert 20 <= len(GLOSSARY[key]) <= 300, key


def test_a_first_use_is_found_marked_or_not():
    """The reader itself: a term's first use in running text, marked or not."""
    marked = ('<span class="term" data-term="KV cache"><button type="button" class="term-btn" '
              'aria-describedby="x">KV cache</button><span class="term-def" role="tooltip" '
              'id="x"><span class="sr-only"> (</span>def<span class="sr-only">)</span></span>'
              '</span>')
    assert unmarked_first_uses(f"<p>The {marked} grows; the KV cache again.</p>",
                               ["KV cache"]) == {}
    wrong = unmarked_first_uses(f"<p>The KV cache, then the {marked}.</p>", ["KV cache"])
    assert wrong["KV cache"].startswith("first used unmarked")
    # a heading, a link or a summary cannot hold the button: the first use is after them
    assert unmarked_first_uses(f"<h3>KV cache</h3><a href='#'>KV cache</a><p>The {marked}</p>",
                               ["KV cache"]) == {}
    assert "marked 2 times" in unmarked_first_uses(f"<p>{marked} {marked}</p>",
                                                   ["KV cache"])["KV cache"]


def section_html(client, section_id, query) -> str:
    r = client.get(url(f"/section/{section_id}", **query), headers=HX)
    assert r.status_code == 200, section_id
    return text_of(r)


def overview_html(client, query) -> str:
    page = text_of(client.get(url("/", **query)))
    return page[page.index("<main>"):page.index('<div id="sections">')]


def check_model(client, query) -> set:
    """Every part of the page on one model: its wrongly defined terms asserted away, the terms
    it uses returned."""
    query = {**query, "open": every_disclosure()}
    parts = {"overview": overview_html(client, query)}
    for s in SECTIONS:
        parts[s.id] = section_html(client, s.id, query)
    # every "Go deeper" of every part open (and there are some)
    disclosures = re.findall(r'<details class="deeper"[^>]*>', "".join(parts.values()))
    assert len(disclosures) >= 20 and all(d.endswith(" open>") for d in disclosures), \
        [d for d in disclosures if not d.endswith(" open>")]
    wrong = {name: w for name, doc in parts.items() if (w := unmarked_first_uses(doc))}
    assert not wrong, "\n".join(f"{name}: {k}: {v}" for name, w in wrong.items()
                                for k, v in w.items())
    # an opening bracket is written inside the term's span (the macro's `before`), which does
    # not wrap: outside it, a line could end with "(" and the term start the next
    opened = {name: re.findall(r'\(\s*<span class="term" data-term="([^"]+)"', doc)
              for name, doc in parts.items()}
    assert not any(opened.values()), {k: v for k, v in opened.items() if v}

    return set().union(*(used(doc) for doc in parts.values()))


def test_every_term_is_marked_at_its_first_use_in_each_part_on_the_default_model(client):
    met = check_model(client, {})
    assert {"causal mask", "NoPE", "entropy", "nbytes", "BLAS", "HBM", "GPTQ", "AWQ",
            "zero point", "tied embeddings", "activation cache", "bf16", "fp8",
            "streaming multiprocessor", "safetensors"} <= met


def test_every_term_is_marked_at_its_first_use_in_each_part_on_smollm2(smol_app):
    with smol_app.app_context():
        # few generated tokens: SmolLM2's loop stays inside a request's time budget on a busy
        # machine (the text around them is the same)
        met = check_model(smol_app.test_client(), {"model": "smollm2", "gen_max": 2,
                                                   "kv_new": 2})

    assert {"GGUF", "Q4_1", "dequantize"} <= met

