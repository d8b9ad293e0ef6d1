"""The answers of the page's predict-first questions, for every place that shows one.

A question (templates/macros.html `predict`) hides its answer until it is answered or skipped:
the elements it names (data-gate) and every element marked with its id and answer
(`answer_gate`: data-answer-of, data-answer), in any section, stay blurred until then
(static/predict.js). A place that shows the answer (the next token in a chart, a continuation of
the prompt, the cache's bytes) is marked with the same answer the question compares, computed
here: the key the question and the places share.
"""
from pipeline.kvcache import kv_bytes_per_token
from pipeline.ranking import top_k
from web.model_state.forward import prompt_run
from web.presentation.overview import answer_text


def next_token_answer(lm, prompt: str) -> str:
    """The Logits section's "next-token" answer: the top token after the prompt, as that
    question compares it (web.presentation.overview.answer_text)."""
    return answer_text(lm.tokenizer, int(top_k(prompt_run(lm, prompt).next_logits, 1)[0]))


def kv_bytes_answer(lm) -> int:
    """The KV cache section's "kv-bytes" answer: the bytes one token adds to a float32 cache."""
    return kv_bytes_per_token(lm.model.config, 4)
