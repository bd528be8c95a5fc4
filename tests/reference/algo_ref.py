"""Reference update rules of loco's distributed training algorithms, in plain PyTorch, written from
docs/algorithm-reference.md (§1 DiLoCo skeleton, §4 Streaming DiLoCo, §5 NoLoCo, §8 data parallel).
Nothing here calls loco. Used by make_algo_fixtures.py; float64 throughout.

Replicas are simulated one after the other in one process: each has its own model, its own AdamW
(never reset or averaged) and its own fixed batch, used at every inner step. Parameters are handled
as {HF name: tensor} dicts in model.named_parameters() order.
"""

import torch

from llama_ref import causal_lm_loss, decay_groups

INNER = {"lr0": 1e-2, "lr_decay": 0.8, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1,
         "max_grad_norm": 1.0,
         "lr": "inner step k (k = 0, 1, ...) uses lr0 * lr_decay**k",
         "decay": "weight_decay applies to parameters with >= 2 dims; 1-d (norm) weights get 0",
         "clip": "torch.nn.utils.clip_grad_norm_ over all parameters before each AdamW step"}


def inner_lr(k):
    return INNER["lr0"] * INNER["lr_decay"] ** k


def make_adamw(model):
    return torch.optim.AdamW(decay_groups(model, INNER["weight_decay"]), lr=INNER["lr0"],
                             betas=tuple(INNER["betas"]), eps=INNER["eps"])


def random_batch(vocab_size, seed, rows=2, seq=7):
    """input_ids, labels (rows, seq) int64 from a torch.Generator seeded `seed`."""
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab_size, (rows, seq), generator=gen, dtype=torch.int64)
    labels = torch.randint(0, vocab_size, (rows, seq), generator=gen, dtype=torch.int64)
    return input_ids, labels


