"""State.index_within (web/core/params.py): the one check of an index against what this prompt or
model has, with its message and the fallback to the default."""
from web.core.params import Param, parse_state

PARAMS = [Param("tok", "Clicked token", kind="int", min=0, max=9999),          # section's default
          Param("layer", "Layer", kind="int", default=0, min=0, max=99)]


def test_an_index_below_n_is_kept():
    state = parse_state(b"tok=3&layer=2", PARAMS)
    assert state.index_within("tok", 4, "token", default=3) == 3
    assert state.index_within("layer", 3, "layer", "this model has") == 2
    assert state.errors == {}


def test_an_index_past_the_end_gives_the_message_and_the_default():
    state = parse_state(b"tok=9&layer=7", PARAMS)
    assert state.index_within("tok", 5, "token", default=4) == 4
    assert state.index_within("layer", 4, "layer", "this model has") == 0
    assert state.errors == {
        "tok": "Token 9 does not exist: this prompt has 5 tokens (0 to 4).",
        "layer": "Layer 7 does not exist: this model has 4 layers (0 to 3)."}
    assert state.status == 422 and state["tok"] == 4 and state["layer"] == 0


def test_no_value_given_is_the_sections_default_and_the_count_can_be_named():
    state = parse_state(b"", PARAMS)
    assert state.index_within("tok", 5, "token", default=4) == 4 and not state.errors
    assert "tok" not in state.query_string()
    state = parse_state(b"tok=6", PARAMS)
    state.index_within("tok", 6, "row", "the prompt has", "tokens", default=5)
    assert state.errors["tok"] == "Row 6 does not exist: the prompt has 6 tokens (0 to 5)."
