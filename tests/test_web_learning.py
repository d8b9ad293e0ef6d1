"""Page-level state of the learning experience: tour steps, presentation mode, theme, and the
predict-then-reveal answer in the logits section."""
import html
import re

import numpy as np
import pytest

from web.core.registry import SECTIONS
from web.presentation.tour import tour_steps
from web_support import HX, error_message, text_of, url


def test_every_registered_section_is_a_tour_step_in_page_order():
    steps = tour_steps(SECTIONS)
    assert [s.target for s in steps] == ["prompt"] + [s.id for s in SECTIONS]
    assert [s.number for s in steps] == list(range(1, len(SECTIONS) + 2))
    assert [s.text for s in steps[1:]] == [s.tour for s in SECTIONS]
    assert all(len(s.tour) > 150 for s in SECTIONS)


def test_the_page_opens_the_tour_at_the_step_in_the_url(client):
    page = text_of(client.get(url("/", tour=4, present=1, theme="dark")))
    step = tour_steps(SECTIONS)[3]
    assert re.search(r'<body [^>]*class="present"', page) and 'data-theme="dark"' in page
    assert re.search(r'<aside id="tour"[^>]*>', page).group(0).find("hidden") == -1
    current = re.search(r'<li class="tour-step" data-step="4" data-target="(\w+)">', page)
    assert current and current.group(1) == step.target
    assert page.count('class="tour-step"') == len(SECTIONS) + 1
    assert len(re.findall(r'class="tour-step"[^>]*hidden', page)) == len(SECTIONS)
    closed = text_of(client.get("/"))
    assert re.search(r'<aside id="tour"[^>]*hidden', closed)


@pytest.mark.parametrize("query,name,message", [
    (dict(tour=99), "tour", f"The tour has {len(SECTIONS) + 1} steps; there is no step 99."),
    (dict(tour=-1), "tour", "between 0 and 99"),
    (dict(present=2), "present", "between 0 and 1"),
    (dict(theme="<b>pink"), "theme", "Theme must be one of auto, light, dark"),
    (dict(theme="x" * 11), "theme", "the limit is 10"),
])
def test_bad_page_state_gets_a_message_and_a_4xx(client, query, name, message):
    response = client.get(url("/", **query))
    assert response.status_code == 422 or response.status_code == 400
    assert message in error_message(text_of(response), name)
    assert "<b>pink" not in text_of(response)


def test_the_next_token_prediction_hides_the_models_top_token(client, model):
    prompt = "She was the youngest of the two daughters"
    page = text_of(client.get(url("/section/logits", prompt=prompt), headers=HX))
    top = int(np.argmax(model.forward(model.tokenizer.encode(prompt))[-1]))
    word = model.tokenizer.decode_single_token_bytes(top).decode().strip()
    box = re.search(r'<div class="predict" data-predict="next-token" data-answer="([^"]*)"'
                    r' data-kind="token" data-gate="([^"]*)">', page)
    assert box and html.unescape(box.group(1)) == word
    # the gate blurs the answer itself (the table's top token and its id, the bar chart), not
    # the section's other numbers or its opened disclosures
    gated = box.group(2).split()
    assert gated == ["lg-top-token", "lg-top-id", "lg-probs"]
    for id_ in gated:
        assert f'id="{id_}"' in page
    assert re.search(r'<q class="pair" id="lg-top-token">([^<]*)</q>', page).group(1) \
        .replace("·", " ").strip() == html.escape(word, quote=False)
    assert re.search(r'<td id="lg-top-id">(\d+)</td>', page).group(1) == str(top)
    assert re.search(r'<div class="predict-reveal" hidden', page)
