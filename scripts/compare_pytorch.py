#!/usr/bin/python3
"""The same model in PyTorch, beside ours, on this machine: GPT-2's block
or any of the modern block's choices (model/gpt.h: GPTConfig), each alone
or together, as a checkpoint's config names them, with our tensor names.

    scripts/compare_pytorch.py bench [--threads 2] [--rounds 3] [BLOCK FLAGS]
        Times a training step (forward, backward, clip, AdamW) of the default
        recipe and the larger shape in PyTorch, in fp32 and under bf16
        autocast (torch.autocast("cpu", dtype=torch.bfloat16)), and ours
        (bin/bench --steps, fp32 and bf16), in alternating rounds, and
        prints the medians and the medians of the rounds' ratios. With
        --long, also the larger shape at context 1024 (batch 8), each side
        run in a process of its own so that its peak memory (max RSS) is
        printed beside its time. PyTorch's fp32 products run on whatever libblas.so.3
        is installed: the script says which (OpenBLAS's
        openblas_get_corename), and runs without OPENBLAS_CORETYPE and
        OPENBLAS_L2_SIZE in the environment, so that OpenBLAS picks its own
        kernel for this CPU (it restarts itself without them). Where OpenBLAS
        does not know the CPU it falls back to an old kernel (Debian 12's
        0.3.21 takes Prescott, SSE3, on a family 6 model 207 Xeon):
        --openblas-coretype NAME (e.g. SkylakeX) then gives PyTorch that
        kernel instead, and the figures say so. With block flags other than
        GPT-2's, ours is timed by bin/train's steps (bin/bench --steps knows
        only GPT-2's block), as the context-1024 row always is, and a shape
        the block refuses is left out (SwiGLU: the default recipe's dim 128).

    scripts/compare_pytorch.py pytorch-steps --context T ... (used by bench --long)
        Times PyTorch's steps of one shape and prints the median ms/iter.

    scripts/compare_pytorch.py train [--seed 1337] [--layers 4 --heads 4 --dim 128] [BLOCK FLAGS]
        Trains the same model with the default recipe in PyTorch (random
        batches, AdamW, warmup + cosine, clipping) and reports the
        validation loss over bin/train's windows at the end.

    scripts/compare_pytorch.py check out/model.safetensors [--data FILE|DIR|A,B,...]
        Loads one of our checkpoints into the PyTorch model with
        load_state_dict(strict=True), no reshaping, and computes the
        validation loss over the same fixed windows bin/train evaluates on:
        its --data, --batch, --eval-batches and --val-fraction are the run's
        (read from optimizer.safetensors beside the checkpoint) unless given.
        The block is the checkpoint's own (its config).

    scripts/compare_pytorch.py check-blocks [--iters 200] [--tolerance 1e-4] [--keep DIR]
        The check of every block: trains a tiny model (2 layers, 2 heads,
        dim 48, context 32, batch 8, fp32) of GPT-2's block, of each choice
        alone and of all of them together (with ReLU^2 and with SwiGLU)
        with bin/train, then loads each checkpoint as check does and
        compares its validation loss with the one bin/train logged for it;
        exits non-zero when one is further than the tolerance. Eleven
        runs of a few seconds each, the smear's two (alone, and with
        every other choice), the key offset's two (alone, and with RoPE),
        value embeddings alone, and every choice together, each where
        bin/train takes its flags (skipped, and said, where its --help does
        not list one).

    scripts/compare_pytorch.py check-smear [--seed 1337] [--tolerance 1e-4]
        The smear alone: the Smear module below against model/ops.c's
        smear_forward and smear_backward (built here as a shared library
        with $CC, default cc, and called through ctypes) on the same
        numbers, several shapes (C < 12 among them): the output and the
        gradients of the input, the gate and lambda (PyTorch's by
        autograd), each within 1e-5 + tolerance * |PyTorch's|; and in the
        whole model, the smear at its initialisation changes no logit and
        its tensors have our checkpoint's names and shapes. Exits non-zero
        when one is off.

BLOCK FLAGS are bin/train's: --norm layernorm|rmsnorm, --pos learned|rope,
--rope-base B, --mlp gelu|relu2|swiglu, --qk-norm, --untie, --softcap C, --smear,
--key-offset, --value-embed.

Needs Debian's python3-torch (PyTorch 1.13; `apt-get install python3-torch`),
numpy, and for bench --long /usr/bin/time (Debian's time). Not part of the tests or CI.
"""
import argparse
import ctypes
import json
import math
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

# OpenBLAS reads these when it is loaded (at `import torch`); some machines
# set OPENBLAS_CORETYPE=Haswell, which keeps it off its AVX-512 kernels. The
# bench command restarts the script without them, before that import, and
# gives them back to our own benchmark.
OPENBLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ORIGINAL_OPENBLAS = {}
if __name__ == "__main__" and sys.argv[1:2] in (["bench"], ["pytorch-steps"]) and \
        "COMPARE_PYTORCH_SAVED_OPENBLAS" not in os.environ:
    _env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARIABLES}
    _env["COMPARE_PYTORCH_SAVED_OPENBLAS"] = json.dumps(
        {k: os.environ[k] for k in OPENBLAS_VARIABLES if k in os.environ})
    if "--openblas-coretype" in sys.argv[:-1]:
        _env["OPENBLAS_CORETYPE"] = sys.argv[sys.argv.index("--openblas-coretype") + 1]
    os.execve(sys.executable, [sys.executable] + sys.argv, _env)

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- the model, with our checkpoint's tensor names and layouts
#
# The block's choices are the keys of a checkpoint's config
# (infer/checkpoint.c), each absent for GPT-2's: "norm" layernorm | rmsnorm
# (every norm, ln_f's too), "pos" learned | rope (with "rope_base"), "mlp"
# gelu | relu2 | swiglu, "qk_norm", "untie", "softcap", "smear", "key_offset",
# "value_embed". A tensor the block
# does not use is not made (wpe with RoPE, the norms' biases with RMSNorm),
# so load_state_dict(strict=True) takes a checkpoint as it is. The
# definitions are model/gpt.c's and model/ops.c's.

