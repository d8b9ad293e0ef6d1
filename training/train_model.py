"""Train a Llama-style model (RMSNorm, RoPE, SwiGLU, grouped-query attention) on the corpus.

PyTorch on the CPU, float32. The learning-rate schedule follows
wall-clock time (warm-up, then cosine to 10% at --minutes), so a run fits a time budget on any
machine; the log records tokens seen. Every --eval-every steps: held-out loss on all of the
held-out text, the loss curve appended to <out>/training_log.json, and the model exported to
<out> in the Hugging Face layout (config.json + model.safetensors) that the engine loads and
`transformers.LlamaForCausalLM` loads too.

    python training/train_model.py --preset austen --minutes 60
    python training/train_model.py --preset austen-draft --minutes 10
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from pipeline.tokenizer import load_tiktoken_dir  # noqa: E402

PRESETS = {
    # 4.1 M parameters: the default model
    "austen": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=2),
    # 0.8 M parameters: the draft model for speculative decoding (same tokenizer)
    "austen-draft": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2),
}
CONTEXT = 256


def rms_norm(x, w, eps):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, c, dropout):
        super().__init__()
        d, h, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.h, self.kv, self.hd, self.eps = h, kv, d // h, c["rms_norm_eps"]
        self.input_layernorm = nn.Parameter(torch.ones(d))
        self.post_attention_layernorm = nn.Parameter(torch.ones(d))
        self.q_proj = nn.Linear(d, h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv * self.hd, bias=False)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)
        self.gate_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(d, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], d, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        a = rms_norm(x, self.input_layernorm, self.eps)
        q = self.q_proj(a).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(a).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(a).view(B, T, self.kv, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.o_proj(y.transpose(1, 2).reshape(B, T, -1)))
        m = rms_norm(x, self.post_attention_layernorm, self.eps)
        return x + self.drop(self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m)))


class Llama(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Block(c, dropout) for _ in range(c["num_hidden_layers"]))
        self.norm = nn.Parameter(torch.ones(c["hidden_size"]))
        hd = c["hidden_size"] // c["num_attention_heads"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(c["max_position_embeddings"]).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
        for blk in self.layers:  # scale the residual-branch outputs (GPT-2's init)
            for lin in (blk.o_proj, blk.down_proj):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * c["num_hidden_layers"]))

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embed_tokens(idx)
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        for blk in self.layers:
            x = blk(x, cos, sin)
        x = rms_norm(x, self.norm, self.c["rms_norm_eps"])
        return x @ self.embed_tokens.weight.T  # tied unembedding

    def hf_state_dict(self):
        """Tensors under the names LlamaForCausalLM uses (lm_head is tied, so not stored)."""
        out = {"model.embed_tokens.weight": self.embed_tokens.weight,
               "model.norm.weight": self.norm}
        for i, b in enumerate(self.layers):
            p = f"model.layers.{i}."
            out[p + "input_layernorm.weight"] = b.input_layernorm
            out[p + "post_attention_layernorm.weight"] = b.post_attention_layernorm
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[p + f"self_attn.{name}.weight"] = getattr(b, name).weight
            for name in ("gate_proj", "up_proj", "down_proj"):
                out[p + f"mlp.{name}.weight"] = getattr(b, name).weight
        return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def encode_corpus(enc, path):
    chapters = open(path, encoding="utf-8").read().strip().split("\n\n")
    ids = []
    for ch in chapters:  # chapters are separate documents, each ended by <|endoftext|>
        ids.extend(enc.encode_ordinary(ch))
        ids.append(enc.eot_token)
    return np.array(ids, dtype=np.int64)


def export(model, config, out_dir):
    from safetensors.torch import save_file
    from transformers import LlamaConfig
    LlamaConfig(**config).save_pretrained(out_dir)
    save_file(model.hf_state_dict(), os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})


@torch.no_grad()
def heldout_loss(model, data):
    model.eval()
    n = (len(data) - 1) // CONTEXT
    x = torch.from_numpy(data[: n * CONTEXT].reshape(n, CONTEXT))
    y = torch.from_numpy(data[1: n * CONTEXT + 1].reshape(n, CONTEXT))
    total = 0.0
    for i in range(0, n, 16):
        logits = model(x[i:i + 16]).float()
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[i:i + 16].reshape(-1),
                                 reduction="sum").item()
    model.train()
    return total / (n * CONTEXT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=PRESETS, default="austen")
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--out", help="default: models/<preset>")
    ap.add_argument("--corpus", default="data/corpus")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compile", action="store_true", help="torch.compile (slow warm-up)")
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 autocast (20x slower than fp32 on CPUs without bf16 units)")
    args = ap.parse_args()
    out = args.out or os.path.join("models", args.preset)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)

    enc = load_tiktoken_dir(out)
    train = encode_corpus(enc, os.path.join(args.corpus, "train.txt"))
    held = encode_corpus(enc, os.path.join(args.corpus, "heldout.txt"))
    config = dict(PRESETS[args.preset], vocab_size=enc.n_vocab, max_position_embeddings=CONTEXT,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                  bos_token_id=enc.eot_token, eos_token_id=enc.eot_token,
                  architectures=["LlamaForCausalLM"])
    model = Llama(config, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.preset}: {n_params:,} parameters; train {len(train):,} tokens, "
          f"held-out {len(held):,}", flush=True)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    step_fn = torch.compile(model) if args.compile else model

    budget, warmup = args.minutes * 60, 100
    log = {"preset": args.preset, "parameters": n_params, "config": config,
           "hardware": f"{platform.processor() or platform.machine()}, "
                       f"{torch.get_num_threads()} CPU threads, PyTorch {torch.__version__}",
           "batch_tokens": args.batch * CONTEXT, "lr": args.lr, "dropout": args.dropout,
           "weight_decay": args.weight_decay, "curve": []}
    t0, step, best = time.time(), 0, float("inf")
    while True:
        elapsed = time.time() - t0
        frac = min(elapsed / budget, 1.0)
        lr = args.lr * min(1.0,
                           (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = rng.integers(0, len(train) - CONTEXT - 1, args.batch)
        x = torch.from_numpy(np.stack([train[s:s + CONTEXT] for s in starts]))
        y = torch.from_numpy(np.stack([train[s + 1:s + CONTEXT + 1] for s in starts]))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = step_fn(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        done = frac >= 1.0
        if step == 20:
            print(f"{20 * args.batch * CONTEXT / (time.time() - t0):.0f} tokens/s", flush=True)
        if step % args.eval_every == 0 or done:
            hl = heldout_loss(model, held)
            point = {"step": step, "tokens_seen": step * args.batch * CONTEXT,
                     "minutes": round((time.time() - t0) / 60, 2), "lr": lr,
                     "train_loss": round(loss.item(), 4), "heldout_loss": round(hl, 4)}
            log["curve"].append(point)
            print(json.dumps(point), flush=True)
            if hl < best:  # keep the best held-out checkpoint
                best = hl
                export(model, config, out)
                log["exported_at_step"] = step
            with open(os.path.join(out, "training_log.json"), "w") as f:
                json.dump(log, f, indent=1)
        if done:
            break


if __name__ == "__main__":
    main()
