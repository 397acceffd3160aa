#!/usr/bin/python3
"""A Hugging Face folder from bin/export --to hf, checked against the layout
transformers documents and run in plain PyTorch.

    scripts/export_check.py HF_DIR --ckpt out/model.safetensors [--data FILE|DIR|A,B,...]

transformers is not needed (nor installed here): GPT2LMHeadModel and
LlamaForCausalLM are written below in plain PyTorch as transformers'
modeling_gpt2 and modeling_llama define them, with their module names and
shapes (GPT-2's Conv1D, y = x W + b with W stored [in, out]; Llama's
nn.Linear, its RMSNorm and its rotate-half RoPE), the one config.json's
model_type names built from config.json alone. The folder's
model.safetensors must load into it by name with every shape as the module
has it (lm_head.weight absent exactly when tie_word_embeddings, as
save_pretrained leaves it out); tokenizer.json's WordLevel vocabulary gives
the characters' ids. Nothing of our own checkpoint's names is used for that
model.

It then prints the validation loss over bin/train's fixed windows of the
run's corpus (the run's --data, --batch, --eval-batches and --val-fraction,
read from optimizer.safetensors beside --ckpt, as compare_pytorch.py check
does), for that model and for our checkpoint loaded into compare_pytorch.py's
model (when that model has the checkpoint's block):

    loss: hf 2.787348, ours 2.787348 (difference 1.2e-07)
    loss: hf 2.860181 (compare_pytorch.py has GPT-2's block only)

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


# ---- Llama as transformers' modeling_llama defines it

class LlamaRMSNorm(nn.Module):
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension."""

    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    """(x1, x2) -> (-x2, x1), x1 and x2 the halves of the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_cos_sin(T, head_dim, theta):
    """cos and sin (T, head_dim) of position t times theta^(-2i/head_dim),
    i < head_dim/2, the two halves alike: channel i turns with i + head_dim/2."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    angles = torch.outer(torch.arange(T).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden = config["hidden_size"]
        self.num_heads = config["num_attention_heads"]
        self.num_kv_heads = config.get("num_key_value_heads") or self.num_heads
        self.head_dim = config.get("head_dim") or hidden // self.num_heads
        bias = config.get("attention_bias", False)
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=bias)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = (q @ k.transpose(-1, -2)) * self.head_dim ** -0.5
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        y = F.softmax(scores, dim=-1, dtype=torch.float32) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden, inner = config["hidden_size"], config["intermediate_size"]
        bias = config.get("mlp_bias", False)
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)
        self.act = {"silu": F.silu}[config["hidden_act"]]

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        eps = config["rms_norm_eps"]
        self.input_layernorm = LlamaRMSNorm(config["hidden_size"], eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config["hidden_size"], eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(config) for _ in range(config["num_hidden_layers"])])
        self.norm = LlamaRMSNorm(config["hidden_size"], config["rms_norm_eps"])
        self.head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        self.rope_theta = config.get("rope_theta", 10000.0)

    def forward(self, idx):
        cos, sin = rotary_cos_sin(idx.shape[1], self.head_dim, self.rope_theta)
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)
        if config.get("tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, idx, targets=None):
        logits = self.lm_head(self.model(idx))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


# what config.json's model_type and architectures name, and whether a tied
# head is the default when tie_word_embeddings is not given
MODELS = {"gpt2": ("GPT2LMHeadModel", GPT2LMHeadModel, True),
          "llama": ("LlamaForCausalLM", LlamaForCausalLM, False)}


# ---- the folder

def fail(message):
    sys.exit(f"export_check: {message}")


def load_folder(folder):
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.isfile(os.path.join(folder, name)):
            fail(f"{folder}: no {name}")
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    known = MODELS.get(config.get("model_type"))
    if not known or config.get("architectures") != [known[0]]:
        fail(f"{folder}/config.json: model_type {config.get('model_type')!r}, architectures "
             f"{config.get('architectures')!r}: not one of {sorted(MODELS)}")
    name, model_class, tied_by_default = known
    model = model_class(config)
    tensors, meta = compare_pytorch.load_safetensors(os.path.join(folder, "model.safetensors"))
    if meta.get("format") != "pt":
        fail(f"{folder}/model.safetensors: metadata format is {meta.get('format')!r}, expected 'pt'")
    # every name and shape as the modules have them; only a tied head absent
    result = model.load_state_dict(tensors, strict=False)
    tied = config.get("tie_word_embeddings", tied_by_default)
    if result.unexpected_keys or result.missing_keys != (["lm_head.weight"] if tied else []):
        fail(f"{folder}/model.safetensors: names not {name}'s (tie_word_embeddings {tied}): missing "
             f"{result.missing_keys}, unexpected {result.unexpected_keys}")
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
    context = config.get("n_positions") or config["max_position_embeddings"]
    hf_loss = compare_pytorch.validation_loss(hf_model, val, context, batch, batches)
    print(f"{args.folder}: {config['architectures'][0]} from config.json, model.safetensors loaded by its "
          f"own names; {data}, batch {batch}, {batches} batches")

    tensors, meta = compare_pytorch.load_safetensors(args.ckpt)
    ours_config = json.loads(meta["config"])
    # a compare_pytorch.py that knows the block's choices takes them as `block`
    knows_blocks = hasattr(compare_pytorch, "block_config")
    if not knows_blocks and set(ours_config) != {"vocab_size", "context", "layers", "heads", "dim"}:
        print(f"loss: hf {hf_loss:.6f} (compare_pytorch.py has GPT-2's block only)")
        return
    ours = compare_pytorch.TinyGPT(ours_config["vocab_size"], ours_config["context"], ours_config["layers"],
                                   ours_config["heads"], ours_config["dim"],
                                   **({"block": ours_config} if knows_blocks else {}))
    ours.load_state_dict(tensors, strict=True)
    ours_loss = compare_pytorch.validation_loss(ours, val, ours_config["context"], batch, batches)
    print(f"loss: hf {hf_loss:.6f}, ours {ours_loss:.6f} (difference {abs(hf_loss - ours_loss):.1e})")


if __name__ == "__main__":
    main()