GPT2_BLOCK = {"norm": "layernorm", "pos": "learned", "rope_base": 10000.0, "mlp": "gelu",
              "qk_norm": False, "untie": False, "softcap": 0.0, "smear": False,
              "key_offset": False, "value_embed": False}
BLOCK_NAMES = {"norm": ("layernorm", "rmsnorm"), "pos": ("learned", "rope"),
               "mlp": ("gelu", "relu2", "swiglu")}


def block_config(config, dim, heads):
    """The block's choices in `config` (a checkpoint's config, or the flags'),
    GPT-2's where absent; raises ValueError for a choice bin/train refuses."""
    block = {key: config.get(key, default) for key, default in GPT2_BLOCK.items()}
    for key, names in BLOCK_NAMES.items():
        if block[key] not in names:
            raise ValueError(f"config '{key}' is {block[key]!r}, expected one of {', '.join(names)}")
    if dim % heads:
        raise ValueError(f"dim {dim} is not divisible by heads {heads}")
    if block["pos"] == "rope" and (dim // heads) % 2:
        raise ValueError(f"RoPE rotates pairs of channels: head size {dim // heads} must be even")
    if block["mlp"] == "swiglu" and dim % 3:
        raise ValueError(f"SwiGLU's hidden width 8 dim / 3: dim {dim} must be divisible by 3")
    return block


def describe_block(block):
    """'GPT-2's block', or what differs from it: 'rmsnorm, rope (base 10000), ...'."""
    parts = [block[key] for key in ("norm", "pos", "mlp") if block[key] != GPT2_BLOCK[key]]
    if block["pos"] == "rope":
        parts[parts.index("rope")] = f"rope (base {block['rope_base']:g})"
    parts += [key.replace("_", "-") for key in ("qk_norm", "untie") if block[key]]
    if block["softcap"]:
        parts.append(f"softcap {block['softcap']:g}")
    parts += [key.replace("_", "-") for key in ("smear", "key_offset", "value_embed") if block[key]]
    return ", ".join(parts) or "GPT-2's block"


def add_block_flags(parser):
    """bin/train's flags for the block's choices, GPT-2's by default."""
    parser.add_argument("--norm", choices=BLOCK_NAMES["norm"], default="layernorm")
    parser.add_argument("--pos", choices=BLOCK_NAMES["pos"], default="learned")
    parser.add_argument("--rope-base", type=float, default=10000.0, metavar="B",
                        help="--pos rope: the rotation's base (default 10000)")
    parser.add_argument("--mlp", choices=BLOCK_NAMES["mlp"], default="gelu")
    parser.add_argument("--qk-norm", action="store_true")
    parser.add_argument("--untie", action="store_true")
    parser.add_argument("--softcap", type=float, default=0.0, metavar="C", help="(default 0: off)")
    parser.add_argument("--smear", action="store_true",
                        help="mix each position's embedding with the previous one's, gated")
    parser.add_argument("--key-offset", action="store_true",
                        help="the upper half of each head's keys from the previous position")
    parser.add_argument("--value-embed", action="store_true",
                        help="each layer's values add a token embedding of their own")


def flags_block(args):
    """The block add_block_flags's flags chose, as a checkpoint's config names it."""
    return {"norm": args.norm, "pos": args.pos, "rope_base": args.rope_base, "mlp": args.mlp,
            "qk_norm": args.qk_norm, "untie": args.untie, "softcap": args.softcap,
            "smear": args.smear, "key_offset": args.key_offset, "value_embed": args.value_embed}


def block_argv(block):
    """bin/train's flags for the choices of `block` that are not GPT-2's."""
    argv = [a for key in ("norm", "pos", "mlp") if block[key] != GPT2_BLOCK[key]
            for a in (f"--{key}", block[key])]
    if block["pos"] == "rope":
        argv += ["--rope-base", repr(block["rope_base"])]
    argv += [f"--{key.replace('_', '-')}" for key in ("qk_norm", "untie") if block[key]]
    if block["softcap"]:
        argv += ["--softcap", repr(block["softcap"])]
    argv += [f"--{key.replace('_', '-')}" for key in ("smear", "key_offset", "value_embed")
             if block[key]]
    return argv


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + 1e-5) * weight over the last dimension: a gain,
    no bias (PyTorch 1.13 has no nn.RMSNorm)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-5) * self.weight


def norm(kind, dim):
    return RMSNorm(dim) if kind == "rmsnorm" else nn.LayerNorm(dim)


