"""Server CPU for a new prompt: the page answer after a prompt change with every section loaded
(X-Sections lists them all), for --prompts prompts never seen before, after the sections' warm
(what app.py runs before the workers fork) and one render of the default page.

Prints this process's CPU time (time.process_time) per request and their median, twice: with
what the first screen shows computed (the overview and the first sections: X-Sections names
those) and with every section computed; saves both to bench/results/bench_new_prompt.json (with
date, machine and commit) unless --no-save or --sections.

With --model KEY (smollm2), the same on that model of the app (`model=KEY`), saved as
bench/results/bench_new_prompt_KEY.json.

    python bench/bench_new_prompt.py [--prompts 5] [--sections id,id] [--model KEY] [--no-save]
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPTS = ("The weather at Pemberley was", "Mr. Collins rose and said that", "A letter came from",
           "Jane smiled at her sister, for", "In the morning the carriage", "Lady Catherine asked",
           "Nobody could tell why the", "After dinner the ladies")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--sections", default="", help="ids to compute (default: the first screen's, "
                                                   "then every section)")
    ap.add_argument("--model", default=None, help="the app's model to use (default: its default)")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    from app import create_app
    from web.core.registry import SECTIONS
    app = create_app({"WARM_CACHES": False, "INSTALLED_MODELS": args.model is not None})
    models = app.extensions["explainer"].models
    if args.model is not None and args.model not in models:
        raise SystemExit(f"no model {args.model!r}; the app offers {', '.join(models)}")
    lm = models[args.model] if args.model else app.extensions["explainer"].default_model
    chosen = {"model": args.model} if args.model else {}
    app.app_context().push()             # the sections' results go to this app's caches
    t0 = time.process_time()
    for s in SECTIONS:
        if s.warm is not None:
            s.warm(lm)
    app.test_client().get("/", query_string=chosen)
    print(f"warm (every section's warm, then the default page): "
          f"{time.process_time() - t0:.2f} s CPU")
    from web.core.views import EAGER_SECTIONS
    runs = ([("chosen", args.sections)] if args.sections else
            [("first screen", ",".join(s.id for s in SECTIONS[:EAGER_SECTIONS])),
             ("every section", ",".join(s.id for s in SECTIONS))])
    client = app.test_client()
    result, prompts = {}, iter(PROMPTS * 4)
    for name, ids in runs:
        times = []
        for _ in range(args.prompts):
            prompt = next(prompts) + f" ({name})"          # never seen before
            t0 = time.process_time()
            r = client.get("/", query_string={**chosen, "prompt": prompt},
                           headers={"HX-Request": "true", "X-Sections": ids})
            times.append(time.process_time() - t0)
            print(f"{r.status_code} {1000 * times[-1]:7.1f} ms CPU  {prompt!r}")
        median = 1000 * statistics.median(times)
        print(f"{name} ({ids}): median {median:.1f} ms CPU per new prompt")
        result[name] = {"sections": ids.split(","), "median_ms": round(median, 1),
                        "ms": [round(1000 * t, 1) for t in times]}
    if not args.no_save and not args.sections:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
        from local_server import save_result
        name = "bench_new_prompt" + (f"_{args.model}" if args.model else "")
        result["model"] = lm.key
        print("saved", save_result(name, result, "bench_new_prompt.py",
                                   argv if argv is not None else sys.argv[1:]))

if __name__ == "__main__":
    main()
