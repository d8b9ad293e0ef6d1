"""GGUF files already on the machine (pipeline/discovery.py, web/model_state/found.py): found in
folders and
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
from web.model_state.disk_cache import DiskCache
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
                                  "llama3_f32", "phi3_longrope_f32", "gemma3_linear_f32",
                                  "phi4mini_f32"])
def test_the_description_is_what_the_file_says(tmp_path, name):
    """The RoPE divisor tensors (Llama 3.1's rope_freqs, Phi-3's rope_factors_long / _short) are
    no parameters, and the header has no values for them: the rest of the config is the
    engine's."""
    path = tiny(tmp_path / f"{name}.gguf", name)
    d = discovery.describe(discovery.FoundFile(path, "folder", "x"))
    reader = gguf.GGUFReader(path)                       # llama.cpp's own reader
    params = [t for t in reader.tensors if t.name not in (
        "rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")]
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
    from_values = ("rope_freq_factors", "rope_long_factors", "rope_short_factors",
                   "rope_original_ctx")
    assert d.runnable and d.config == model.config.__class__(
        **{**model.config.__dict__, **{k: getattr(d.config, k) for k in from_values}})
    # the engine's float32 copy: 4 bytes a parameter, as the loaded arrays hold
    held = sum(a.nbytes for a in _arrays(model.params))
    if model.config.tied_embeddings:                     # the unembedding is a view of wte
        held -= model.params["unembed"].nbytes
    assert held == 4 * d.n_params
    assert float32_memory_bytes(d.config, d.n_params, 64) == \
        4 * d.n_params + kv_cache_bytes(model.config, 64)


@pytest.mark.parametrize("pre", ["gpt-4o", "tekken", "starcoder", "refact", "phi-2"])
def test_a_file_with_a_reproduced_pretokenizer_is_runnable(tmp_path, pre):
    """The picker offers a file whose tokenizer.ggml.pre the engine reproduces (Phi-4-mini's
    "gpt-4o", Mistral Nemo's "tekken", ...), and it loads with that split; a name the engine
    does not reproduce (llama.cpp's several-regex "deepseek-llm") is refused with the name."""
    from pipeline.gguf_file import PRE_PATTERNS
    path = write_checkpoint(str(tmp_path / f"{pre}.gguf"), "phi4mini_f32", 3, pre=pre)
    d = discovery.describe(discovery.FoundFile(path, "folder", f"{pre}.gguf"))
    assert d.runnable and d.problem == ""
    assert load_model(path).pat_str == PRE_PATTERNS[pre]
    other = write_checkpoint(str(tmp_path / "deepseek.gguf"), "phi4mini_f32", 3,
                             pre="deepseek-llm")
    d = discovery.describe(discovery.FoundFile(other, "folder", "deepseek.gguf"))
    assert not d.runnable
    assert d.problem == "pre-tokenizer 'deepseek-llm' is not one the engine reproduces"


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


def choose(app, query, headers=None):
    """Open the page on a found model as a student does: the first answer is the 503 loading
    page (or, when the load has already ended, the page itself); once the load's thread is
    done, the page."""
    client = app.test_client()
    r = client.get("/", query_string=query, headers=headers)
    if r.status_code == 503:
        assert r.headers["Retry-After"] == "2" and "is loading" in text_of(r)
        job = app.extensions["found_models"].job(query["model"])
        assert job.done.wait(120)
        r = client.get("/", query_string=query, headers=headers)
    return r


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
    r = choose(app, {"model": "tiny-llama", "prompt": "It is a"})
    assert r.status_code == 200 and "tiny-llama" in app.extensions["explainer"].models


def test_choosing_a_found_model_loads_it_shared_and_the_page_renders(tmp_path):
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    app.extensions["disk_cache"] = DiskCache(str(tmp_path / "data"))
    assert "tiny-llama" not in app.extensions["explainer"].models      # not loaded when listed
    r = choose(app, {"model": "tiny-llama", "prompt": "It is a"})
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
    r = choose(again, {"model": "tiny-llama", "prompt": "It is"})
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
    from web.serving import command_line
    with pytest.raises(SystemExit) as e:
        command_line.parse(["--models", str(tmp_path / "nowhere")], "x")
    assert e.value.code == 2
    args, config = command_line.parse(["--models", str(folder)], "x")
    assert config["FOUND_MODEL_DIRS"] == (str(folder),)


