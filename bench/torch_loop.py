"""The PyTorch peer of `loco train` for throughput comparisons: the same Llama, data, optimiser
and schedule, trained by a plain eager PyTorch loop as a user would write it.

    /usr/bin/python3 bench/torch_loop.py --config bench/configs/tiny-150k.toml --data data/brown \
        --steps 30 --threads 2 [--set optim.lr=1e-3 ...]
    python3 bench/torch_loop.py --config configs/llama-125m.toml --data data/brown --steps 20 \
        --threads 8 --device cuda --autocast bf16 [--compile] [--profile trace.json]

Reads the loco TOML config ([model], [data], [optim], [train]; keys it has no use for are
ignored), reads train shards of DIR through numpy memmap, runs 3 untimed warm-up steps then
--steps timed ones, and prints one JSON line:
  {"impl": "pytorch", "params": N, "tokens_per_s": ..., "step_time_s": ..., "steps": N,
   "threads": K, "final_loss": ..., ...}

On CUDA (train.device = "cuda"/"auto" in the config, or --device) the loop runs the forward pass
and loss under torch.autocast(bfloat16) when train.autocast (or --autocast) is "bf16", and
attention goes through F.scaled_dot_product_attention where the torch has it (--attention;
loco's choice too). --compile wraps the model in torch.compile. --profile FILE writes a Chrome trace
of 2 extra steps after the timed ones (bench/trace_summary.py summarises it).
"""

import argparse
import contextlib
import json
import math
import os
import sys
import time
import tomllib

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import llama_ref  # noqa: E402
from llama_ref import LlamaForCausalLM, causal_lm_loss, decay_groups  # noqa: E402

WARMUP_STEPS = 3
SHARD_MAGIC = b"LOCOTOK1"
SHARD_HEADER_BYTES = 32
# The defaults of loco's src/loco/config/run_config.h, for keys a config leaves out.
DEFAULTS = {
    "model": {"vocab_size": 0, "hidden_size": 64, "intermediate_size": 0, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 0, "max_position_embeddings": 0,
              "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
              "initializer_range": 0.02},
    "data": {"dir": "data/brown", "seq_len": 128},
    "optim": {"lr": 3e-4, "min_lr_ratio": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
              "weight_decay": 0.1, "grad_clip": 1.0, "schedule": "cosine", "warmup_steps": 100,
              "decay_fraction": 0.2},
    "train": {"batch_size": 16, "micro_batch_size": 0, "seed": 0, "device": "cpu",
              "autocast": "none"},
}
PROFILE_STEPS = 2