def rope_table(T, hs, base):
    """cos and sin (T, hs/2) of the angles t * base^(-2i/hs), computed in
    double and rounded to float (model/ops.c: rope_table)."""
    theta = np.power(float(base), -2.0 * np.arange(hs // 2) / hs)
    angles = np.arange(T)[:, None] * theta[None, :]
    return (torch.from_numpy(np.cos(angles).astype(np.float32)),
            torch.from_numpy(np.sin(angles).astype(np.float32)))


def rope(x, cos, sin):
    """x (B,T,NH,hs) with each interleaved pair (2i, 2i+1) of every head
    rotated by its position's angle i: (x0, x1) -> (x0 cos - x1 sin,
    x0 sin + x1 cos); cos, sin (T,hs/2)."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


# The smear's gate reads the first SMEAR_GATE_WIDTH channels (fewer when dim is
# smaller): modded-nanoGPT's smear_gate, a Linear(12, 1) without bias.
SMEAR_GATE_WIDTH = 12


class Smear(nn.Module):
    """modded-nanoGPT's smear gate on the embedding x (B,T,C), before the
    first block (model/ops.h: smear_forward): out[:, 0] = x[:, 0]; for t >= 1
        out[:, t] = x[:, t] + lambda * sigmoid(x[:, t, :G] . gate) * x[:, t-1],
    x[:, t-1] un-smeared, G = min(12, C). gate (G) and lambda (1) start at 0,
    as modded-nanoGPT's (the smear is then the identity), and are named as in
    our checkpoint: smear.gate.weight, smear.lambda."""

    def __init__(self, dim):
        super().__init__()
        self.gate = nn.Module()
        self.gate.weight = nn.Parameter(torch.zeros(min(SMEAR_GATE_WIDTH, dim)))
        self.register_parameter("lambda", nn.Parameter(torch.zeros(1)))  # a Python keyword

    def forward(self, x):
        G = self.gate.weight.numel()
        s = getattr(self, "lambda") * torch.sigmoid(x[:, 1:, :G] @ self.gate.weight)  # (B,T-1)
        return torch.cat([x[:, :1], x[:, 1:] + s[..., None] * x[:, :-1]], dim=1)


def key_offset(k):
    """modded-nanoGPT's partial key offset on keys k (B,T,NH,hs), after
    QK-norm and RoPE (model/ops.h: key_offset_forward): each head's upper
    channels (hs//2 ..) at position t are position t-1's, position 0 keeps
    its own."""
    half = k.shape[-1] // 2
    upper = torch.cat([k[:, :1, :, half:], k[:, :-1, :, half:]], dim=1)
    return torch.cat([k[..., :half], upper], dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads, bias=True, qk_norm=False, shift_keys=False):
        super().__init__()
        self.heads = heads
        self.shift_keys = shift_keys
        self.w_q = nn.Linear(dim, dim, bias=bias)
        self.w_k = nn.Linear(dim, dim, bias=bias)
        self.w_v = nn.Linear(dim, dim, bias=bias)
        if qk_norm:  # one gain (hs) for every head's queries, one for its keys
            self.q_norm = RMSNorm(dim // heads)
            self.k_norm = RMSNorm(dim // heads)
        self.qk_norm = qk_norm
        self.w_o = nn.Linear(dim, dim, bias=bias)

    def forward(self, x, rotation=None, value_embed=None):
        """x (B,T,C); rotation: RoPE's (cos, sin) for positions 0..T-1, or
        None; value_embed (B,T,C): the layer's value embedding of each
        position's token, added to v, or None."""
        B, T, C = x.shape
        hs = C // self.heads
        q = self.w_q(x).view(B, T, self.heads, hs)
        k = self.w_k(x).view(B, T, self.heads, hs)
        v = self.w_v(x).view(B, T, self.heads, hs)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if rotation is not None:
            q, k = rope(q, *rotation), rope(k, *rotation)
        if self.shift_keys:
            k = key_offset(k)
        if value_embed is not None:
            v = v + value_embed.view(B, T, self.heads, hs)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
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
    """proj(act(fc(x))): GELU (tanh form) or ReLU^2 over a hidden width of
    4C; or SwiGLU, hidden width H = 8C/3, fc's rows the gate's H then the
    up projection's H, act = silu(gate) * up."""

    def __init__(self, dim, bias=True, kind="gelu"):
        super().__init__()
        self.kind = kind
        self.hidden = 8 * dim // 3 if kind == "swiglu" else 4 * dim
        gates = 2 if kind == "swiglu" else 1
        self.fc = nn.Linear(dim, gates * self.hidden, bias=bias)
        self.proj = nn.Linear(self.hidden, dim, bias=bias)

    def forward(self, x):
        if self.kind == "gelu":
            return self.proj(F.gelu(self.fc(x), approximate="tanh"))
        if self.kind == "relu2":
            return self.proj(F.relu(self.fc(x)).square())
        gate, up = self.fc(x).split(self.hidden, dim=-1)
        return self.proj(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, dim, heads, bias=True, block=GPT2_BLOCK):
        super().__init__()
        self.ln_1 = norm(block["norm"], dim)
        self.attn = Attention(dim, heads, bias, block["qk_norm"], block["key_offset"])
        self.ln_2 = norm(block["norm"], dim)
        self.mlp = MLP(dim, bias, block["mlp"])

    def forward(self, x, rotation=None, value_embed=None):
        x = x + self.attn(self.ln_1(x), rotation, value_embed)
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    """Ours; `block` the block's choices as a checkpoint's config names them
    (GPT-2's where absent). bias=False drops the Linear biases (nanoGPT's
    shakespeare_char setting, for comparison; its LayerNorms also lack a
    shift)."""

    def __init__(self, vocab_size, context, layers, heads, dim, bias=True, block=None):
        super().__init__()
        self.block = block_config(block or {}, dim, heads)
        self.wte = nn.Parameter(torch.randn(vocab_size, dim) * 0.02)
        if self.block["pos"] == "learned":
            self.wpe = nn.Parameter(torch.randn(context, dim) * 0.02)
        else:  # RoPE's table, not a parameter: no tensor in the checkpoint
            self.wpe = None
            cos, sin = rope_table(context, dim // heads, self.block["rope_base"])
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        if self.block["smear"]:
            self.smear = Smear(dim)
        if self.block["value_embed"]:  # layer l's table (V,C) at rows l*V..: value_embed.weight
            self.value_embed = nn.Module()
            self.value_embed.weight = nn.Parameter(torch.randn(layers * vocab_size, dim) * 0.02)
        self.h = nn.ModuleList([Block(dim, heads, bias, self.block) for _ in range(layers)])
        self.ln_f = norm(self.block["norm"], dim)
        if self.block["untie"]:
            self.lm_head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        if self.wpe is not None:
            x, rotation = self.wte[idx] + self.wpe[:T], None
        else:
            x, rotation = self.wte[idx], (self.rope_cos[:T], self.rope_sin[:T])
        if self.block["smear"]:
            x = self.smear(x)
        tables = self.value_embed.weight.view(len(self.h), self.wte.shape[0], -1) \
            if self.block["value_embed"] else None
        for l, block in enumerate(self.h):
            x = block(x, rotation, tables[l][idx] if tables is not None else None)
        # logits (B,T,V) = ln_f(x) . W_U^T, W_U wte (tied) or lm_head;
        # with a softcap, then cap * tanh(logits / cap)
        logits = self.lm_head(self.ln_f(x)) if self.block["untie"] else self.ln_f(x) @ self.wte.t()
        cap = self.block["softcap"]
        if cap:
            logits = cap * torch.tanh(logits / cap)
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


def file_text(path):
    """A file's text as bin/train reads it (bytes as they are, no newline
    translation), or raises ValueError saying why it is not text."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ValueError(f"{path}: empty file")
    nul = data.find(b"\0")
    if nul >= 0:
        raise ValueError(f"{path}: NUL byte at offset {nul} (a binary file, not text?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: invalid UTF-8 at byte offset {e.start}") from None


def tree_files(folder):
    """A folder's files and its subfolders', as data/corpus_files.c lists
    them: not hidden ones, links followed, each folder once, sorted paths."""
    files, seen = [], set()

    def walk(d):
        st = os.stat(d)
        if (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        for name in os.listdir(d):
            if name.startswith("."):
                continue
            path = d + ("" if d.endswith("/") else "/") + name
            if os.path.isfile(path):
                files.append(path)
            elif os.path.isdir(path):
                walk(path)
    walk(folder)
    return sorted(files, key=lambda p: p.encode("utf-8"))


def corpus_text(spec, skip_bad_files=False):
    """--data as bin/train joins it: one file; a folder (with its
    subfolders); or a comma-separated list of files and folders, the files
    joined by a newline (with --skip-bad-files the files that are not text
    left out)."""
    if os.path.isfile(spec) or (not os.path.exists(spec) and "," not in spec):
        return file_text(spec)
    paths = tree_files(spec) if os.path.isdir(spec) else []
    if not paths:
        for item in spec.split(","):
            paths += tree_files(item) if os.path.isdir(item) else [item]
    texts = []
    for path in paths:
        try:
            texts.append(file_text(path))
        except ValueError as e:
            if not skip_bad_files:
                raise
            print(f"skipped {e}")
    if not texts:
        raise ValueError(f"{spec}: no text file in it")
    return "\n".join(texts)


def corpus_tokens(spec, vocab=None, skip_bad_files=False):
    text = corpus_text(spec, skip_bad_files)
    vocab = vocab or sorted(set(text))  # by code point, as bin/train
    ids = {ch: i for i, ch in enumerate(vocab)}
    return vocab, np.array([ids[ch] for ch in text], dtype=np.int64)


def saved_run_flags(ckpt):
    """The flags of the run a checkpoint is from: the options saved in
    optimizer.safetensors beside it ({} without one). A flag without a
    value (--skip-bad-files) maps to True."""
    path = os.path.join(os.path.dirname(os.path.abspath(ckpt)), "optimizer.safetensors")
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    items = json.loads(header.get("__metadata__", {}).get("options", "[]"))
    flags, i = {}, 0
    while i < len(items):
        if i + 1 < len(items) and not items[i + 1].startswith("--"):
            flags[items[i]] = items[i + 1]
            i += 2
        else:
            flags[items[i]] = True
            i += 1
    return flags


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


def checkpoint_loss(ckpt, data=None, batch=None, batches=None, val_fraction=None):
    """One of our checkpoints loaded into TinyGPT with strict=True, and its
    validation loss over bin/train's windows: the run's own evaluation
    (its corpus, batch, batches and split, from optimizer.safetensors beside
    the checkpoint) unless given. Returns (loss, the model, data, batch,
    batches)."""
    tensors, meta = load_safetensors(ckpt)
    config = json.loads(meta["config"])
    try:
        model = TinyGPT(config["vocab_size"], config["context"], config["layers"],
                        config["heads"], config["dim"], block=config)
    except ValueError as e:
        sys.exit(f"error: {ckpt}: {e}")
    model.load_state_dict(tensors, strict=True)  # names and shapes as saved, no reshaping
    run = saved_run_flags(ckpt)
    data = data or run.get("--data", os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    batch = batch or int(run.get("--batch", 12))
    batches = batches or int(run.get("--eval-batches", 50))
    val_fraction = val_fraction or float(run.get("--val-fraction", 0.1))
    try:
        _, tokens = corpus_tokens(data, json.loads(meta["vocab"]), "--skip-bad-files" in run)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: {data}: {e}")
    val = tokens[int(len(tokens) * (1 - val_fraction)):]
    return validation_loss(model, val, config["context"], batch, batches), model, data, batch, batches


def check(args):
    loss, model, data, batch, batches = checkpoint_loss(args.ckpt, args.data, args.batch,
                                                        args.eval_batches, args.val_fraction)
    print(f"{args.ckpt} ({describe_block(model.block)}): loaded into PyTorch {torch.__version__} "
          f"with strict=True; validation loss over bin/train's windows ({data}, batch {batch}, "
          f"{batches} batches): {loss:.6f}")


# check-blocks: a tiny model of each block trained by bin/train, in fp32,
# its checkpoint's loss in PyTorch beside bin/train's own evaluation.
TINY_RUN = ["--layers", "2", "--heads", "2", "--dim", "48", "--context", "32", "--batch", "8",
            "--eval-batches", "4", "--sample-chars", "0", "--precision", "fp32"]
ALL_CHOICES = ["--norm", "rmsnorm", "--pos", "rope", "--qk-norm", "--untie", "--softcap", "15"]
BLOCK_CASES = [
    ("GPT-2's block", []),
    ("rmsnorm", ["--norm", "rmsnorm"]),
    ("rope", ["--pos", "rope"]),
    ("rope, base 100", ["--pos", "rope", "--rope-base", "100"]),
    ("relu2", ["--mlp", "relu2"]),
    ("swiglu", ["--mlp", "swiglu"]),
    ("qk-norm", ["--qk-norm"]),
    ("untie", ["--untie"]),
    ("softcap 15", ["--softcap", "15"]),
    ("all, relu2", ALL_CHOICES + ["--mlp", "relu2"]),
    ("all, swiglu", ALL_CHOICES + ["--mlp", "swiglu"]),
    ("smear", ["--smear"]),
    ("all, smear", ALL_CHOICES + ["--mlp", "relu2", "--smear"]),
    ("key offset", ["--key-offset"]),
    ("rope, key offset", ["--pos", "rope", "--key-offset"]),
    ("value embed", ["--value-embed"]),
    ("all, every row", ALL_CHOICES + ["--mlp", "relu2", "--smear", "--key-offset",
                                      "--value-embed"]),
]


def run_val_loss(out):
    """The validation loss of the model a run kept (its best evaluation; with
    --eval-every = --iters, its one and final one), from its log.csv."""
    with open(os.path.join(out, "log.csv")) as log:
        rows = [line.split(",") for line in log.read().splitlines()]
    column = rows[0].index("val_loss")
    return min(float(r[column]) for r in rows[1:] if r[column])


def check_blocks(args):
    torch.set_num_threads(args.threads)
    subprocess.run(["make", "-s", "bin/train"], cwd=ROOT, check=True)
    data = os.path.abspath(args.data)
    print(f"bin/train {' '.join(TINY_RUN)} --iters {args.iters} --eval-every {args.iters} "
          f"--threads {args.threads} --data {data}, then each block's flags; PyTorch "
          f"{torch.__version__}; tolerance {args.tolerance:g}")
    print(f"  {'block':16s} {'ours':>9s} {'PyTorch':>9s} {'|diff|':>8s}  flags")
    train_help = subprocess.run([os.path.join(ROOT, "bin", "train"), "--help"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True).stdout.split()
    failed, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        os.makedirs(folder, exist_ok=True)
        for i, (name, flags) in enumerate(BLOCK_CASES):
            unknown = [f for f in flags if f.startswith("--") and f not in train_help]
            if unknown:
                skipped.append(name)
                print(f"  {name:16s} skipped: bin/train --help does not list {', '.join(unknown)}")
                continue
            out = os.path.join(folder, f"block{i}")
            argv = [os.path.join(ROOT, "bin", "train"), *TINY_RUN, "--iters", str(args.iters),
                    "--eval-every", str(args.iters), "--threads", str(args.threads),
                    "--data", data, "--out", out, "--force", *flags]
            run = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
            if run.returncode != 0:
                sys.exit(f"check-blocks: {' '.join(argv)} exited with {run.returncode}:\n"
                         f"{run.stdout[-2000:]}")
            ours = run_val_loss(out)
            pytorch = checkpoint_loss(os.path.join(out, "model.safetensors"))[0]
            diff = abs(ours - pytorch)
            if not diff <= args.tolerance:
                failed.append(name)
            print(f"  {name:16s} {ours:9.6f} {pytorch:9.6f} {diff:8.1e}"
                  f"{'  ' if diff <= args.tolerance else ' !'} {' '.join(flags) or '(none)'}")
            sys.stdout.flush()
    if failed:
        sys.exit(f"check-blocks: {', '.join(failed)}: PyTorch's loss is more than "
                 f"{args.tolerance:g} from bin/train's")
    print(f"all {len(BLOCK_CASES) - len(skipped)} within {args.tolerance:g}" +
          (f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""))


# check-smear: the Smear module against model/ops.c's smear on the same numbers.
SMEAR_SHAPES = [(2, 5, 7), (1, 2, 3), (3, 8, 12), (2, 16, 48)]  # (B, T, C), G = min(12, C)


def ops_library(folder):
    """model/ops.c built as a shared library in folder (the Makefile's
    floating-point flags), loaded by ctypes, the smear's argument types set."""
    path = os.path.join(folder, "libops.so")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=c11", "-D_GNU_SOURCE",
                    "-ffp-contract=fast", "-fno-math-errno", "-fopenmp", "-fPIC", "-shared",
                    os.path.join(ROOT, "model", "ops.c"), "-o", path, "-lm"], check=True)
    lib = ctypes.CDLL(path)
    floats, i = ctypes.POINTER(ctypes.c_float), ctypes.c_int
    lib.smear_forward.argtypes = [floats] * 4 + [i] * 4
    lib.smear_backward.argtypes = [floats] * 7 + [i] * 4
    lib.smear_forward.restype = lib.smear_backward.restype = None
    return lib


def ours_smear(lib, inp, gate, lam, d_out, B, T, C):
    """smear_forward and smear_backward (onto zeros) of lists of floats:
    (out, d_inp, d_gate, d_lambda), lists."""
    G = len(gate)

    def array(values):
        return (ctypes.c_float * len(values))(*values)

    out, d_inp, d_gate, d_lambda = array([0.0] * len(inp)), array([0.0] * len(inp)), \
        array([0.0] * G), array([0.0])
    inp, gate, lam, d_out = array(inp), array(gate), array([lam]), array(d_out)
    lib.smear_forward(out, inp, gate, lam, B, T, C, G)
    lib.smear_backward(d_inp, d_gate, d_lambda, d_out, inp, gate, lam, B, T, C, G)
    return list(out), list(d_inp), list(d_gate), list(d_lambda)


def float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def check_smear(args):
    import random
    rng = random.Random(args.seed)
    print(f"the smear: PyTorch {torch.__version__}'s Smear against model/ops.c's smear_forward "
          f"and smear_backward; |ours - PyTorch's| <= 1e-5 + {args.tolerance:g} |PyTorch's|")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        lib = ops_library(tmp)
        for B, T, C in SMEAR_SHAPES:
            G = min(SMEAR_GATE_WIDTH, C)
            inp = [float32(rng.gauss(0, 1)) for _ in range(B * T * C)]
            gate = [float32(rng.gauss(0, 0.5)) for _ in range(G)]
            lam = float32(0.7)
            d_out = [float32(rng.gauss(0, 1)) for _ in range(B * T * C)]
            ours = ours_smear(lib, inp, gate, lam, d_out, B, T, C)
            smear = Smear(C)
            with torch.no_grad():
                smear.gate.weight.copy_(torch.tensor(gate))
                getattr(smear, "lambda").fill_(lam)
            x = torch.tensor(inp).view(B, T, C).requires_grad_()
            out = smear(x)
            out.backward(torch.tensor(d_out).view(B, T, C))
            theirs = (out.detach(), x.grad, smear.gate.weight.grad, getattr(smear, "lambda").grad)
            for name, a, b in zip(("out", "d_inp", "d_gate", "d_lambda"), ours, theirs):
                b = b.flatten().double()
                worst = ((torch.tensor(a, dtype=torch.float64) - b).abs() /
                         (1e-5 + args.tolerance * b.abs())).max().item()
                ok = worst <= 1
                if not ok:
                    failed.append(f"{name} of B {B} T {T} C {C}")
                print(f"  B {B} T {T:2d} C {C:2d} G {G:2d}  {name:8s} worst {worst:.3f} of the "
                      f"tolerance{'' if ok else ' !'}")
    # In the model: at its initialisation the smear is the identity (the same
    # logits as without it, the same seed), and it is not once lambda moves.
    checks = []
    torch.manual_seed(0)
    plain = TinyGPT(65, 16, 1, 2, 24)
    torch.manual_seed(0)
    smeared = TinyGPT(65, 16, 1, 2, 24, block={"smear": True})
    idx = torch.randint(0, 65, (2, 16))
    names = {k: tuple(v.shape) for k, v in smeared.state_dict().items() if k.startswith("smear")}
    checks.append(("its tensors are smear.gate.weight (12) and smear.lambda (1)",
                   names == {"smear.gate.weight": (12,), "smear.lambda": (1,)}))
    checks.append(("at its initialisation it changes no logit",
                   torch.equal(plain(idx)[0], smeared(idx)[0])))
    with torch.no_grad():
        getattr(smeared.smear, "lambda").fill_(0.5)
    moved = (plain(idx)[0] - smeared(idx)[0]).abs().amax(dim=(0, 2))  # (T)
    checks.append(("with lambda 0.5 it moves the logits past position 0, not at 0",
                   moved[0].item() <= 1e-6 and moved[1:].min().item() > 1e-4))
    for what, ok in checks:
        print(f"  the model's smear: {what}: {'yes' if ok else 'NO'}")
        if not ok:
            failed.append(what)
    if failed:
        sys.exit(f"check-smear: off: {'; '.join(failed)}")
    print("all within the tolerance")


def train(args):
    """The default recipe, in PyTorch, with bin/train's initialisation."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    vocab, tokens = corpus_tokens(args.data)
    split = int(len(tokens) * (1 - args.val_fraction))
    train_tokens, val = tokens[:split], tokens[split:]
    L, H, C = args.layers, args.heads, args.dim
    T, B, iters, warmup, lr, min_lr = 64, 12, 2000, 100, 1e-3, 1e-4
    try:
        model = TinyGPT(len(vocab), T, L, H, C, bias=not args.no_bias, block=flags_block(args))
    except ValueError as e:
        sys.exit(f"error: {e}")
    for name, p in model.named_parameters():
        if name.startswith("smear."):  # modded-nanoGPT's: gate and lambda 0
            nn.init.zeros_(p)
        elif p.dim() == 1:
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
    print(f"PyTorch {torch.__version__}, seed {args.seed}, {L} layers, {H} heads, dim {C}, "
          f"{describe_block(model.block)}{', no biases' if args.no_bias else ''}: "
          f"{iters} iterations in {seconds:.0f} s; "
          f"validation loss over bin/train's windows: {validation_loss(model, val, T):.4f}")


# ---- timing

SHAPES = [("default recipe", 4, 4, 128, 64, 12), ("larger shape", 6, 6, 384, 256, 8)]


def blas_in_use():
    """The BLAS library this process loaded, and OpenBLAS's name for its kernel."""
    libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if "blas" in line and line.split()[-1].startswith("/")})
    for path in libs:
        try:
            corename = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        corename.restype = ctypes.c_char_p
        return f"{path}, OpenBLAS kernel {corename().decode()}"
    return f"{', '.join(libs) or 'no BLAS library loaded'} (not OpenBLAS)"


