#!/usr/bin/python3
"""A Hugging Face GPT-2 folder from bin/export --to hf, checked against the
layout transformers documents and run in plain PyTorch.

    scripts/export_check.py HF_DIR --ckpt out/model.safetensors [--data FILE|DIR|A,B,...]

transformers is not needed (nor installed here): GPT2LMHeadModel is written
below in plain PyTorch as transformers' modeling_gpt2 defines it, with its
module names, shapes and Conv1D (y = x W + b, W stored [in, out]), and sized
from the folder's config.json alone. The folder's model.safetensors must
load into it by name with every shape as the module has it (lm_head.weight
absent: tied to transformer.wte.weight, as save_pretrained leaves it out);
tokenizer.json's WordLevel vocabulary gives the characters' ids. Nothing of
our own checkpoint's names is used for that model.

It then prints the validation loss over bin/train's fixed windows of the
run's corpus (the run's --data, --batch, --eval-batches and --val-fraction,
read from optimizer.safetensors beside --ckpt, as compare_pytorch.py check
does), for that model and for our checkpoint loaded into
compare_pytorch.py's model:

    loss: hf 2.787348, ours 2.787348 (difference 1.2e-07)

Needs Debian's python3-torch and numpy. tests/test_export.c runs it.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch  # noqa: E402  (the corpus windows, and our own model)


# ---- GPT-2 as transformers' modeling_gpt2 defines it

class Conv1D(nn.Module):
    """y = x W + b with W [nx, nf] (in, out): the transpose of nn.Linear's."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config["n_embd"]
        self.num_heads = config["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.scale = config.get("scale_attn_weights", True)
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)  # columns: Q, K, V
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.embed_dim, dim=2)
        q, k, v = (t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2)
        if self.scale:
            scores = scores / math.sqrt(self.head_dim)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        y = F.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def gelu_new(x):
    """GELU's tanh form, transformers' "gelu_new"."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACTIVATIONS = {"gelu_new": gelu_new}


class GPT2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        inner = config.get("n_inner") or 4 * config["n_embd"]
        self.c_fc = Conv1D(inner, config["n_embd"])
        self.c_proj = Conv1D(config["n_embd"], inner)
        self.act = ACTIVATIONS[config["activation_function"]]

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        eps = config["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(config["n_embd"], eps=eps)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(config["n_embd"], eps=eps)
        self.mlp = GPT2MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["n_positions"], config["n_embd"])
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["n_embd"], eps=config["layer_norm_epsilon"])

    def forward(self, idx):
        positions = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        if config.get("tie_word_embeddings", True):
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx, targets=None):
        logits = self.lm_head(self.transformer(idx))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


# ---- the folder

def fail(message):
    sys.exit(f"export_check: {message}")


def load_folder(folder):
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.isfile(os.path.join(folder, name)):
            fail(f"{folder}: no {name}")
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    if config.get("model_type") != "gpt2" or config.get("architectures") != ["GPT2LMHeadModel"]:
        fail(f"{folder}/config.json: not a GPT2LMHeadModel's config")
    model = GPT2LMHeadModel(config)
    tensors, meta = compare_pytorch.load_safetensors(os.path.join(folder, "model.safetensors"))
    if meta.get("format") != "pt":
        fail(f"{folder}/model.safetensors: metadata format is {meta.get('format')!r}, expected 'pt'")
    # every name and shape as the modules have them; only the tied head absent
    result = model.load_state_dict(tensors, strict=False)
    if result.unexpected_keys or result.missing_keys != ["lm_head.weight"]:
        fail(f"{folder}/model.safetensors: names not GPT2LMHeadModel's: missing {result.missing_keys}, "
             f"unexpected {result.unexpected_keys}")
    with open(os.path.join(folder, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    if tokenizer["model"]["type"] != "WordLevel" or tokenizer["decoder"]["type"] != "Fuse":
        fail(f"{folder}/tokenizer.json: expected a WordLevel model and the Fuse decoder")
    return config, model, tokenizer["model"]["vocab"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--ckpt", required=True, help="the checkpoint it was exported from (its run's corpus)")
    parser.add_argument("--data", help="FILE, DIR or A,B,... (default: the run's)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config, hf_model, vocab = load_folder(args.folder)

    run = compare_pytorch.saved_run_flags(args.ckpt)
    data = args.data or run.get("--data", os.path.join(compare_pytorch.ROOT, "data", "tinyshakespeare.txt"))
    batch = int(run.get("--batch", 12))
    batches = int(run.get("--eval-batches", 50))
    val_fraction = float(run.get("--val-fraction", 0.1))
    text = compare_pytorch.corpus_text(data, "--skip-bad-files" in run)
    try:
        ids = [vocab[ch] for ch in text]  # tokenizer.json: one token per character
    except KeyError as e:
        fail(f"{data}: character {e} is not in tokenizer.json")
    tokens = torch.tensor(ids).numpy()
    val = tokens[int(len(tokens) * (1 - val_fraction)):]
    hf_loss = compare_pytorch.validation_loss(hf_model, val, config["n_positions"], batch, batches)

    tensors, meta = compare_pytorch.load_safetensors(args.ckpt)
    ours_config = json.loads(meta["config"])
    ours = compare_pytorch.TinyGPT(ours_config["vocab_size"], ours_config["context"], ours_config["layers"],
                                   ours_config["heads"], ours_config["dim"])
    ours.load_state_dict(tensors, strict=True)
    ours_loss = compare_pytorch.validation_loss(ours, val, ours_config["context"], batch, batches)
    print(f"{args.folder}: GPT2LMHeadModel from config.json, model.safetensors loaded by its own names; "
          f"{data}, batch {batch}, {batches} batches")
    print(f"loss: hf {hf_loss:.6f}, ours {ours_loss:.6f} (difference {abs(hf_loss - ours_loss):.1e})")


if __name__ == "__main__":
    main()