def parse_value(text):
    """A --set value as TOML would read it (number, bool, quoted string), else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_config(path, overrides):
    with open(path, "rb") as f:
        config = tomllib.load(f)
    for item in overrides:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot:
            sys.exit(f"torch_loop: --set expects section.key=value, got {item!r}")
        config.setdefault(section, {})[name] = parse_value(value)
    for section, defaults in DEFAULTS.items():
        config[section] = {**defaults, **config.get(section, {})}
    return config


def read_shard(path):
    """Token array (uint16 or uint32 memmap) of one LOCOTOK1 shard."""
    with open(path, "rb") as f:
        header = f.read(SHARD_HEADER_BYTES)
    if len(header) < SHARD_HEADER_BYTES or header[:8] != SHARD_MAGIC:
        sys.exit(f"torch_loop: {path} is not a LOCOTOK1 shard")
    version, width = np.frombuffer(header[8:16], dtype="<u4")
    (count,) = np.frombuffer(header[16:24], dtype="<u8")
    if version != 1 or width not in (2, 4):
        sys.exit(f"torch_loop: {path}: unsupported version {version} / bytes_per_token {width}")
    dtype = "<u2" if width == 2 else "<u4"
    if os.path.getsize(path) < SHARD_HEADER_BYTES + int(count) * int(width):
        sys.exit(f"torch_loop: {path} is shorter than its {count} tokens")
    return np.memmap(path, dtype=dtype, mode="r", offset=SHARD_HEADER_BYTES, shape=(int(count),))


class WindowSampler:
    """Random windows of seq_len + 1 tokens from the train shards (shard chosen by length)."""

    def __init__(self, data_dir, seq_len, seed):
        with open(os.path.join(data_dir, "meta.json")) as f:
            self.meta = json.load(f)
        self.shards = [read_shard(os.path.join(data_dir, name))
                       for name in self.meta["train"]["shards"]]
        self.shards = [s for s in self.shards if len(s) > seq_len]
        if not self.shards:
            sys.exit(f"torch_loop: no train shard in {data_dir} has more than {seq_len} tokens")
        sizes = np.array([len(s) - seq_len for s in self.shards], dtype=np.float64)
        self.shard_p = sizes / sizes.sum()
        self.seq_len = seq_len
        self.rng = np.random.default_rng(seed)

    def batch(self, size):
        """(inputs, labels), each int64 (size, seq_len)."""
        rows = []
        for shard_index in self.rng.choice(len(self.shards), size=size, p=self.shard_p):
            shard = self.shards[shard_index]
            start = int(self.rng.integers(0, len(shard) - self.seq_len))
            rows.append(np.asarray(shard[start:start + self.seq_len + 1], dtype=np.int64))
        window = torch.from_numpy(np.stack(rows))
        return window[:, :-1], window[:, 1:]


def model_config(model, data, meta):
    hidden, heads = model["hidden_size"], model["num_attention_heads"]
    return {
        "vocab_size": model["vocab_size"] or meta["vocab_size"],
        "hidden_size": hidden,
        "intermediate_size": model["intermediate_size"] or 32 * math.ceil((8 * hidden / 3) / 32),
        "num_hidden_layers": model["num_hidden_layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": model["num_key_value_heads"] or heads,
        "max_position_embeddings": model["max_position_embeddings"] or data["seq_len"],
        "rope_theta": float(model["rope_theta"]),
        "rms_norm_eps": float(model["rms_norm_eps"]),
        "tie_word_embeddings": bool(model["tie_word_embeddings"]),
        "initializer_range": float(model["initializer_range"]),
    }


def learning_rate(step, total, optim):
    """lr of 0-based `step` out of `total`: linear warm-up to the peak, then cosine (or linear,
    constant, wsd) down to peak * min_lr_ratio; the same function as loco's train/schedule.cpp."""
    peak, warmup, kind = optim["lr"], optim["warmup_steps"], optim["schedule"]
    floor = peak * optim["min_lr_ratio"]
    if step < warmup:
        return peak * (step + 1) / warmup
    if kind == "constant":
        return peak

    def fraction(done, span):
        return 1.0 if span <= 0 else min(1.0, max(0.0, done / span))

    if kind == "wsd":
        decay_start = max(warmup, total - math.floor(optim["decay_fraction"] * total + 0.5))
        if step < decay_start:
            return peak
        return floor + (peak - floor) * (1.0 - fraction(step - decay_start, total - 1 - decay_start))
    progress = fraction(step - warmup, total - 1 - warmup)
    if kind == "linear":
        return floor + (peak - floor) * (1.0 - progress)
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def use_sdpa_attention():
    """Attention through F.scaled_dot_product_attention (flash / memory-efficient kernels), as
    loco does on libtorch >= 2; rotary tables in the projections' dtype, as loco applies them."""

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = llama_ref.apply_rotary(q, cos, sin), llama_ref.apply_rotary(k, cos, sin)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = llama_ref.repeat_kv(k, n_rep), llama_ref.repeat_kv(v, n_rep)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))

    llama_ref.LlamaAttention.forward = forward