def time_pytorch(name, layers, heads, dim, context, batch, bf16, iters=None, block=None):
    torch.manual_seed(0)
    model = TinyGPT(65, context, layers, heads, dim, block=block)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    x = torch.randint(0, 65, (batch, context))
    y = torch.randint(0, 65, (batch, context))
    iters = iters or (30 if dim <= 128 else 5)
    warmup = 3 if context <= 256 else 1
    times = []
    for it in range(iters + warmup):
        start = time.perf_counter()
        # autocast: the products in bf16 (oneDNN), master weights, optimizer in fp32
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if it >= warmup:
            times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times), iters


def our_environment():
    """The user's environment, OpenBLAS's variables as they were (ours does not use them)."""
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_VARIABLES}
    env.update(ORIGINAL_OPENBLAS)
    return env


def ours_steps(threads, block, shapes):
    """Our training steps, the shapes' and both precisions: {(shape, precision): ms}.
    GPT-2's block from bin/bench --steps (its own thread count: every core);
    another block's (bin/bench --steps knows only GPT-2's) from bin/train's
    steps, as the long-context row's."""
    if block_argv(block):
        return {(shape[0], precision): ours_train_steps(shape, threads, precision, block)[0]
                for shape in shapes for precision in ("fp32", "bf16")}
    env = our_environment()
    run = subprocess.run([os.path.join(ROOT, "bin", "bench"), "--steps"], cwd=ROOT, check=True,
                         env=env, stdout=subprocess.PIPE, text=True)
    ours = {}
    for line in run.stdout.splitlines():
        m = re.match(r"\s+(default recipe|larger shape)\s+fp32\s+([\d.]+)\s+bf16\s+([\d.]+)", line)
        if m:
            ours[m.group(1), "fp32"], ours[m.group(1), "bf16"] = float(m.group(2)), float(m.group(3))
    return ours


