#!/usr/bin/python3
"""The same model in PyTorch, beside ours, on this machine.

    scripts/compare_pytorch.py bench [--threads 2]
        Times a training step (forward, backward, clip, AdamW) of the default
        recipe and the larger shape in PyTorch, then runs our bin/bench in the
        same session, so the figures compare.

    scripts/compare_pytorch.py train [--seed 1337]
        Trains the same model with the default recipe in PyTorch (random
        batches, AdamW, warmup + cosine, clipping) and reports the
        validation loss over bin/train's windows at the end.

    scripts/compare_pytorch.py check out/model.safetensors [--data data/tinyshakespeare.txt]
        Loads one of our checkpoints into the PyTorch model with
        load_state_dict(strict=True), no reshaping, and computes the
        validation loss over the same fixed windows bin/train evaluates on.

Needs Debian's python3-torch (PyTorch 1.13; `apt-get install python3-torch`)
and numpy. Not part of the tests or CI.
"""
import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the model, with our checkpoint's tensor names and layouts

class Attention(nn.Module):
    def __init__(self, dim, heads, bias=True):
        super().__init__()
        self.heads = heads
        self.w_q = nn.Linear(dim, dim, bias=bias)
        self.w_k = nn.Linear(dim, dim, bias=bias)
        self.w_v = nn.Linear(dim, dim, bias=bias)
        self.w_o = nn.Linear(dim, dim, bias=bias)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q = self.w_q(x).view(B, T, self.heads, hs).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.heads, hs).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.heads, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) \
            if hasattr(F, "scaled_dot_product_attention") else self._attention(q, k, v)
        return self.w_o(y.transpose(1, 2).contiguous().view(B, T, C))

    @staticmethod
    def _attention(q, k, v):  # PyTorch 1.13 has no fused attention
        T = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        return F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


class MLP(nn.Module):
    def __init__(self, dim, bias=True):
        super().__init__()
        self.fc = nn.Linear(dim, 4 * dim, bias=bias)
        self.proj = nn.Linear(4 * dim, dim, bias=bias)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, dim, heads, bias=True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, bias)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """Ours; bias=False drops the Linear biases (nanoGPT's shakespeare_char
    setting, for comparison; its LayerNorms also lack a shift)."""

    def __init__(self, vocab_size, context, layers, heads, dim, bias=True):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(vocab_size, dim) * 0.02)
        self.wpe = nn.Parameter(torch.randn(context, dim) * 0.02)
        self.h = nn.ModuleList([Block(dim, heads, bias) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.wte[idx] + self.wpe[:T]
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.t()
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


# ---- reading our safetensors file (a few lines; no extra package needed)

def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    meta = header.pop("__metadata__", {})
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[base + begin:base + end], dtype="<f4").reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors, meta


def corpus_tokens(path, vocab=None):
    text = open(path, encoding="utf-8").read()
    vocab = vocab or sorted(set(text))  # by code point, as bin/train
    ids = {ch: i for i, ch in enumerate(vocab)}
    return vocab, np.array([ids[ch] for ch in text], dtype=np.int64)


def validation_loss(model, val, T, B=12, batches=50):
    """Mean loss over bin/train's fixed windows (data/dataset.c batch_eval)."""
    windows = B * batches
    starts = [(len(val) - T - 1) * w // max(windows - 1, 1) for w in range(windows)]
    losses = []
    model.eval()
    with torch.no_grad():
        for i in range(batches):
            s = starts[i * B:(i + 1) * B]
            x = torch.tensor(np.stack([val[a:a + T] for a in s]))
            y = torch.tensor(np.stack([val[a + 1:a + T + 1] for a in s]))
            losses.append(model(x, y)[1].item())
    model.train()
    return sum(losses) / len(losses)


def check(args):
    tensors, meta = load_safetensors(args.ckpt)
    config = json.loads(meta["config"])
    model = TinyGPT(config["vocab_size"], config["context"], config["layers"], config["heads"],
                    config["dim"])
    model.load_state_dict(tensors, strict=True)  # names and shapes as saved, no reshaping
    _, tokens = corpus_tokens(args.data, json.loads(meta["vocab"]))
    val = tokens[int(len(tokens) * (1 - args.val_fraction)):]
    loss = validation_loss(model, val, config["context"])
    print(f"{args.ckpt}: loaded into PyTorch {torch.__version__} with strict=True; "
          f"validation loss over bin/train's windows: {loss:.4f}")


def train(args):
    """The default recipe, in PyTorch, with bin/train's initialisation."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    vocab, tokens = corpus_tokens(args.data)
    split = int(len(tokens) * (1 - args.val_fraction))
    train_tokens, val = tokens[:split], tokens[split:]
    L, H, C, T, B, iters, warmup, lr, min_lr = 4, 4, 128, 64, 12, 2000, 100, 1e-3, 1e-4
    model = TinyGPT(len(vocab), T, L, H, C, bias=not args.no_bias)
    for name, p in model.named_parameters():
        if p.dim() == 1:
            nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
        else:
            std = 0.02 / math.sqrt(2 * L) if name.endswith(("w_o.weight", "proj.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))
    start = time.perf_counter()
    for it in range(iters):
        if it < warmup:
            rate = lr * (it + 1) / (warmup + 1)
        else:
            ratio = (it - warmup) / (iters - warmup)
            rate = min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (lr - min_lr)
        for group in opt.param_groups:
            group["lr"] = rate
        ix = np.random.randint(0, len(train_tokens) - T, B)
        x = torch.tensor(np.stack([train_tokens[a:a + T] for a in ix]))
        y = torch.tensor(np.stack([train_tokens[a + 1:a + T + 1] for a in ix]))
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    seconds = time.perf_counter() - start
    print(f"PyTorch {torch.__version__}, seed {args.seed}{', no biases' if args.no_bias else ''}: {iters} iterations in {seconds:.0f} s; "
          f"validation loss over bin/train's windows: {validation_loss(model, val, T):.4f}")


# ---- timing

SHAPES = [("default recipe", 4, 4, 128, 64, 12), ("larger shape", 6, 6, 384, 256, 8)]


def bench(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name, layers, heads, dim, context, batch in SHAPES:
        model = TinyGPT(65, context, layers, heads, dim)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99))
        x = torch.randint(0, 65, (batch, context))
        y = torch.randint(0, 65, (batch, context))
        iters = 30 if dim <= 128 else 5
        times = []
        for it in range(iters + 3):
            start = time.perf_counter()
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if it >= 3:
                times.append(1e3 * (time.perf_counter() - start))
        ms = statistics.median(times)
        print(f"PyTorch {torch.__version__}, {args.threads} threads, {name}: "
              f"{ms:.1f} ms/iter (median of {iters}), {batch * context / ms * 1e3:.0f} tokens/s")
    sys.stdout.flush()
    print("\nours, same session (make bench):")
    sys.stdout.flush()
    subprocess.run(["make", "-s", "bench"], cwd=ROOT, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--threads", type=int, default=os.cpu_count())
    t = sub.add_parser("train")
    t.add_argument("--seed", type=int, default=1337)
    t.add_argument("--no-bias", action="store_true", help="no Linear biases (nanoGPT's setting)")
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    t.add_argument("--val-fraction", type=float, default=0.1)
    c = sub.add_parser("check")
    c.add_argument("ckpt")
    c.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    c.add_argument("--val-fraction", type=float, default=0.1)
    args = parser.parse_args()
    if args.command == "train":
        np.random.seed(args.seed)
    {"bench": bench, "train": train, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
