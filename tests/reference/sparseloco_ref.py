"""SparseLoCo's outer step, transcribed from the rule in docs/sparseloco-reference.md (templar v2.1.3's
compress.py and CCLoco), with loco's choices where the reference leaves one open (docs/sparseloco-reference.md
and src/loco/comm/codecs/sparse_topk.h say which):

    e_r <- beta * e_r + delta_r                    (error feedback, float32: a multiply, then an add)
    s_r  = decode(Q(TopK_tile(e_r)))               (k largest |e| per tile; 2- or 4-bit per-tensor quantiser)
    e_r <- e_r - s_r                               (the residual keeps what the quantiser lost as well)
    theta <- theta - eta * mean over the replicas that sent each coordinate (0 where none did)

Tiles: a 2-D tensor (R, C) is cut into tiles of a x b, a the largest divisor of R that is <= 64, b the same for
C; a 1-D tensor of n values into pieces of the largest divisor of n that is <= 64. k per tile is
min(k, tile size) rounded down to even, at least 2 (the reference's _clamp_topk), and never
more than the tile holds. Ties in |e| go to the lower
index within the tile (torch.topk leaves them open); the chosen indices are kept in ascending order.

Quantiser (one set of statistics per tensor, over every selected value of every tile; statistics in float64,
loco's choice so that every machine computes the same codes):
    shift = mean(v); c = v - shift; sigma = sqrt(sum(c^2) / (n - 1)); scale = 6 sigma / n_bins (1 if 0 or not
    finite); code = clamp(round_half_even(c / scale + n_bins / 2), 0, n_bins - 1);
    lookup[b] = mean of c over the values coded b (0 for an empty bin); decoded = float32(lookup[code]) +
    float32(shift), added in float32.
"""

import torch


def largest_divisor_at_most(n, limit):
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def tiles(shape, side=64):
    """Flat index lists (ascending) of each tile of a tensor of `shape`, in tile order (row-major tiles)."""
    if len(shape) == 1:
        (n,) = shape
        w = largest_divisor_at_most(n, side)
        return [list(range(start, start + w)) for start in range(0, n, w)]
    rows, cols = shape
    a, b = largest_divisor_at_most(rows, side), largest_divisor_at_most(cols, side)
    out = []
    for r0 in range(0, rows, a):
        for c0 in range(0, cols, b):
            out.append([(r0 + i) * cols + (c0 + j) for i in range(a) for j in range(b)])
    return out


def tile_k(k, tile_size):
    k = min(k, tile_size)
    k = max(k, 2)
    return min(k - k % 2, tile_size)  # a tile of one value sends it


def select(e_flat, shape, k):
    """Per tile, the flat indices of the k largest |e| (ties: lower index), ascending."""
    chosen = []
    for tile in tiles(shape):
        values = e_flat[torch.tensor(tile)].abs()
        order = torch.sort(-values, stable=True).indices  # stable: equal |e| keep index order
        kk = tile_k(k, len(tile))
        picked = sorted(tile[i] for i in order[:kk].tolist())
        chosen.extend(picked)
    return chosen


def quantise(values_f32, bits):
    """Codes, the float32 lookup table and the float32 shift of one tensor's selected values."""
    n_bins = 2 ** bits
    v = values_f32.to(torch.float64)
    shift = v.mean()
    c = v - shift
    n = v.numel()
    sigma = torch.sqrt((c * c).sum() / (n - 1)) if n > 1 else torch.tensor(0.0, dtype=torch.float64)
    scale = 6.0 * sigma / n_bins
    if not torch.isfinite(scale) or scale == 0:
        scale = torch.tensor(1.0, dtype=torch.float64)
    codes = torch.clamp(torch.round(c / scale + n_bins / 2), 0, n_bins - 1).to(torch.int64)
    lookup = torch.zeros(n_bins, dtype=torch.float64)
    for b in range(n_bins):
        members = c[codes == b]
        if members.numel() > 0:
            lookup[b] = members.sum() / members.numel()
    return codes, lookup.to(torch.float32), shift.to(torch.float32)


def decode(codes, lookup_f32, shift_f32):
    return lookup_f32[codes] + shift_f32  # float32 add


def compress(e, k, bits):
    """(indices, decoded float32 values) that replica sends for accumulator `e` (any shape)."""
    flat = e.reshape(-1)
    indices = select(flat, tuple(e.shape), k)
    codes, lookup, shift = quantise(flat[torch.tensor(indices)], bits)
    return indices, decode(codes, lookup, shift), codes, lookup, shift


def error_feedback(e, delta, beta, k, bits):
    """One replica's round: the new accumulator and what it sends."""
    e = e * torch.tensor(beta, dtype=torch.float32)
    e = e + delta
    indices, sent, codes, lookup, shift = compress(e, k, bits)
    dense = torch.zeros_like(e).reshape(-1)
    dense[torch.tensor(indices)] = sent
    e = e - dense.reshape(e.shape)
    return e, indices, sent, codes, lookup, shift


def aggregate(contributions, numel):
    """Per coordinate, the mean over the replicas that sent it, in replica order, float32; 0 where none did."""
    total = torch.zeros(numel, dtype=torch.float32)
    count = torch.zeros(numel, dtype=torch.int64)
    for indices, values in contributions:
        for i, v in zip(indices, values.tolist()):
            total[i] = total[i] + torch.tensor(v, dtype=torch.float32)
            count[i] += 1
    out = torch.zeros(numel, dtype=torch.float32)
    sent = count > 0
    out[sent] = total[sent] / count[sent].to(torch.float32)
    return out


def outer_step(theta, aggregated, eta):
    return theta - torch.tensor(eta, dtype=torch.float32) * aggregated.reshape(theta.shape)
