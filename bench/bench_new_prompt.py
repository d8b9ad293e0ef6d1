"""Server CPU for a new prompt: the page answer after a prompt change with every section loaded
(X-Sections lists them all), for --prompts prompts never seen before, after the sections' warm
(what app.py runs before the workers fork) and one render of the default page.

Prints this process's CPU time (time.process_time) per request and their median.

    python bench/bench_new_prompt.py [--prompts 5] [--sections id,id]
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
    ap.add_argument("--sections", default="", help="ids to compute (default: every section)")
    args = ap.parse_args(argv)
    from app import create_app
    from web.registry import SECTIONS
    app = create_app({"WARM_CACHES": False})
    lm = app.extensions["explainer_model"]
    t0 = time.process_time()
    for s in SECTIONS:
        if s.warm is not None:
            s.warm(lm)
    app.test_client().get("/")
    print(f"warm (every section's warm, then the default page): "
          f"{time.process_time() - t0:.2f} s CPU")
    ids = args.sections or ",".join(s.id for s in SECTIONS)
    client = app.test_client()
    times = []
    for prompt in PROMPTS[:args.prompts]:
        t0 = time.process_time()
        r = client.get("/", query_string={"prompt": prompt},
                       headers={"HX-Request": "true", "X-Sections": ids})
        times.append(time.process_time() - t0)
        print(f"{r.status_code} {1000 * times[-1]:7.1f} ms CPU  {prompt!r}")
    print(f"median {1000 * statistics.median(times):.1f} ms CPU per new prompt")


if __name__ == "__main__":
    main()
