"""The models an app offers, loaded as its configuration says (app.py create_app's docstring
names the keys): the default model, SmolLM2 when its package is installed, the extra models and
the --model paths, each with its draft model for speculative decoding (load_draft), wrapped as a
web.model_state.loaded.LoadedModel and added to the app's web.model_state.explainer.Explainer. With
DEFER_MODELS (app.py
main), the models beside the default are left to web/serving/server.py, which loads and warms them
after the server answers."""
import dataclasses
import os

from pipeline import ModelLoadError, load_model
from pipeline.speculative import load_draft
from web.model_state import encodings
from web.model_state.explainer import (
    KNOWN_CARDS,
    SMOLLM2_INSTALL,
    Explainer,
    installed_smollm2,
    model_key_name,
)
from web.model_state.loaded import LoadedModel
from web.serving import server as serving
from web.serving import streaming


def offer_models(app) -> None:
    """app.extensions["explainer"]: the models offered now; app.extensions["startup"]: those
    loaded later (web.serving.server.Startup)."""
    cfg = app.config
    paths = list(cfg["MODEL_PATHS"])
    model = cfg.get("MODEL") or load_model(cfg["MODEL_PATH"] or (paths.pop(0) if paths else None))
    others = encodings.probe() if cfg["PROBE_ENCODINGS"] else ()   # the same for every model
    lms = []

    def wrapped(m, draft=None, draft_path=None):
        d, problem = load_draft(m, draft, draft_path)
        if problem and (draft or draft_path):
            app.logger.warning("speculative decoding is off for %s: %s", m.path, problem)
        return LoadedModel.wrap(m, other_encodings=others, draft=d, draft_problem=problem)

    def offer(m, draft=None, draft_path=None):
        lms.append(wrapped(m, draft, draft_path))

    # DEFER_MODELS (app.py main): the models beside the default are loaded and warmed after the
    # server answers (web/serving/server.py run), each under the key it would have had here
    later = []

    def offer_path(path):
        if not cfg.get("DEFER_MODELS"):
            return offer(load_model(path))
        if not os.path.exists(path):
            raise ModelLoadError(f"{path}: no such model directory or file")
        later.append(path)

    offer(model, cfg.get("DRAFT_MODEL"), cfg.get("DRAFT_MODEL_PATH"))
    absent = []
    if cfg.get("INSTALLED_MODELS", not cfg.get("MODEL")):
        smollm2 = installed_smollm2()
        if smollm2 is None:
            absent.append(("SmolLM2-135M-Instruct", SMOLLM2_INSTALL))
        elif smollm2 not in [m.path for m in (model, *cfg.get("EXTRA_MODELS", ()))] + paths:
            offer_path(smollm2)
    for m in cfg.get("EXTRA_MODELS", ()):
        offer(m)
    for path in paths:
        offer_path(path)
    explainer = Explainer({}, lms[0].key, tuple(absent), slots=streaming.StreamSlots(
        streaming.MAX_STREAMS))
    for lm in lms:
        if lm.key in explainer.models:   # two files of the same name: the second is numbered
            lm = dataclasses.replace(lm, key=f"{lm.key}-{len(explainer.models) + 1}")
        explainer.add(lm)
    app.extensions["explainer"] = explainer
    startup = app.extensions["startup"] = serving.Startup(
        lambda path, key, load=load_model: dataclasses.replace(wrapped(load(path)), key=key))
    taken, after = set(explainer.models), explainer.default
    for path in later:
        key = model_key_name(path)
        key = f"{key}-{len(taken) + 1}" if key in taken else key
        taken.add(key)
        startup.add_pending(key, path, KNOWN_CARDS[key].title if key in KNOWN_CARDS else key,
                            after)
        after = key
    missing = [o for o in others if o.encoding is None]
    if missing:      # the page shows only the encodings that loaded; the operator is told why
        app.logger.warning("tokenization: other encodings not shown: %s", "; ".join(
            f"{o.name}: {o.problem}" for o in missing))
