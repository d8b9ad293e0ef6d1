"""web.core.params: a Param's choices and open lower bound are checked with the query, with the
page's
usual message naming the parameter; State.one_of checks a set of choices known only once the
model is; the control macro renders a select's options from its Param."""
import re

import pytest
from flask import render_template_string

from web.core.params import Param, parse_state
from web.core.registry import all_params
from web_support import HX, error_message, text_of, url

COLOUR = Param("colour", "Colour", default="red", max_chars=10, choices=("red", "green"))
BITS = Param("bits", "Bits", kind="int", default=16, choices=(16, 8, 4))
TOP_P = Param("top_p", "Top-p", kind="float", default=0.9, min=0.0, max=1.0, min_open=True,
              min_why="0 would remove every token")
K = Param("k", "K", kind="int", default=3, min=0, max=9, min_open=True)


def parsed(query: str, *params):
    return parse_state(query.encode(), list(params))


@pytest.mark.parametrize("param,raw,value", [
    (COLOUR, "green", "green"), (BITS, "8", 8), (BITS, "+4", 4), (TOP_P, "0.01", 0.01),
    (TOP_P, "1", 1.0), (K, "1", 1), (K, "9", 9),
])
def test_allowed_values_pass(param, raw, value):
    state = parsed(f"{param.name}={raw}", param)
    assert state.errors == {} and state[param.name] == value


@pytest.mark.parametrize("param,raw,status,message", [
    (COLOUR, "blue", 422, "Colour must be one of red, green; got 'blue'."),
    (COLOUR, "Red", 422, "Colour must be one of red, green; got 'Red'."),
    (COLOUR, "b" * 11, 422, "Colour is 11 characters long; the limit is 10."),
    (BITS, "5", 422, "Bits must be one of 16, 8, 4; got 5."),
    (BITS, "32", 422, "Bits must be one of 16, 8, 4; got 32."),
    (BITS, "eight", 400, "Bits must be a whole number, not 'eight'."),
    (TOP_P, "0", 422, "Top-p must be greater than 0 (0 would remove every token); got 0."),
    (TOP_P, "0.0", 422, "Top-p must be greater than 0 (0 would remove every token); got 0."),
    (TOP_P, "-0.5", 422, "Top-p must be between 0 and 1; got -0.5."),
    (TOP_P, "1.5", 422, "Top-p must be between 0 and 1; got 1.5."),
    (K, "0", 422, "K must be greater than 0; got 0."),
])
def test_refused_values_name_the_parameter_and_fall_back_to_the_default(param, raw, status,
                                                                       message):
    state = parsed(f"{param.name}={raw}", param)
    assert state.errors == {param.name: message}
    assert state.statuses[param.name] == status
    assert state[param.name] == param.default


def test_numeric_choices_give_the_range_their_ends():
    assert (BITS.min, BITS.max) == (4, 16)
    assert Param("b", "B", kind="int", default=2, min=1, max=32, choices=(2, 4)).max == 32
    assert BITS.choices == (16, 8, 4) and isinstance(
        Param("c", "C", choices=["a", "b"]).choices, tuple)


def test_one_of_checks_choices_known_later_with_the_same_message():
    p = Param("part", "Part", default="q", max_chars=30)
    state = parsed("part=k", p)
    assert state.one_of("part", ["q", "k"]) == "k" and state.errors == {}
    state = parsed("part=pos", p)
    assert state.one_of("part", {"q": 1, "k": 2}) == "q"
    assert state.errors["part"] == "Part must be one of q, k; got 'pos'."
    assert state.statuses["part"] == 422
    long = parsed("part=" + "z" * 25, p)      # shortened to 20 characters
    long.one_of("part", ["q"])
    assert long.errors["part"] == "Part must be one of q; got 'zzzzzzzzzzzzzzzzzzzz…'."


def test_every_choice_of_a_registered_parameter_is_valid_and_its_default_is_one():
    for p in all_params():
        if p.choices is not None:
            assert p.default in p.choices, p.name
            for c in p.choices:
                assert parsed(f"{p.name}={c}", p).errors == {}, (p.name, c)


