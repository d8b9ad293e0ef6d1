"""Benchmark each section's server work for a 32-token prompt on the default model.

For every registered section it prints the median, over --repeat renders, of
  - build:    the section's build(lm, state), the view's work (data + figures), forward pass
              already cached (web.model_state.forward.prompt_run keeps it);
  - figures:  the part of build spent in its figure builders (web.figures.<section>), which
              return the figure JSON;
  - data:     build minus figures: the numbers the section computes;
and, once, the forward pass with the activation cache that the forward-pass sections share.
Times are this process's CPU time (time.process_time), so other jobs on the machine change them
less than wall-clock time; with one BLAS thread the two are the same on an idle machine.
Target: the forward-pass sections' data together < 30 ms. Then the heaviest
requests a section allows (HEAVIEST), each the first render for a new prompt.

    python bench/bench_sections.py [--repeat N] [--only attention,feedforward]
"""
import argparse
import functools
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPT = ("It is a truth universally acknowledged, that a single man in possession of a good "
          "fortune, must be in want of a wife. However little known")
FORWARD_FAMILY = ("embeddings", "positions", "block", "attention", "feedforward", "logits")
# The most work one request may ask of a section (web/core/limits.py), each timed on its first
# render
# for a prompt not seen before (nothing cached but the model), the median over --repeat prompts.
HEAVIEST = (
    ("sampling", "100,000 draws at temperature 0.9", {"s_draws": 100000, "s_temp": 0.9}, 0.5),
    ("decoding", "beam search, 8 beams x 12 new tokens", {"b_width": 8, "b_new": 12}, 1.0),
)


class FigureTimer:
    """Wraps the public functions of a section's figure module to add up the time inside."""

    def __init__(self, module):
        self.seconds = 0.0
        for name in dir(module):
            fn = getattr(module, name)
            if callable(fn) and not name.startswith("_") and \
                    getattr(fn, "__module__", None) == module.__name__:
                setattr(module, name, self._timed(fn))

    def _timed(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - t0
        return wrapper


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="renders per section (median shown)")
    ap.add_argument("--only", help="comma-separated section ids")
    args = ap.parse_args(argv)

    import urllib.parse

    from pipeline import load_model
    from web.core.params import parse_state
    from web.core.registry import SECTIONS, all_params
    from web.model_state.forward import prompt_run
    from web.model_state.loaded import LoadedModel

    lm = LoadedModel.wrap(load_model(None), probe_encodings=False)
    t0 = time.process_time()
    run = prompt_run(lm, PROMPT)
    forward = time.process_time() - t0
    print(f"prompt: {len(run.ids)} tokens; forward pass with cache: {forward * 1000:.1f} ms "
          "(once, shared)")
    query = ("prompt=" + urllib.parse.quote(PROMPT)).encode()
    only = set(args.only.split(",")) if args.only else None
    print(f"{'section':14s} {'build':>9s} {'figures':>9s} {'data':>9s}   (ms, median of "
          f"{args.repeat})")
    family_data = 0.0
    for s in SECTIONS:
        if only and s.id not in only:
            continue
        module = sys.modules[s.build.__module__]
        timer = FigureTimer(module.figures) if hasattr(module, "figures") else None
        s.build(lm, parse_state(query, all_params()))          # warm per-model caches
        builds, figs = [], []
        for _ in range(args.repeat):
            state = parse_state(query, all_params())
            if timer:
                timer.seconds = 0.0
            t0 = time.process_time()
            s.build(lm, state)
            builds.append(time.process_time() - t0)
            figs.append(timer.seconds if timer else 0.0)
        build, fig = statistics.median(builds), statistics.median(figs)
        data = statistics.median(b - f for b, f in zip(builds, figs, strict=True))
        if s.id in FORWARD_FAMILY:
            family_data += data
        print(f"{s.id:14s} {build * 1000:9.1f} {fig * 1000:9.1f} {data * 1000:9.1f}")
    print(f"forward-pass sections, data together: {family_data * 1000:.1f} ms (target < 30 ms)")

    print("heaviest requests (first render for a new prompt, median of "
          f"{args.repeat} prompts):")
    by_id = {s.id: s for s in SECTIONS}
    for section_id, what, values, target in HEAVIEST:
        if only and section_id not in only:
            continue
        times = []
        for i in range(args.repeat):
            q = urllib.parse.urlencode({"prompt": f"{PROMPT} {section_id} {i}", **values})
            t0 = time.process_time()
            by_id[section_id].build(lm, parse_state(q.encode(), all_params()))
            times.append(time.process_time() - t0)
        print(f"  {section_id}: {what}: {statistics.median(times) * 1000:.0f} ms "
              f"(target < {target * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
