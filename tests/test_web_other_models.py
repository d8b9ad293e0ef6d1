"""Every section, asked for by itself as a lazily loaded section asks, answers 200 with its
content for each fixture checkpoint (another shape than the default model: learned positions,
no or full key/value grouping, untied embeddings, a 64-token context), never a 500."""
import pytest

from engine_support import fixture_names, get_model
from web.core.registry import SECTIONS
from web_support import HX

PROMPT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module", params=fixture_names())
def fixture_client(request):
    from app import create_app
    app = create_app({"MODEL": get_model(request.param), "TESTING": True,
                      "PROBE_ENCODINGS": False, "WARM_CACHES": False})
    return request.param, app.test_client()


@pytest.mark.parametrize("section", [s.id for s in SECTIONS])
def test_every_section_answers_for_every_fixture(fixture_client, section):
    name, client = fixture_client
    r = client.get(f"/section/{section}", query_string={"prompt": PROMPT},
                   headers={**HX, "HX-Target": section})
    assert r.status_code == 200, (name, section, r.status_code)
    assert f'id="{section}"' in r.get_data(as_text=True)