# The long-context row: the larger shape at context 1024, batch 8.
LONG = ("context 1024", 6, 6, 384, 1024, 8)
LONG_STEPS = 3  # timed steps a side and precision (PyTorch fp32 takes ~30 s a step)


def peak_run(argv, env=None, cwd=None):
    """Runs argv to the end; returns (its standard output, its peak RSS in GB of 10^6 kB).
    Through /usr/bin/time: a child forked from this process would count this
    process's memory (PyTorch's, grown over the rounds) in its own peak."""
    with tempfile.NamedTemporaryFile("r") as peak:
        run = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", peak.name] + argv, cwd=cwd,
                             env=env, stdout=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"compare_pytorch: {' '.join(argv)} exited with {run.returncode}")
        return run.stdout, int(peak.read().split()[-1]) / 1e6


def pytorch_steps(args):
    torch.set_num_threads(args.threads)
    ms, _ = time_pytorch("", args.layers, args.heads, args.dim, args.context, args.batch,
                         args.bf16, args.iters, flags_block(args))
    print(f"{ms:.1f}")


def long_pytorch(threads, bf16, block):
    """PyTorch at the long context in a process of its own: (ms/iter, peak GB)."""
    _, layers, heads, dim, context, batch = LONG
    argv = [sys.executable, os.path.abspath(__file__), "pytorch-steps", "--threads", str(threads),
            "--layers", str(layers), "--heads", str(heads), "--dim", str(dim),
            "--context", str(context), "--batch", str(batch), "--iters", str(LONG_STEPS)]
    out, gb = peak_run(argv + block_argv(block) + (["--bf16"] if bf16 else []))
    return float(out.split()[-1]), gb


