"""The activation cache: identity hooks with a name that the forward pass calls inline, and the
recordings they write into.

`pipeline.model`'s math calls `hook("hook_resid_mid", resid_pre + attn_out)`; the hooks given
decide what happens to the value: `NO_HOOKS` returns it and stores nothing (a plain forward),
`RecordingHooks` store every value by name in a dict or an `ActivationCache`, `CompactHooks`
keep each block's input and output and defer the rest to running that block again (a big
model's recording stays small). The names and shapes are listed in pipeline.model's docstring.
"""
import threading

import numpy as np


class Hooks:
    """The default: every hook returns its value and records nothing."""

    def __call__(self, name, x):
        return x

    def scope(self, prefix):  # hooks for a sub-module, names prefixed
        return self

    def lazy(self, name, fn, *args):  # a value worth recording but not worth computing otherwise
        pass


NO_HOOKS = Hooks()


class ActivationCache(dict):
    """The recorded intermediates by name, a dict. A lazy one (hook.lazy) is computed the first
    time it is read (by name, or by values() / items()); its name is there from the start.
    (SmolLM2's per-head results of a 128-token prompt would be 80 MB that few readers want.)
    Reading is thread-safe: a lazy value is computed once, and arrays computed lazily are
    read-only, as the recorded ones are once shared.

    A compact cache (`Model.run_with_cache(compact=True)`) records what each block needs to be
    run again, its input (hook_resid_pre), plus its middle and output (the residual stream
    drawn for every block), its keys and values, the embeddings and the final norm. Every
    other name of block i is computed when first read, by running the half of block i that
    computes it (attention or feed-forward) again from its recorded input: the same arithmetic
    on the same numbers, so the same values as a full recording. The logits [T, V] come from
    the final norm. A 135 M-parameter model's recording of a 22-token prompt is then 2 MB
    instead of 34 MB, so many prompts can be kept."""

    def __init__(self):
        super().__init__()
        self.deferred = {}
        self.rerun = None               # compact: block index -> that block's own recording
        self._last_block = None         # (index, half, recording) of the half last run again
        self._lock = threading.RLock()

    def __missing__(self, name):
        with self._lock:
            if dict.__contains__(self, name):            # computed by another thread meanwhile
                return dict.__getitem__(self, name)
            if name not in self.deferred:
                raise KeyError(name)
            fn, args = self.deferred[name]
            value = fn(*args)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
            dict.__setitem__(self, name, value)
            del self.deferred[name]
            return value

    def from_block(self, i, name):
        """A deferred name of block i in a compact cache: the half of block i that computes it
        (attention, or the feed-forward) run again from its recorded input."""
        half = "mlp" if name.split(".", 2)[2].startswith(FFN_HALF_NAMES) else "attn"
        if self._last_block is None or self._last_block[:2] != (i, half):
            self._last_block = (i, half, self.rerun(i, half))
        return self._last_block[2][name]

    def __contains__(self, name):
        return dict.__contains__(self, name) or name in self.deferred

    def __iter__(self):
        yield from list(dict.keys(self)) + list(self.deferred)

    def __len__(self):
        return dict.__len__(self) + len(self.deferred)

    def keys(self):
        return list(self)

    def values(self):
        return [self[name] for name in self]

    def items(self):
        return [(name, self[name]) for name in self]

    def get(self, name, default=None):
        return self[name] if name in self else default

    def computed(self) -> list:
        """The values computed so far (the lazy ones not yet read left out)."""
        return list(dict.values(self))

    def nbytes(self) -> int:
        """Bytes of the arrays held now (the block last run again included): each array once
        (a block's output is the next block's input, one array under two names), a view as
        the array it views (which it keeps alive)."""
        arrays = list(dict.values(self))
        if self._last_block is not None:
            arrays += self._last_block[2].computed()
        held = {}
        for a in arrays:
            if isinstance(a, np.ndarray):
                while isinstance(a.base, np.ndarray):
                    a = a.base
                held[id(a)] = a.nbytes
        return sum(held.values())


class RecordingHooks(Hooks):
    def __init__(self, cache, prefix=""):
        self.cache, self.prefix = cache, prefix

    def __call__(self, name, x):
        self.cache[self.prefix + name] = x
        return x

    def scope(self, prefix):
        return RecordingHooks(self.cache, self.prefix + prefix)

    def lazy(self, name, fn, *args):
        if isinstance(self.cache, ActivationCache):
            self.cache.deferred[self.prefix + name] = (fn, args)
        else:
            self.cache[self.prefix + name] = fn(*args)


# a block's names its second half records
FFN_HALF_NAMES = ("ln2.", "ln2_post.", "mlp.", "hook_mlp_out")


class CompactHooks(Hooks):
    """Records into a compact ActivationCache (see its docstring): a block's input and output
    and the keys it caches (the KV cache's keys: small, and drawn for every block) are kept,
    its other names deferred to `cache.from_block`, the logits to the final norm."""
    KEPT = ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "attn.hook_rot_k",
            "attn.hook_v")

    def __init__(self, cache, logits_of, prefix="", block=None):
        # logits_of(final norm [T, d]) -> logits [T, V]: the model's unembedding (and soft-cap)
        self.cache, self.logits_of, self.prefix, self.block = cache, logits_of, prefix, block

    def __call__(self, name, x):
        full = self.prefix + name
        if full == "logits":
            self.cache.deferred[full] = (self.logits_of, (self.cache["ln_final.hook_normalized"],))
        elif self.block is None or full.split(".", 2)[2] in self.KEPT:
            # a view (the keys and values are views of one projection that holds the queries
            # too) would keep its whole base alive: the kept array is its own
            self.cache[full] = x.copy() if isinstance(x, np.ndarray) and x.base is not None else x
        else:
            self.cache.deferred[full] = (self.cache.from_block, (self.block, full))
        return x

    def scope(self, prefix):
        block = self.block
        if prefix.startswith("blocks."):
            block = int(prefix.split(".")[1])
        return CompactHooks(self.cache, self.logits_of, self.prefix + prefix, block)

    def lazy(self, name, fn, *args):
        full = self.prefix + name
        self.cache.deferred[full] = (self.cache.from_block, (self.block, full))
