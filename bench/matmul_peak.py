"""Measured float32 matmul throughput of this machine: the practical peak that training
throughput is compared against (bench/throughput.sh).

    /usr/bin/python3 bench/matmul_peak.py --threads 2 [--repeats 7]

For square sizes 512, 1024, 2048: C = A @ B timed `repeats` times after one warm-up, GFLOP/s =
2 n^3 / median time. Prints one JSON line; "peak_gflops" is the best size's median.
"""

import argparse
import json
import statistics
import time

import torch

SIZES = (512, 1024, 2048)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, required=True, help="torch.set_num_threads")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    by_size = {}
    for n in SIZES:
        a, b = torch.randn(n, n), torch.randn(n, n)
        out = torch.empty(n, n)
        torch.mm(a, b, out=out)  # warm-up: thread pool, caches
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            torch.mm(a, b, out=out)
            times.append(time.perf_counter() - start)
        by_size[str(n)] = 2 * n ** 3 / statistics.median(times) / 1e9
    print(json.dumps({
        "dtype": "float32",
        "threads": args.threads,
        "repeats": args.repeats,
        "gflops_by_size": {k: round(v, 2) for k, v in by_size.items()},
        "peak_gflops": round(max(by_size.values()), 2),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