def ours_train_steps(shape, threads, precision, block):
    """bin/train's steps of a shape (name, layers, heads, dim, context, batch)
    and block: (median ms/iter of its steps after the warm-up, peak GB). As
    many steps as PyTorch's (time_pytorch): 30 of the default recipe, 5 of
    the larger shape, after 3; at context 1024, LONG_STEPS after 1."""
    _, layers, heads, dim, context, batch = shape
    warmup, timed = (3, 30 if dim <= 128 else 5) if context <= 256 else (1, LONG_STEPS)
    env = our_environment()
    with tempfile.TemporaryDirectory() as out_dir:
        argv = [os.path.join(ROOT, "bin", "train"), "--layers", str(layers), "--heads", str(heads),
                "--dim", str(dim), "--context", str(context), "--batch", str(batch),
                "--iters", str(warmup + timed), "--threads", str(threads), "--precision", precision,
                "--eval-every", "1000", "--eval-batches", "1", "--log-every", "1",
                "--sample-chars", "0", "--out", os.path.join(out_dir, "run"), *block_argv(block)]
        _, gb = peak_run(argv, env=env, cwd=ROOT)
        with open(os.path.join(out_dir, "run", "log.csv")) as log:
            rows = [line.split(",") for line in log.read().splitlines()[1:]]
        ms = [float(r[4]) for r in rows if r[4] and int(r[0]) > warmup]
    return statistics.median(ms), gb


