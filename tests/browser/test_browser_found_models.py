"""The model picker in real Chromium lists a GGUF file found in the --models folder, with what
its header says, refuses one the engine cannot run, and choosing the found one shows the loading
page, which reloads itself onto the page once the model is loaded: the page then runs on it (its
overview's chosen token is the model's own)."""
import re
import threading

import gguf
import numpy as np
import pytest
from playwright.sync_api import expect
from waitress.server import create_server

from gguf_support import write_checkpoint
from pipeline import discovery, load_model
from web.core.sampler_settings import default_settings


@pytest.fixture(scope="module")
def found_app(model, tmp_path_factory):
    """The app with a folder holding a small GPT-2 GGUF (context 1024: the default prompt fits)
    and a file of an architecture the engine does not run, served by waitress."""
    from app import create_app
    folder = tmp_path_factory.mktemp("found")
    path = write_checkpoint(str(folder / "tiny-gpt2.gguf"), "gpt2_f32", 11)
    w = gguf.GGUFWriter(str(folder / "encoder.gguf"), "bert")
    w.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    app = create_app({"MODEL": model, "PROBE_ENCODINGS": False, "WARM_CACHES": False,
                      "FOUND_MODEL_DIRS": (str(folder),), "MEMORY_AVAILABLE": 10**10})
    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    yield app, f"http://127.0.0.1:{server.effective_port}", path
    server.close()


def test_the_picker_shows_a_found_model_and_choosing_it_runs_the_page_on_it(
        page, found_app, page_errors):
    from pipeline.sampling import sampler
    app, base, path = found_app
    page.goto_first_screen(base + "/")
    page.locator("summary", has_text="Model:").click()                     # open the picker
    found = page.get_by_role("list", name="GGUF files found on this machine")
    entry = found.get_by_role("listitem").filter(has_text="tiny-gpt2.gguf")
    d = discovery.describe(discovery.FoundFile(path, "folder", "tiny-gpt2.gguf"))
    expect(entry).to_contain_text(f"{d.n_params:,} (from the tensor shapes)")
    expect(entry).to_contain_text("gpt2")
    expect(entry).to_contain_text(discovery.types_text(d.types))
    refused = found.get_by_role("listitem").filter(has_text="encoder.gguf")
    expect(refused.get_by_role("note")).to_contain_text("architecture 'bert'")
    expect(refused.get_by_role("link")).to_have_count(0)

    # while another found model's load holds the lock, the choice answers with the loading
    # page at once; once the lock is free the model loads and the page reloads itself onto it
    with app.extensions["found_models"].load_lock(app):
        entry.get_by_role("link").click()
        expect(page.get_by_role("heading", level=1)).to_have_text(f"{d.title} is warming up")
        expect(page.get_by_role("status")).to_contain_text(f"{d.title} is loading")
        expect(page.get_by_role("status")).to_contain_text(
            f"(step 1 of {d.n_tensors + 4})")
        assert not app.extensions["found_models"].job("tiny-gpt2").done.is_set()
    expect(page).to_have_url(re.compile(r"model=tiny-gpt2"))
    expect(page.locator("summary", has_text="Model:")).to_contain_text(d.title)
    lm = app.extensions["explainer"].models["tiny-gpt2"]
    reference = load_model(path)
    ids = reference.tokenizer.encode_ordinary(lm.default_prompt)
    settings, seed = default_settings(lm)
    token = sampler(settings, seed)(reference.forward(ids)[-1], list(ids))
    chosen = page.locator("#overview").get_by_role("list", name="Chosen next token") \
        .locator(".tid")
    expect(chosen).to_have_text(str(token))
    # the loading page's own status (503), nothing else
    assert [e for e in page_errors if "status of 503" not in e] == [] and page_errors