def named(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def load(model, params):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in params:
                p.copy_(params[name])


def adamw_step(model, optimizer, k):
    """Clip to the global max norm, then one AdamW step at inner step k's lr."""
    for group in optimizer.param_groups:
        group["lr"] = inner_lr(k)
    torch.nn.utils.clip_grad_norm_(model.parameters(), INNER["max_grad_norm"])
    optimizer.step()


class Replica:
    """One replica: its own copy of the model, its own AdamW, its own fixed batch."""

    def __init__(self, make_model, batch):
        self.model = make_model()
        self.optimizer = make_adamw(self.model)
        self.input_ids, self.labels = batch

    def inner_step(self, k):
        """Inner step k (0-based); returns the loss before the step."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = causal_lm_loss(self.model(self.input_ids), self.labels)
        loss.backward()
        adamw_step(self.model, self.optimizer, k)
        return loss.detach().reshape([])

    def params(self, names=None):
        return {n: p.detach().clone() for n, p in self.model.named_parameters()
                if names is None or n in names}


def mean_of(dicts):
    return {n: sum(d[n] for d in dicts) / len(dicts) for n in dicts[0]}


class OuterNesterov:
    """PyTorch-form Nesterov SGD on global params (dampening 0, no weight decay), docs/algorithm-reference.md §1:
    b = mu*b + delta;  theta_g -= eta*(delta + mu*b)."""

    def __init__(self, params, eta, mu):
        self.theta = {n: t.clone() for n, t in params.items()}
        self.buf = {n: torch.zeros_like(t) for n, t in params.items()}
        self.eta, self.mu = eta, mu

    def pseudo_gradient(self, replica_params):
        """delta = mean_m(theta_g - theta_m)."""
        return {n: sum(self.theta[n] - p[n] for p in replica_params) / len(replica_params)
                for n in self.theta}

    def step(self, delta):
        for n in self.theta:
            self.buf[n] = self.mu * self.buf[n] + delta[n]
            self.theta[n] = self.theta[n] - self.eta * (delta[n] + self.mu * self.buf[n])
        return self.theta


def run_data_parallel_large_batch(make_model, batches, steps):
    """DDP's reference: one model on the rows of all replicas concatenated (mean over positions)."""
    model = make_model()
    optimizer = make_adamw(model)
    input_ids = torch.cat([b[0] for b in batches])
    labels = torch.cat([b[1] for b in batches])
    losses = []
    for k in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = causal_lm_loss(model(input_ids), labels)
        loss.backward()
        adamw_step(model, optimizer, k)
        losses.append(loss.detach().reshape([]))
    return losses, named(model)


def run_data_parallel_replicas(make_model, batches, steps):
    """DDP as the replicas do it: per-replica grads, averaged (mean) before clipping."""
    replicas = [Replica(make_model, b) for b in batches]
    losses = []
    for k in range(steps):
        step_losses = []
        for r in replicas:
            r.optimizer.zero_grad(set_to_none=True)
            loss = causal_lm_loss(r.model(r.input_ids), r.labels)
            loss.backward()
            step_losses.append(loss.detach())
        grads = [[p.grad for p in r.model.parameters()] for r in replicas]
        for r in replicas:
            for i, p in enumerate(r.model.parameters()):
                p.grad = sum(g[i] for g in grads) / len(grads)
            adamw_step(r.model, r.optimizer, k)
        losses.append(sum(step_losses) / len(step_losses))
    return losses, [r.params() for r in replicas]


def run_diloco(make_model, batches, sync_every, rounds, eta, mu):
    """DiLoCo (docs/algorithm-reference.md §1): H inner steps per replica, then Nesterov on theta_g with
    delta = mean_m(theta_g - theta_m), theta_m = theta_g. Returns losses[m][k], theta_g after each
    round, the Nesterov buffer after each round."""
    replicas = [Replica(make_model, b) for b in batches]
    outer = OuterNesterov(replicas[0].params(), eta, mu)
    losses = [[] for _ in replicas]
    globals_, buffers = [], []
    k = 0
    for _ in range(rounds):
        for _ in range(sync_every):
            for m, r in enumerate(replicas):
                losses[m].append(r.inner_step(k))
            k += 1
        theta = outer.step(outer.pseudo_gradient([r.params() for r in replicas]))
        for r in replicas:
            load(r.model, theta)
        globals_.append({n: t.clone() for n, t in theta.items()})
        buffers.append({n: t.clone() for n, t in outer.buf.items()})
    return losses, globals_, buffers


def run_noloco(make_model, batches, sync_every, rounds, alpha, beta, gamma, groups=None):
    """NoLoCo (docs/algorithm-reference.md §5, authors' code form): at each sync, for replica i in group G,
    m_i = alpha*m_i + beta*mean_G(theta - phi) + gamma*(mean_G(phi) - phi_i); phi_i += m_i;
    theta_i = phi_i. groups[r] lists the groups (lists of replicas) of round r; None: one group
    holding every replica. Returns losses[m][k] and phi[round][m]."""
    replicas = [Replica(make_model, b) for b in batches]
    everyone = [list(range(len(replicas)))]
    phi = [r.params() for r in replicas]
    mom = [{n: torch.zeros_like(t) for n, t in p.items()} for p in phi]
    losses = [[] for _ in replicas]
    phis = []
    k = 0
    for rnd in range(rounds):
        for _ in range(sync_every):
            for m, r in enumerate(replicas):
                losses[m].append(r.inner_step(k))
            k += 1
        theta = [r.params() for r in replicas]
        new_phi = [None] * len(replicas)
        for group in (everyone if groups is None else groups[rnd]):
            progress = mean_of([{n: theta[j][n] - phi[j][n] for n in phi[j]} for j in group])
            consensus = mean_of([phi[j] for j in group])
            for i in group:
                for n in phi[i]:
                    mom[i][n] = (alpha * mom[i][n] + beta * progress[n]
                                 + gamma * (consensus[n] - phi[i][n]))
                new_phi[i] = {n: phi[i][n] + mom[i][n] for n in phi[i]}
        assert all(p is not None for p in new_phi), "every replica must be in one group"
        phi = new_phi
        for r, ph in zip(replicas, phi):
            load(r.model, ph)
        phis.append([{n: t.clone() for n, t in ph.items()} for ph in phi])
    return losses, phis


def run_streaming(make_model, batches, fragments, sync_every, overlap, mix, eta, mu, total_steps):
    """Streaming DiLoCo (docs/algorithm-reference.md §4), exchange in full precision.

    fragments: list of lists of parameter names. Fragment p sends at steps t > 0 with
    t = p*floor(H/P) (mod H), as loco spaces them ("step t" = after t inner steps). A send at t computes
    delta_p = mean_m(theta_g,p - theta_m,p) from the params at step t; the result is applied after
    step t + tau: theta~ = Nesterov(theta_g,p, delta_p); theta_g,p = theta~;
    theta_m,p = mix*theta_m,p + (1-mix)*theta~ on every replica. With tau = 0 it is applied at once
    and theta_m,p = theta~. At the last step T: what is due at T is applied, then every exchange still
    in flight (with mixing), then every fragment syncs once more with tau = 0, in index order; a
    fragment scheduled to send at T sends only this final time.
    Returns losses[m][k], theta_g (all fragments), theta_m of every replica, and a log of events."""
    replicas = [Replica(make_model, b) for b in batches]
    P, H = len(fragments), sync_every
    offsets = [p * (H // P) for p in range(P)]
    initial = replicas[0].params()
    outer = [OuterNesterov({n: initial[n] for n in frag}, eta, mu) for frag in fragments]
    losses = [[] for _ in replicas]
    pending = []  # (due step, fragment, delta) in send order
    events = []

    def send(p):
        return outer[p].pseudo_gradient([r.params(set(fragments[p])) for r in replicas])

    def apply(p, delta, mixed):
        theta = outer[p].step(delta)
        for r in replicas:
            local = r.params(set(fragments[p]))
            load(r.model, {n: mix * local[n] + (1 - mix) * theta[n] for n in theta} if mixed
                 else theta)

    for t in range(1, total_steps + 1):
        for m, r in enumerate(replicas):
            losses[m].append(r.inner_step(t - 1))
        for due, p, delta in [e for e in pending if e[0] == t]:
            apply(p, delta, mixed=True)
            events.append(f"apply fragment {p} at {t}")
        pending = [e for e in pending if e[0] != t]
        if t == total_steps:
            for _, p, delta in pending:
                apply(p, delta, mixed=True)
                events.append(f"apply in-flight fragment {p} at {t}")
            pending = []
            for p in range(P):
                apply(p, send(p), mixed=False)
                events.append(f"final sync fragment {p} at {t}")
            break
        for p in range(P):
            if t % H == offsets[p] % H:
                if overlap == 0:
                    apply(p, send(p), mixed=False)
                    events.append(f"sync fragment {p} at {t}")
                else:
                    pending.append((t + overlap, p, send(p)))
                    events.append(f"send fragment {p} at {t}")
    theta_g = {}
    for o in outer:
        theta_g.update(o.theta)
    return losses, theta_g, [r.params() for r in replicas], events