def cache_rotary_tables():
    """llama_ref builds the rotary tables in float64 on the CPU at every forward; on a GPU that is
    a host-to-device copy and a synchronisation per step that no GPU training loop has. Keep them."""
    build = llama_ref.rotary_cos_sin
    cache = {}

    def cached(seq_len, head_dim, theta, dtype, device=None):
        key = (seq_len, head_dim, theta, dtype, str(device))
        if key not in cache:
            cache[key] = build(seq_len, head_dim, theta, dtype, device)
        return cache[key]

    llama_ref.rotary_cos_sin = cached


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_loop: device cuda asked for, but this torch sees no GPU")
    return name


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="loco TOML config")
    parser.add_argument("--data", help="data directory (overrides data.dir)")
    parser.add_argument("--steps", type=int, required=True, help="timed steps (after 3 warm-up)")
    parser.add_argument("--threads", type=int, required=True, help="torch.set_num_threads")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), help="overrides train.device")
    parser.add_argument("--autocast", choices=("none", "bf16"), help="overrides train.autocast")
    parser.add_argument("--attention", choices=("auto", "sdpa", "eager"), default="auto",
                        help="auto: SDPA where torch has it (>= 2.0), else eager")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--profile", metavar="FILE",
                        help=f"Chrome trace of {PROFILE_STEPS} extra steps after the timed ones")
    args = parser.parse_args()

    if args.steps < 1 or args.threads < 1:
        sys.exit("torch_loop: --steps and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    config = load_config(args.config, args.set)
    data, optim, train = config["data"], config["optim"], config["train"]
    data_dir = args.data or data["dir"]
    if optim["schedule"] not in ("cosine", "linear", "constant", "wsd"):
        sys.exit(f"torch_loop: unknown optim.schedule {optim['schedule']!r}")
    batch_size = train["batch_size"]
    micro = train["micro_batch_size"] or batch_size
    if batch_size % micro:
        sys.exit("torch_loop: train.batch_size must be a multiple of train.micro_batch_size")
    seq_len = data["seq_len"]

    device = resolve_device(args.device or train["device"])
    autocast = args.autocast or train["autocast"]
    if autocast == "bf16" and device != "cuda":
        sys.exit("torch_loop: bf16 autocast needs the cuda device (as in loco)")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    attention = ("sdpa" if has_sdpa else "eager") if args.attention == "auto" else args.attention
    if attention == "sdpa":
        if not has_sdpa:
            sys.exit(f"torch_loop: torch {torch.__version__} has no scaled_dot_product_attention")
        use_sdpa_attention()
    if device != "cpu":
        cache_rotary_tables()

    torch.manual_seed(train["seed"])
    sampler = WindowSampler(data_dir, seq_len, train["seed"])
    cfg = model_config(config["model"], data, sampler.meta)
    model = LlamaForCausalLM(cfg).to(device)  # float32 parameters
    model.train()
    optimizer = torch.optim.AdamW(decay_groups(model, optim["weight_decay"]), lr=optim["lr"],
                                  betas=(optim["beta1"], optim["beta2"]), eps=optim["eps"])
    forward = torch.compile(model) if args.compile else model
    extra_steps = PROFILE_STEPS if args.profile else 0
    total_steps = WARMUP_STEPS + args.steps + extra_steps
    accumulation = batch_size // micro

    def train_step(step):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total_steps, optim)
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(accumulation):
            inputs, labels = sampler.batch(micro)
            inputs, labels = inputs.to(device), labels.to(device)
            with (torch.autocast("cuda", dtype=torch.bfloat16) if autocast == "bf16"
                  else contextlib.nullcontext()):
                loss = causal_lm_loss(forward(inputs), labels) / accumulation
            loss.backward()
            loss_sum += loss.item()
        if optim["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), optim["grad_clip"])
        optimizer.step()
        return loss_sum

    warmup_start = time.perf_counter()
    for step in range(WARMUP_STEPS):
        train_step(step)
    synchronize(device)
    warmup_s = time.perf_counter() - warmup_start
    start = time.perf_counter()
    loss_value = float("nan")
    for step in range(WARMUP_STEPS, WARMUP_STEPS + args.steps):
        loss_value = train_step(step)
    synchronize(device)
    elapsed = time.perf_counter() - start
    if args.profile:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            for step in range(WARMUP_STEPS + args.steps, total_steps):
                train_step(step)
            synchronize(device)
        prof.export_chrome_trace(args.profile)

    params = sum(p.numel() for p in model.parameters())
    embedding = cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg["tie_word_embeddings"] else 2)
    print(json.dumps({
        "impl": "pytorch",
        "params": params,
        "nonembedding_params": params - embedding,
        "tokens_per_s": args.steps * batch_size * seq_len / elapsed,
        "step_time_s": elapsed / args.steps,
        "steps": args.steps,
        "threads": args.threads,
        "final_loss": loss_value,
        "vocab_size": cfg["vocab_size"],
        "hidden_size": cfg["hidden_size"],
        "num_hidden_layers": cfg["num_hidden_layers"],
        "seq_len": seq_len,
        "batch_size": batch_size,
        "micro_batch_size": micro,
        "torch": torch.__version__,
        "device": device,
        "autocast": autocast,
        "attention": attention,
        "compile": args.compile,
        "warmup_s": warmup_s,
    }))


if __name__ == "__main__":
    main()