def test_a_big_models_memory_counts_the_kv_cache_of_the_prompt_the_page_reads(smollm2):
    """SmolLM2 (134.5 M parameters: big) found in a folder: its memory is its float32 copy plus
    the KV cache of the 128 tokens the page reads of a big model (web.model_state.loaded), not of
    its
    8,192-token context; the numbers are the loaded model's."""
    from web.model_state.found import Found
    from web.model_state.loaded import BIG_MODEL_PROMPT_TOKENS
    smol = smollm2                          # tests/conftest.py: loaded once, from its package
    d = discovery.describe(discovery.FoundFile(smol.path, "folder", "smollm2.gguf"))
    assert d.n_params == smol.n_params() == 134_515_008
    entry = Found("smollm2", d)
    assert entry.context == BIG_MODEL_PROMPT_TOKENS < smol.config.n_ctx
    assert entry.memory_bytes == 4 * smol.n_params() + kv_cache_bytes(smol.config, 128)
    assert entry.refusal(entry.memory_bytes - 1) == (
        f"needs {entry.memory_bytes / 1e6:.1f} MB as float32, this machine has "
        f"{(entry.memory_bytes - 1) / 1e6:.1f} MB free")


# --- a chosen model loads behind a page that answers at once ------------------------------------

def shared_app(folder, data, **config):
    """The app as a worker of the server has it: with the data dir's disk cache."""
    app = make_app(folder, MEMORY_AVAILABLE=10**9, **config)
    app.extensions["disk_cache"] = DiskCache(str(data))
    return app


def test_the_first_choice_answers_at_once_and_one_load_runs_behind_it(tmp_path):
    """Two students choose the model while another load holds the server's load lock: both get
    the 503 loading page at once, one load is begun, and it has not ended when they are
    answered; once it has, the page renders on the model, whose arrays were written once."""
    import threading
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = shared_app(folder, tmp_path / "data")
    found, disk = app.extensions["found_models"], app.extensions["disk_cache"]
    query = {"model": "tiny-llama", "prompt": "It is a"}
    answers = []
    barrier = threading.Barrier(2)

    def student():
        client = app.test_client()
        barrier.wait()
        answers.append(client.get("/", query_string=query))
    with found.load_lock(app):                       # another found model is loading
        students = [threading.Thread(target=student) for _ in range(2)]
        for s in students:
            s.start()
        for s in students:
            s.join()
        job = found.job("tiny-llama")
        assert not job.done.is_set()                 # answered before the load ended
        assert [r.status_code for r in answers] == [503, 503]
        n = len(gguf.GGUFReader(path).tensors)
        for r in answers:
            page = text_of(r)
            assert r.headers["Retry-After"] == "2" and r.headers["Cache-Control"] == "no-store"
            assert '<meta http-equiv="refresh" content="2">' in page
            assert "tiny llama_q8_0 is loading" in page and f"(step 1 of {n + 4})" in page
        assert job.record["step"] == "waiting for another found model's load to finish" or \
            job.record["step"] == "starting its load"          # its thread may not have run yet
        r = app.test_client().get("/", query_string=query, headers={"HX-Request": "true"})
        assert r.status_code == 503 and r.mimetype == "text/plain" and "is loading" in r.text
        assert found.loads_started == 1 and disk.written == 0
        assert "tiny-llama" not in app.extensions["explainer"].models
    assert job.done.wait(120) and job.problem == ""
    r = app.test_client().get("/", query_string=query)
    assert r.status_code == 200 and found.loads_started == 1 and disk.written == 1
    lm = app.extensions["explainer"].models["tiny-llama"]
    assert 'aria-current="true">' + lm.card.title in text_of(r)
    assert found.states.read("tiny-llama") == {
        "state": "ready", "step": "ready", "done": n + 4, "steps": n + 4,
        "file": [os.path.getsize(path), os.stat(path).st_mtime_ns]}


class Recorded:
    """Stands for a web.model_state.found.Load: every record it is given, in order (what the loading
    page
    showed, step by step)."""

    def __init__(self):
        self.seen = []

    def __setattr__(self, name, value):
        if name == "record":
            self.seen.append(value)
        object.__setattr__(self, name, value)