def bench(args):
    torch.set_num_threads(args.threads)
    print(f"PyTorch {torch.__version__}, {args.threads} threads; BLAS: {blas_in_use()}")
    blas = (f"OPENBLAS_CORETYPE={args.openblas_coretype} for PyTorch (given), OPENBLAS_L2_SIZE unset; "
            if args.openblas_coretype else
            "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for this run (OpenBLAS picks its own kernel); ")
    print(blas +
          f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '(libgomp default)')}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
    block = flags_block(args)
    print(f"block: {describe_block(block)}" + ("" if not block_argv(block) else
          f"; ours timed by bin/train {' '.join(block_argv(block))} --threads {args.threads}"
          " (bin/bench --steps times only GPT-2's block)"))
    shapes = []  # those the block takes (SwiGLU: not dim 128); LONG has the larger shape's
    for shape in SHAPES:
        try:
            block_config(block, shape[3], shape[2])
            shapes.append(shape)
        except ValueError as e:
            print(f"{shape[0]} left out: {e}")
    subprocess.run(["make", "-s", "bin/bench", "bin/train"], cwd=ROOT, check=True)
    # Rounds alternate PyTorch and ours, so that both see the same machine;
    # each round gives a ratio per figure, and the medians are quoted.
    keys = [(name, precision) for name, *_ in shapes for precision in ("fp32", "bf16")]
    nan = float("nan")
    pytorch = {k: [] for k in keys}
    ours = {k: [] for k in keys}
    long = {(side, p): [] for side in ("pytorch", "ours") for p in ("fp32", "bf16")}
    for round_ in range(args.rounds):
        for name, layers, heads, dim, context, batch in shapes:
            for precision in ("fp32", "bf16"):
                if precision == "bf16" and args.no_pytorch_bf16:
                    pytorch[name, precision].append(nan)
                    continue
                ms, _ = time_pytorch(name, layers, heads, dim, context, batch, precision == "bf16",
                                     block=block)
                pytorch[name, precision].append(ms)
        for k, ms in ours_steps(args.threads, block, shapes).items():
            ours[k].append(ms)
        if args.long:
            for precision in ("fp32", "bf16"):
                for side in ("pytorch", "ours"):
                    if side == "pytorch" and precision == "bf16" and args.no_pytorch_bf16:
                        long[side, precision].append((nan, nan))
                    elif side == "pytorch":
                        long[side, precision].append(
                            long_pytorch(args.threads, precision == "bf16", block))
                    else:
                        long[side, precision].append(
                            ours_train_steps(LONG, args.threads, precision, block))
            print(f"round {round_ + 1}/{args.rounds}, context 1024: " + ", ".join(
                f"{p}: PyTorch {long['pytorch', p][-1][0]:.0f} ms {long['pytorch', p][-1][1]:.2f} GB,"
                f" ours {long['ours', p][-1][0]:.0f} ms {long['ours', p][-1][1]:.2f} GB"
                for p in ("fp32", "bf16")))
        print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
            f"{n} {p}: PyTorch {pytorch[n, p][-1]:.1f} ours {ours[n, p][-1]:.1f}" for n, p in keys))
        sys.stdout.flush()
    med = statistics.median
    print(f"\nside by side, {args.threads} threads, ms/iter, medians of {args.rounds} alternating rounds"
          " (ratio = PyTorch's time / ours, median of the rounds' ratios; above 1, ours is faster):")
    print(f"  {'':16s} {'ours fp32':>10s} {'ours bf16':>10s} {'PyTorch fp32':>13s} {'PyTorch bf16':>13s}"
          f" {'vs fp32':>8s} {'vs bf16':>8s} {'PyTorch bf16 / our best':>26s}")
    for name, *_ in shapes:
        of, ob = med(ours[name, "fp32"]), med(ours[name, "bf16"])
        pf, pb = med(pytorch[name, "fp32"]), med(pytorch[name, "bf16"])
        rf = med([p / o for p, o in zip(pytorch[name, "fp32"], ours[name, "fp32"])])
        rb = med([p / o for p, o in zip(pytorch[name, "bf16"], ours[name, "bf16"])])
        best = med([p / min(o32, o16) for p, o32, o16 in
                    zip(pytorch[name, "bf16"], ours[name, "fp32"], ours[name, "bf16"])])
        print(f"  {name:16s} {of:10.1f} {ob:10.1f} {pf:13.1f} {pb:13.1f} {rf:7.2f}x {rb:7.2f}x"
              f" {best:25.2f}x")
    print("  (last column: PyTorch bf16 autocast against our faster precision)")
    if not args.long:
        return
    print(f"\n{LONG[0]} (larger shape, batch 8), ms/iter and peak memory (max RSS, GB of 10^6 kB),"
          f" medians of {args.rounds} rounds, each side in a process of its own:")
    print(f"  {'':6s} {'ours ms':>9s} {'ours GB':>8s} {'PyTorch ms':>11s} {'PyTorch GB':>11s}"
          f" {'time ratio':>11s} {'memory ratio':>13s}")
    for p in ("fp32", "bf16"):
        o, t = long["ours", p], long["pytorch", p]
        time_ratio = med([b[0] / a[0] for a, b in zip(o, t)])
        memory_ratio = med([b[1] / a[1] for a, b in zip(o, t)])
        print(f"  {p:6s} {med([a[0] for a in o]):9.0f} {med([a[1] for a in o]):8.2f}"
              f" {med([b[0] for b in t]):11.0f} {med([b[1] for b in t]):11.2f}"
              f" {time_ratio:10.2f}x {memory_ratio:12.2f}x")
    print("  (ratios: PyTorch's / ours; above 1, ours is faster or smaller)")


