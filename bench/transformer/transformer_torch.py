"""The Transformer block training step of bench/transformer/run.py in PyTorch (eager, as its
users train): prints the mean step time in ms. Argument: threads. Exits 1 when torch is not
installed (run.py then says so)."""
import sys
import time
try:
    import torch
except ImportError:
    sys.exit(1)
THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(THREADS)
B, T, D, F, V = 16, 64, 256, 1024, 512
g = torch.Generator().manual_seed(0)


def n(*s):
    return (torch.randn(*s, generator=g) * 0.05).requires_grad_()


def layer_norm(x, w, b):
    d = x - x.mean(-1, keepdim=True)
    return d / torch.sqrt((d * d).mean(-1, keepdim=True) + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


params = [n(V, D), n(T, D), torch.ones(D, requires_grad=True), torch.zeros(D, requires_grad=True),
          n(D, D), n(D, D), n(D, D), n(D, D), torch.ones(D, requires_grad=True),
          torch.zeros(D, requires_grad=True), n(D, F), torch.zeros(F, requires_grad=True), n(F, D),
          torch.zeros(D, requires_grad=True)]
tokens = torch.randint(0, V, (B, T + 1), generator=g)
causal = torch.tril(torch.ones(T, T, dtype=torch.bool))


def loss_of(p):
    emb, pos, g1, b1_, wq, wk, wv, wo, g2, b2_, w1, b1, w2, b2 = p
    ids, targets = tokens[:, :T], tokens[:, 1:].reshape(-1)
    x = emb[ids] + pos
    h = layer_norm(x, g1, b1_).reshape(B * T, D)
    q, k, v = [(h @ w).reshape(B, T, D) for w in (wq, wk, wv)]
    s = q @ k.transpose(1, 2) / D ** 0.5
    a = torch.softmax(torch.where(causal, s, torch.tensor(-1e9)), -1) @ v
    x = x + (a.reshape(B * T, D) @ wo).reshape(B, T, D)
    u = gelu(layer_norm(x, g2, b2_).reshape(B * T, D) @ w1 + b1)
    x = x + (u @ w2 + b2).reshape(B, T, D)
    logits = x.reshape(B * T, D) @ emb.T
    return torch.nn.functional.cross_entropy(logits, targets)


steps = 10
times = []
for _ in range(steps + 1):
    t0 = time.perf_counter()
    loss = loss_of(params)
    loss.backward()
    with torch.no_grad():
        for w in params:
            w -= 0.01 * w.grad
            w.grad = None
    times.append(time.perf_counter() - t0)
print("%.4f" % (sum(times[1:]) / steps * 1e3))