def test_the_loads_steps_are_the_files_tensors_and_a_second_worker_only_maps(tmp_path):
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = shared_app(folder, tmp_path / "data")
    found = app.extensions["found_models"]
    job = Recorded()
    found.load(app, found.get("tiny-llama"), job)
    names = [t.name for t in gguf.GGUFReader(path).tensors]
    n = len(names)
    steps = [r["step"] for r in job.seen]
    assert steps[:3] == ["waiting for another found model's load to finish",
                         "hashing the file (it names the kept arrays)",
                         "reading its header and vocabulary"]
    dequantized = [s.removesuffix(")").split(" (") for s in steps[3:3 + n]]
    assert [d[0] for d in dequantized] == [f"dequantizing tensor {i} of {n}"
                                           for i in range(1, n + 1)]
    assert sorted(d[1] for d in dequantized) == sorted(names)      # each tensor once
    assert steps[3 + n:] == ["writing its float32 arrays to the data directory",
                             "mapping its float32 arrays from the data directory"]
    assert [r["done"] for r in job.seen] == [0, 0, 1, *range(2, n + 2), n + 2, n + 3]
    assert {r["steps"] for r in job.seen} == {n + 4}
    # another worker of the server (the same data dir) maps the kept arrays: no dequantizing
    other = shared_app(folder, tmp_path / "data")
    job = Recorded()
    other.extensions["found_models"].load(other, other.extensions["found_models"]
                                          .get("tiny-llama"), job)
    assert [r["step"] for r in job.seen] == [
        "hashing the file (it names the kept arrays)",
        "mapping its float32 arrays from the data directory"]
    assert other.extensions["disk_cache"].written == 0


def test_a_new_worker_maps_the_models_chosen_before_it_started(tmp_path):
    """A new generation of workers is forked from the supervisor, which never loaded the found
    model: serving.serve_worker runs the app's worker_start, which maps it again from the data
    dir (a fork is played here by taking the model out of the app's models)."""
    folder = tmp_path / "models"
    tiny(folder / "tiny-llama.gguf")
    tiny(folder / "other.gguf", seed=4)
    app = shared_app(folder, tmp_path / "data")
    found, disk = app.extensions["found_models"], app.extensions["disk_cache"]
    assert choose(app, {"model": "tiny-llama", "prompt": "It is"}).status_code == 200
    explainer = app.extensions["explainer"]
    loaded = explainer.models["tiny-llama"]
    explainer.models = {k: v for k, v in explainer.models.items() if k != "tiny-llama"}
    for started in app.extensions["worker_start"]:
        started()
    assert found.loads_started == 1 and found.job("other") is None    # only the chosen one
    assert found.job("tiny-llama").done.wait(60)
    again = explainer.models["tiny-llama"]
    assert again is not loaded and disk.written == 1 and disk.read == 1
    assert again.model.params["wte"].filename == loaded.model.params["wte"].filename
    r = app.test_client().get("/", query_string={"model": "tiny-llama", "prompt": "It is"})
    assert r.status_code == 200


def test_a_file_that_fails_to_load_says_why_and_is_not_loaded_again(tmp_path):
    """A file whose header is sound but whose first tensor holds NaN: listed, chosen, loading
    page, then a 422 saying why (the next requests too, without a new load), until the file is
    replaced."""
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf", "llama_f32")
    h = discovery.read_header(path)
    t = h.tensors[0]
    with open(path, "r+b") as f:
        f.seek(h.data_start + t.offset)
        f.write(b"\xff" * t.n_bytes)                 # float32 NaN
    app = shared_app(folder, tmp_path / "data")
    found = app.extensions["found_models"]
    assert found.get("tiny-llama").d.runnable        # the header alone cannot tell
    reason = f"{path}: tensor {t.name!r} holds NaN or infinite values"
    r = choose(app, {"model": "tiny-llama"})
    assert r.status_code == 422 and found.job("tiny-llama").problem == reason
    assert f"is not offered: it could not be loaded: {reason}." in \
        text_of(r).replace("&#39;", "'")
    r = app.test_client().get("/?model=tiny-llama", headers={"HX-Request": "true"})
    assert r.status_code == 422 and r.mimetype == "text/plain" and reason in r.text
    assert found.loads_started == 1 and found.states.read("tiny-llama")["state"] == "failed"
    assert found.failure(found.get("tiny-llama")) == reason
    # another worker reads the failure from the shared state (here: the same process's map)
    tiny(folder / "tiny-llama.gguf", "llama_f32")   # replaced by a sound file: loaded
    r = choose(app, {"model": "tiny-llama"})
    assert r.status_code == 200 and found.loads_started == 2