def main():
    ORIGINAL_OPENBLAS.update(json.loads(os.environ.get("COMPARE_PYTORCH_SAVED_OPENBLAS", "{}")))
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--threads", type=int, default=os.cpu_count())
    b.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    b.add_argument("--no-pytorch-bf16", action="store_true",
                   help="skip PyTorch's bf16 autocast (on a CPU without native bf16 its "
                        "products are emulated: a larger-shape step took 56 s on Zen 3)")
    b.add_argument("--openblas-coretype", metavar="NAME",
                   help="PyTorch's OpenBLAS kernel, where it does not know this CPU (default: its pick)")
    b.add_argument("--long", action="store_true",
                   help="add the context-1024 row, memory beside time (about 4 minutes a round)")
    add_block_flags(b)
    s = sub.add_parser("pytorch-steps")
    s.add_argument("--threads", type=int, default=os.cpu_count())
    for flag in ("--layers", "--heads", "--dim", "--context", "--batch", "--iters"):
        s.add_argument(flag, type=int, required=True)
    s.add_argument("--bf16", action="store_true")
    add_block_flags(s)
    t = sub.add_parser("train")
    t.add_argument("--seed", type=int, default=1337)
    t.add_argument("--no-bias", action="store_true", help="no Linear biases (nanoGPT's setting)")
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    t.add_argument("--val-fraction", type=float, default=0.1)
    t.add_argument("--layers", type=int, default=4, help="(default 4, the default recipe's)")
    t.add_argument("--heads", type=int, default=4, help="(default 4)")
    t.add_argument("--dim", type=int, default=128, help="(default 128; --mlp swiglu needs a "
                   "multiple of 3)")
    add_block_flags(t)
    c = sub.add_parser("check")
    c.add_argument("ckpt")
    c.add_argument("--data", help="FILE, DIR or A,B,... (default: the run's)")
    c.add_argument("--val-fraction", type=float, help="(default: the run's)")
    c.add_argument("--batch", type=int, help="(default: the run's)")
    c.add_argument("--eval-batches", type=int, help="(default: the run's)")
    k = sub.add_parser("check-blocks")
    k.add_argument("--iters", type=int, default=200, help="each tiny run's (default 200)")
    k.add_argument("--threads", type=int, default=os.cpu_count())
    k.add_argument("--data", default=os.path.join(ROOT, "data", "tinyshakespeare.txt"))
    k.add_argument("--tolerance", type=float, default=1e-4, help="(default 1e-4)")
    k.add_argument("--keep", metavar="DIR", help="keep the runs in DIR/block0, ... (default: none)")
    m = sub.add_parser("check-smear")
    m.add_argument("--seed", type=int, default=1337)
    m.add_argument("--tolerance", type=float, default=1e-4, help="relative (default 1e-4)")
    args = parser.parse_args()
    if args.command == "train":
        np.random.seed(args.seed)
    {"bench": bench, "pytorch-steps": pytorch_steps, "train": train, "check": check,
     "check-blocks": check_blocks, "check-smear": check_smear}[args.command](args)


if __name__ == "__main__":
    main()
