"""Reference Llama in plain PyTorch, with the semantics and parameter names of Hugging Face
`LlamaForCausalLM` (transformers' modeling_llama.py, eager attention), written out here because
the machines have no transformers package.

Conventions the C++ model must match (see tests/fixtures/README.md):
  * RMSNorm: y = weight * (x * rsqrt(mean(x^2) + eps)), the normalisation computed in
    max(float32, x.dtype) and cast back to x.dtype before the weight multiply.
  * RoPE, rotate-half layout: inv_freq[j] = 1 / theta^(2j / head_dim), angle = pos * inv_freq,
    emb = cat(angle, angle); q' = q*cos + rotate_half(q)*sin, rotate_half(x) = cat(-x2, x1).
    cos/sin are computed in float64 and cast to the activation dtype (HF computes them in
    float32; the difference is ~1e-7 relative and only visible in float64 comparisons).
  * Attention heads: q_proj output viewed as (T, n_heads, head_dim); query head h reads
    key/value head h // (n_heads / n_kv_heads) (HF repeat_kv). Scores scaled by 1/sqrt(head_dim),
    causal mask, softmax in max(float32, dtype).
  * MLP: down(silu(gate(x)) * up(x)). No biases anywhere.
  * Loss: mean cross-entropy of logits (B, T, V) against labels (B, T); labels are already the
    next tokens (no shift here), label -100 is ignored (torch default).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

REQUIRED_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads")

# Defaults of transformers' LlamaConfig for the optional keys.
HF_DEFAULTS = {
    "num_key_value_heads": None,  # None means num_attention_heads
    "max_position_embeddings": 2048,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "initializer_range": 0.02,
}


def resolve_config(config):
    """Fills HF defaults into a config dict and checks the shapes fit together."""
    missing = [k for k in REQUIRED_KEYS if k not in config]
    if missing:
        raise KeyError(f"config is missing required key(s): {', '.join(missing)}")
    cfg = dict(HF_DEFAULTS)
    cfg.update(config)
    if cfg["num_key_value_heads"] is None:
        cfg["num_key_value_heads"] = cfg["num_attention_heads"]
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ValueError("hidden_size must be divisible by num_attention_heads")
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
        raise ValueError("num_attention_heads must be divisible by num_key_value_heads")
    if (cfg["hidden_size"] // cfg["num_attention_heads"]) % 2:
        raise ValueError("head_dim must be even for rotary embeddings")
    return cfg


def compute_dtype(dtype):
    """The dtype for numerically sensitive reductions: float32, or the input's if wider."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(compute_dtype(input_dtype))
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rotary_cos_sin(seq_len, head_dim, theta, dtype, device=None):
    """cos, sin of shape (T, head_dim), computed in float64, cast to dtype."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    positions = torch.arange(seq_len, dtype=torch.float64)
    freqs = torch.outer(positions, inv_freq)  # (T, head_dim/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, head_dim)
    return emb.cos().to(dtype=dtype, device=device), emb.sin().to(dtype=dtype, device=device)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, cos, sin):
    """x: (B, H, T, D); cos, sin: (T, D)."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    """(B, n_kv, T, D) -> (B, n_kv * n_rep, T, D); head h reads kv head h // n_rep."""
    if n_rep == 1:
        return x
    b, n_kv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, n_kv, n_rep, t, d).reshape(b, n_kv * n_rep, t, d)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv_heads = cfg["num_key_value_heads"]
        self.head_dim = cfg["hidden_size"] // self.n_heads
        hidden = cfg["hidden_size"]
        self.q_proj = nn.Linear(hidden, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        scores = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim)  # (B, H, T, T)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = F.softmax(scores, dim=-1, dtype=compute_dtype(q.dtype)).to(q.dtype)
        out = (probs @ v).transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = LlamaRMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
        self.rope_theta = cfg["rope_theta"]

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)  # (B, T, C)
        cos, sin = rotary_cos_sin(input_ids.shape[1], self.head_dim, self.rope_theta, x.dtype,
                                  x.device)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        cfg = resolve_config(config)
        self.config = cfg
        self.model = LlamaModel(cfg)
        if cfg["tie_word_embeddings"]:
            self.lm_head = None
        else:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.init_weights()

    def init_weights(self):
        """HF `_init_weights`: normal(0, initializer_range) for linear and embedding, ones for norms."""
        std = self.config["initializer_range"]
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, mean=0.0, std=std)

    def output_weight(self):
        return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, input_ids):
        """input_ids (B, T) int64 -> logits (B, T, V)."""
        hidden = self.model(input_ids)
        return F.linear(hidden, self.output_weight())


def causal_lm_loss(logits, labels):
    """Mean cross-entropy over all (B, T) positions; labels are the next tokens already."""
    v = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, v).to(compute_dtype(logits.dtype)), labels.reshape(-1))


def decay_groups(model, weight_decay):
    """AdamW parameter groups used by loco: decay for tensors with >= 2 dims (embeddings,
    projections), none for 1-d tensors (norm weights)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def count_params(model):
    return sum(p.numel() for p in model.parameters())