# --- a found model's first prompt -------------------------------------------------------------

def test_a_found_model_suggests_a_general_prompt_that_fits(tmp_path):
    from web.model_state.explainer import KNOWN_CARDS
    folder = tmp_path / "models"
    path = tiny(folder / "tiny-llama.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    r = choose(app, {"model": "tiny-llama"})
    assert r.status_code == 200
    lm = app.extensions["explainer"].models["tiny-llama"]
    general = KNOWN_CARDS["smollm2"].prompts
    assert lm.default_prompt == "The capital of France is" == general[0]
    enc = lm.tokenizer.encode_ordinary
    assert lm.card.prompts == tuple(p for p in general if 2 * len(enc(p)) <= lm.n_ctx == 64)
    assert general[-1] not in lm.card.prompts                # the Austen line is too long
    assert 'name="prompt"' in text_of(r) and "The capital of France is" in text_of(r)
    assert lm.card.title == "tiny llama_q8_0" and "licence: public domain test weights" in \
        lm.card.source
    # a context of 6 tokens: the first prompt cut to its first 3 tokens
    tiny_ctx = folder / "six.gguf"
    raw = open(path, "rb").read()
    key = b"llama.context_length"
    at = raw.index(key) + len(key)
    assert raw[at:at + 8] == (4).to_bytes(4, "little") + (64).to_bytes(4, "little")
    tiny_ctx.write_bytes(raw[:at + 4] + (6).to_bytes(4, "little") + raw[at + 8:])
    app = make_app(folder, MEMORY_AVAILABLE=10**9)
    r = choose(app, {"model": "six"})
    assert r.status_code == 200
    lm = app.extensions["explainer"].models["six"]
    assert lm.n_ctx == 6
    ids = enc(general[0])
    assert len(ids) > 3 and lm.card.prompts == (lm.tokenizer.decode(ids[:3]).rstrip(),)
    assert general[0].startswith(lm.default_prompt) and len(enc(lm.default_prompt)) <= 3


@pytest.mark.parametrize("warm", [True, False])
def test_a_found_model_is_warmed_once_loaded_as_the_built_in_ones_are(tmp_path, warm):
    """WARM_FOUND_MODELS (web/serving/server.py run sets it): once loaded, a found model goes
    through the server's own warm-up (web.serving.server.warm: every section's warm) before its
    pages are served, the loading page saying so; its first section request then measures
    nothing, the cost table the warm-up made is read. Without it, that request measures."""
    import time

    from web.model_state import measured
    from web_support import HX
    folder = tmp_path / "models"
    tiny(folder / "tiny-llama.gguf")
    app = make_app(folder, MEMORY_AVAILABLE=10**9, WARM_FOUND_MODELS=warm)
    explainer, found = app.extensions["explainer"], app.extensions["found_models"]
    client = app.test_client()
    query = {"model": "tiny-llama", "prompt": "It is a"}
    with measured._measuring:                  # a measurement waits until the test lets it
        assert client.get("/", query_string=query).status_code == 503
        job = found.job("tiny-llama")
        if warm:
            deadline = time.time() + 120
            while not str(job.record.get("step")).startswith("warming: ") and \
                    time.time() < deadline:
                time.sleep(0.02)
            assert "tiny-llama" in explainer.models and not job.done.is_set()
            r = client.get("/", query_string=query)
            assert r.status_code == 503
            assert "tiny llama_q8_0 is loaded and warming up" in text_of(r)
            assert f"{job.record['step']} (step " in text_of(r)
            r = client.get("/section/generation", query_string=query, headers=HX)
            assert r.status_code == 503 and "warming up" in r.text
    assert job.done.wait(300) and job.problem == ""
    with app.app_context():
        before = measured.measurements()
    r = client.get("/section/generation", query_string=query, headers=HX)
    assert r.status_code == 200
    with app.app_context():
        after = measured.measurements()
    if warm:
        assert before > 0 and after == before
    else:
        assert before == 0 and after > 0