@pytest.mark.parametrize("query,name,message", [
    (dict(theme="sepia"), "theme", "Theme must be one of auto, light, dark; got 'sepia'."),
    (dict(rf_bits="2"), "rf_bits", "Bits per weight must be one of 16, 8, 4; got 2."),
    (dict(s_topp="0"), "s_topp", "Top-p must be greater than 0 (0 would remove every token); "
                                 "got 0."),
    (dict(s_rep="0"), "s_rep", "Repetition penalty must be greater than 0 (0 would remove "
                               "every token); got 0."),
    (dict(sp_mode="beam"), "sp_mode", "Decoding must be one of sample, greedy; got 'beam'."),
    (dict(q_group="16"), "q_group", "Group size must be one of 32, 64, 128; got 16."),
    (dict(bat_reserve="all"), "bat_reserve",
     "What a contiguous cache reserves must be one of context, limit; got 'all'."),
    (dict(til_model="GPT-5"), "til_model", "Published model must be one of GPT-2 small, GPT-2 "
     "medium, GPT-2 large, GPT-2 XL, SmolLM 135M, TinyLlama 1.1B, Llama 3.2 1B, Llama 3.2 3B, "
     "Llama 2 7B, Llama 3 8B, Llama 3.1 8B, Llama 2 70B, Llama 3 70B, Llama 3.1 70B, "
     "Llama 3.1 405B; got 'GPT-5'."),
    (dict(gen_choose="beam"), "gen_choose",
     "The token chooser must be one of greedy, sampler; got 'beam'."),
])
def test_the_page_refuses_them_next_to_the_control_with_a_422(client, query, name, message):
    r = client.get(url("/", **query))
    assert r.status_code == 422
    assert error_message(text_of(r), name) == message


def test_a_long_list_of_choices_is_named_by_its_first_few_and_its_last():
    p = Param("m", "Matrix", default="a")
    names = [f"m{i}" for i in range(28)]
    assert p.choice_message("x", names) == ("Matrix must be one of m0, m1, m2, …, m27 (28 in all); "
                                            "got 'x'.")
    assert p.choice_message("x", names[:16]).count(",") == 15        # up to 16: every one


def test_a_matrix_this_model_lacks_is_refused_next_to_its_control_with_a_422(client, model):
    from pipeline.quantize import linear_weights
    names = list(linear_weights(model.params))
    r = client.get(url("/section/quantization", q_matrix="wte"), headers=HX)
    assert r.status_code == 422
    assert error_message(text_of(r), "q_matrix") == (
        f"Matrix must be one of {', '.join(names[:3])}, …, {names[-1]} ({len(names)} in all); "
        "got 'wte'.")
    assert f'<option value="{names[6]}" selected>' in text_of(r)   # this model's default: w_down


def test_a_select_without_options_lists_its_params_choices(app):
    template = ('{% from "macros.html" import control %}'
                '{{ control(state, "s", "bits", "p", "select") }}'
                '{{ control(state, "s", "colour", "p", "select", options=[("red", "Red!")]) }}')
    with app.test_request_context("/"):
        html = render_template_string(template, state=parsed("bits=8", BITS, COLOUR))
    bits = re.search(r'<select id="bits".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="(\d+)"( selected)?>(\d+)</option>', bits) == [
        ("16", "", "16"), ("8", " selected", "8"), ("4", "", "4")]
    colour = re.search(r'<select id="colour".*?</select>', html, re.S).group(0)
    assert re.findall(r"<option[^>]*>([^<]*)</option>", colour) == ["Red!"]   # given: kept


def test_a_value_given_twice_is_one_value_and_two_values_are_refused():
    """The page's sampler has controls in the overview and in Sampling that share names: a
    form with both sends the name twice, with one value (kept equal), which is one value; two
    different values are refused, with the control's label."""
    from web.core.params import parse_state
    from web.core.registry import all_params
    state = parse_state(b"s_temp=0.5&s_temp=0.5", all_params())
    assert state.errors == {} and state["s_temp"] == 0.5
    state = parse_state(b"s_temp=0.5&s_temp=0.7", all_params())
    assert state.status_of(["s_temp"]) == 400
    assert "Temperature is given 2 times in the address, with different values" in \
        state.errors["s_temp"]
