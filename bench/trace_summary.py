"""Summarises Chrome traces written by `loco train` (LOCO_PROFILE=FILE) and `bench/torch_loop.py
--profile FILE`: GPU kernel time by kind and the kernels that cost most, so two implementations of the
same training step can be compared kernel class by kernel class.

    python3 bench/trace_summary.py --steps 2 loco=loco-trace.json eager=eager-trace.json [--top 12]

Prints, per trace: wall span of the GPU work, time the GPU was busy (union of kernel intervals),
kernel launches, then a table of milliseconds per step by kernel class for all traces side by side,
then each trace's most expensive kernels. --json FILE also writes the numbers.
"""

import argparse
import collections
import json
import re
import sys

# Kernel classes, first match wins (names of cuBLAS/CUTLASS/flash/ATen/Triton kernels).
CLASSES = [
    ("attention", r"flash|fmha|attention|sdpa"),
    ("matmul", r"gemm|cutlass|xmma|nvjet|cublas|sm90_|sm80_|wgmma|splitk"),
    ("optimizer", r"adam|multi_tensor|foreach|fused_adam"),
    ("softmax / cross-entropy", r"softmax|nll_loss|cross_entropy|log_softmax"),
    ("embedding", r"embedding|index_select|indexselect|index_put|scatter|gather"),
    ("reduction / norm", r"reduce|norm|mean|sum_|rsqrt"),
    ("copy / cast", r"copy|memcpy|memset|cast|fill|_to_copy|catarray|cat_"),
    ("triton (fused)", r"^triton_"),
    ("elementwise", r"elementwise|vectorized|unrolled|silu|mul|add|pow"),
]


def classify(name):
    lowered = name.lower()
    for label, pattern in CLASSES:
        if re.search(pattern, lowered):
            return label
    return "other"


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def summarise(path, steps):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [e for e in events
               if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel")]
    launches = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
                   and "LaunchKernel" in e.get("name", ""))
    if not kernels:
        return {"path": path, "kernels": 0, "note": "no GPU kernels in the trace"}
    intervals = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in kernels]
    span = max(b for _, b in intervals) - min(a for a, _ in intervals)
    busy = union_length(intervals)
    by_class = collections.Counter()
    by_name = collections.Counter()
    count_by_name = collections.Counter()
    for e in kernels:
        dur = float(e.get("dur", 0))
        by_class[classify(e["name"])] += dur
        by_name[e["name"]] += dur
        count_by_name[e["name"]] += 1
    per_step = lambda us: us / 1000.0 / steps  # noqa: E731
    return {
        "path": path,
        "kernels": len(kernels),
        "kernels_per_step": len(kernels) / steps,
        "launches_per_step": launches / steps,
        "gpu_span_ms_per_step": per_step(span),
        "gpu_busy_ms_per_step": per_step(busy),
        "gpu_busy_fraction": busy / span if span > 0 else 0.0,
        "class_ms_per_step": {k: per_step(v) for k, v in by_class.items()},
        "top": [(name, count_by_name[name] / steps, per_step(us)) for name, us in by_name.most_common(40)],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+", metavar="LABEL=FILE")
    parser.add_argument("--steps", type=int, required=True, help="training steps in each trace")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", help="also write the summaries here")
    args = parser.parse_args()
    summaries = {}
    for item in args.traces:
        label, sep, path = item.partition("=")
        if not sep:
            sys.exit(f"trace_summary: expected LABEL=FILE, got {item!r}")
        summaries[label] = summarise(path, args.steps)

    labels = list(summaries)
    print("per training step (ms):")
    rows = [("", *labels)]
    for key, title in (("gpu_span_ms_per_step", "GPU span"), ("gpu_busy_ms_per_step", "GPU busy"),
                       ("kernels_per_step", "kernels"), ("launches_per_step", "kernel launches")):
        rows.append((title, *(f"{summaries[l].get(key, float('nan')):.1f}" for l in labels)))
    classes = sorted({c for s in summaries.values() for c in s.get("class_ms_per_step", {})},
                     key=lambda c: -max(s.get("class_ms_per_step", {}).get(c, 0) for s in summaries.values()))
    for c in classes:
        rows.append((c, *(f"{summaries[l].get('class_ms_per_step', {}).get(c, 0.0):.1f}" for l in labels)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    for label in labels:
        s = summaries[label]
        print(f"\n{label}: top kernels (launches/step, ms/step)")
        for name, count, ms in s.get("top", [])[:args.top]:
            print(f"  {ms:8.2f} {count:6.0f}  {name[:110]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=1)


if __name__ == "__main__":
    main()
