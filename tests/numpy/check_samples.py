#!/usr/bin/python3
"""Checks the samples' expected outputs against an independent numpy computation.

Each sample's .expected file (what the golden test compares shmapc's output with) is parsed
back into arrays, label by label, and compared with what numpy computes for the same
program. Some programs of tests/run have twins too (RUN_TWINS): those are compared exactly,
as printed text (dtype, shape and every element in the print format), because they pin down
semantics such as the sign of a remainder or of a zero. Run with Debian's /usr/bin/python3
(it has numpy).
"""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shm_rng  # noqa: E402  (the runtime's random generator, re-implemented)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = re.compile(r"^(.*?): (f32|f64|i32|bool|i64|f16|bf16)\[([0-9,]*)\]( = (.*))?$")
# bf16 values are read as float32 (each is exactly one; Debian's numpy has no bfloat16)
DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "bool": np.bool_, "i64": np.int64,
          "f16": np.float16, "bf16": np.float32}


def parse_expected(path):
    """label -> np.ndarray, from the fixed print format (docs/numerics.md)."""
    values, order = {}, []
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("== shmap collective stats"):
            break
        m = HEADER.match(line)
        i += 1
        if not m:
            continue
        label, dtype, shape = m.group(1), m.group(2), m.group(3)
        shape = [int(s) for s in shape.split(",")] if shape else []
        if m.group(5) is not None:
            text = m.group(5)
        else:
            body = []
            while i < len(lines) and lines[i] and not HEADER.match(lines[i]) \
                    and not lines[i].startswith("=="):
                body.append(lines[i])
                i += 1
            text = " ".join(body)
        text = text.replace("true", "True").replace("false", "False")
        text = re.sub(r"\binf\b", "float('inf')", text)
        text = re.sub(r"\bnan\b", "float('nan')", text)
        arr = np.array(eval(text), dtype=DTYPES[dtype]).reshape(shape)
        values.setdefault(label, []).append(arr)  # a label printed in a loop repeats
        order.append(label)
    return {k: v[0] if len(v) == 1 else v for k, v in values.items()}


def f32(x):
    return np.asarray(x, dtype=np.float32)


def iota(n):
    return np.arange(n, dtype=np.float32)


# ---- numpy twins of the samples: label -> value

def psum():
    x = f32([3.0, -1.0, 0.5, 2.0, -4.0, 6.0, 1.5, 0.25]).reshape(4, 2)
    return {"psum": x.sum(0), "pmean": x.sum(0) / 4, "pmax": x.max(0), "pmin": x.min(0)}


def psum_2d():
    a = iota(16).reshape(4, 4)
    # sum over y: each device's [2,1] block summed over the 4 y-devices of its row block.
    over_y = a.reshape(4, 4).sum(1, keepdims=True)
    over_x = a.reshape(2, 2, 4).sum(0)
    both = a.reshape(2, 2, 4, 1).sum(axis=(0, 2))
    return {"a": a, "sum over y": over_y, "sum over x": over_x, "sum over x and y": both}


def all_gather():
    x = iota(8) * 10
    scaled = np.concatenate([x * k for k in range(4)])
    return {"untiled": x.reshape(4, 2), "tiled": x, "scaled by device index": scaled}


def psum_scatter():
    x = iota(8)
    total = sum(x * (k + 1) for k in range(4))
    y = iota(16).reshape(4, 4)
    # device k holds column k of y (shape [4,1]); the sum over devices is y.sum(1), of which
    # device k keeps element k.
    return {"tiled": total, "untiled": y.sum(1)}


def all_to_all():
    x = iota(16).reshape(4, 4)
    return {"x": x, "all_to_all": x}


def ppermute():
    x = (iota(8) + 1).reshape(4, 2)
    rotated = np.roll(x, 1, axis=0)
    partial = np.zeros_like(x)
    partial[3], partial[0] = x[0], x[3]
    return {"rotated": rotated.reshape(8), "partial": partial.reshape(8)}


def axis_index():
    ix = np.repeat(np.arange(2), 4)
    iy = np.tile(np.arange(4), 2)
    return {"x": ix, "y": iy, "(x, y)": ix * 4 + iy, "(y, x)": iy * 2 + ix}


def slice_and_average():
    x = iota(512).reshape(8, 64)[:, :4]
    return {"out": x.mean(0)}


def collective_matmul():
    a = iota(128).reshape(8, 16) / 16
    w = iota(128).reshape(16, 8) / 8 - 4
    r = a @ w
    return {"all_gather version": r, "collective version": r, "max abs difference": f32(0)}


def dp_loss():
    w = shm_rng.normal(np.float32, 1, 6).reshape(3, 2) * np.float32(0.5)
    b = f32([0.1, -0.2])
    inputs = shm_rng.uniform(np.float32, 2, 24).reshape(8, 3)
    targets = shm_rng.normal(np.float32, 3, 16).reshape(8, 2)
    pred = np.tanh(inputs @ w + b)
    loss = (pred - targets).sum(-1).mean()
    return {"loss": loss, "host loss": loss}


def host_ops():
    a = iota(6).reshape(2, 3)
    b = f32([10, 20, 30])
    e = np.exp(a - a.max(-1, keepdims=True))
    d = a[1:2, 1:3]
    dus = a.copy()
    dus[0:1, 0:2] = d * 100
    fib = [0, 1]
    for _ in range(10):
        fib = [fib[1], fib[0] + fib[1]]
    batched = iota(12).reshape(2, 2, 3)
    return {
        "a + b": a + b, "a * 2 - 1": a * 2 - 1, "sum": a.sum(), "sum axis 0": a.sum(0),
        "mean axis 1": a.mean(1), "max, min": f32([a.max(), a.min()]), "a @ a^T": a @ a.T,
        "a[1, 1:]": a[1, 1:], "a[:, None, 0]": a[:, None, 0],
        "every other column": a[:, ::2], "exp/log": np.log(np.exp(a)) - a, "sqrt": np.sqrt(a),
        "tanh": np.tanh(a - 2.5), "sin^2 + cos^2": np.sin(a) ** 2 + np.cos(a) ** 2,
        "pow": a ** 2, "where": np.where(a > 2, a, -a),
        "i32 ops": np.arange(5, dtype=np.int32) * 3 % 4, "compare": np.arange(4) >= 2,
        "cast": a.astype(np.int32) + 1, "relu": np.maximum(a - 2, 0),
        "softmax": e / e.sum(-1, keepdims=True), "dynamic_slice": d,
        "dynamic_update_slice": dus, "sum of 0..9": f32(45), "fib(10)": np.int32(fib[0]),
        "sign": f32(1.0), "batched matmul": batched @ a.T,
    }


def dp_mlp_train():
    x = shm_rng.uniform(np.float32, 1, 32).reshape(16, 2) * np.float32(2) - np.float32(1)
    y = (np.sin(np.float32(2) * x[:, 0]) + np.float32(0.5) * x[:, 1]).reshape(16, 1)
    w1 = shm_rng.normal(np.float32, 2, 16).reshape(2, 8)
    b1 = np.zeros(8, np.float32)
    w2 = shm_rng.normal(np.float32, 3, 8).reshape(8, 1) * np.float32(0.5)

    def loss_and_grads(w1, b1, w2):
        h = np.tanh(x @ w1 + b1)
        d = h @ w2 - y
        dpred = 2 * d / d.size
        dh = (dpred @ w2.T) * (1 - h * h)
        return (d * d).mean(), x.T @ dh, dh.sum(0), h.T @ dpred

    losses = []
    for _ in range(10):
        l, g1, gb1, g2 = loss_and_grads(w1, b1, w2)
        losses.append(f32(l))
        w1, b1, w2 = w1 - 0.2 * g1, b1 - 0.2 * gb1, w2 - 0.2 * g2
    return {"loss": losses, "final loss": loss_and_grads(w1, b1, w2)[0]}


def pipeline_mlp():
    """samples/pipeline_mlp.smp: the pipelined train step is SGD on the whole batch's mean
    squared error (the micro-batches change only how the sums round); backpropagation by hand,
    maximum(z, 0)'s derivative 1/2 where z = 0 (as JAX's: a row that relu zeroed whole gives the
    next layer z = b = 0)."""
    w = [shm_rng.normal(np.float32, 1, 16 * 64).reshape(16, 64) * np.float32(0.25),
         shm_rng.normal(np.float32, 2, 64 * 16).reshape(64, 16) * np.float32(0.125),
         shm_rng.normal(np.float32, 3, 16 * 64).reshape(16, 64) * np.float32(0.25),
         shm_rng.normal(np.float32, 4, 64 * 16).reshape(64, 16) * np.float32(0.125)]
    b = [np.zeros(64, np.float32), np.zeros(16, np.float32), np.zeros(64, np.float32), np.zeros(16, np.float32)]
    x = shm_rng.normal(np.float32, 5, 64 * 16).reshape(64, 16)
    y = np.maximum(shm_rng.normal(np.float32, 6, 64 * 16).reshape(64, 16), np.float32(0))
    losses = []
    for _ in range(5):
        acts, pre = [x], []
        for k in range(4):
            pre.append(acts[-1] @ w[k] + b[k])
            acts.append(np.maximum(pre[-1], np.float32(0)))
        d = acts[-1] - y
        losses.append(f32((d * d).mean()))
        grad = 2 * d / d.size
        for k in reversed(range(4)):
            grad = grad * ((pre[k] > 0) + np.float32(0.5) * (pre[k] == 0))
            gw, gb = acts[k].T @ grad, grad.sum(0)
            grad = grad @ w[k].T
            w[k], b[k] = w[k] - np.float32(0.2) * gw, b[k] - np.float32(0.2) * gb
    return {"loss": losses, "w4[0, 0:4]": w[3][0, 0:4]}


def transformer():
    """samples/transformer.smp, unsharded (Megatron's split and the data split change where
    the sums happen, not what they are), in float64 with the backward pass written out by hand.
    The sample computes in float32; the losses agree to the printed digits."""
    tokens = np.load(os.path.join(ROOT, "samples", "data", "tokens.npy")).astype(np.int64)
    ids, targets = tokens[:, :8], tokens[:, 1:].reshape(64)
    eps, ln_eps = 1e-8, 1e-5

    def normal(shape, seed, scale):
        n = int(np.prod(shape))
        return (shm_rng.normal(np.float32, seed, n).reshape(shape) * np.float32(scale)).astype(np.float64)

    p = {"emb": normal((16, 16), 1, 0.5), "pos": normal((8, 16), 2, 0.1),
         "ln1_g": np.ones(16), "ln1_b": np.zeros(16),
         "wq": normal((16, 16), 3, 0.25), "wk": normal((16, 16), 4, 0.25),
         "wv": normal((16, 16), 5, 0.25), "wo": normal((16, 16), 6, 0.25),
         "ln2_g": np.ones(16), "ln2_b": np.zeros(16),
         "w1": normal((16, 32), 7, 0.25), "b1": np.zeros(32),
         "w2": normal((32, 16), 8, 0.18), "b2": np.zeros(16)}

    def ln_fwd(x, g, b):
        d = x - x.mean(-1, keepdims=True)
        inv = 1.0 / np.sqrt((d * d).mean(-1, keepdims=True) + ln_eps)
        xhat = d * inv
        return xhat * g + b, (xhat, inv, g)

    def ln_bwd(dy, cache):
        xhat, inv, g = cache
        axes = tuple(range(dy.ndim - 1))
        dxhat = dy * g
        dx = inv * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
        return dx, (dy * xhat).sum(axes), dy.sum(axes)

    def heads(a):  # [64, 16] -> [8 sequences, 2 heads, 8 positions, 8]
        return a.reshape(8, 8, 2, 8).transpose(0, 2, 1, 3)

    def unheads(a):
        return a.transpose(0, 2, 1, 3).reshape(64, 16)

    causal = np.tril(np.ones((8, 8), bool))
    c = np.sqrt(2 / np.pi)

    def loss_and_grads(p):
        g = {}
        x0 = p["emb"][ids] + p["pos"]
        h, ln1 = ln_fwd(x0, p["ln1_g"], p["ln1_b"])
        h2 = h.reshape(64, 16)
        q, k, v = heads(h2 @ p["wq"]), heads(h2 @ p["wk"]), heads(h2 @ p["wv"])
        s = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(8), -1e9)
        e = np.exp(s - s.max(-1, keepdims=True))
        pr = e / e.sum(-1, keepdims=True)
        a = unheads(pr @ v)
        x1 = x0 + (a @ p["wo"]).reshape(8, 8, 16)
        h3, ln2 = ln_fwd(x1, p["ln2_g"], p["ln2_b"])
        h3 = h3.reshape(64, 16)
        z = h3 @ p["w1"] + p["b1"]
        t = np.tanh(c * (z + 0.044715 * z ** 3))
        u = 0.5 * z * (1 + t)
        x2 = x1 + (u @ p["w2"] + p["b2"]).reshape(8, 8, 16)
        x2f = x2.reshape(64, 16)
        logits = x2f @ p["emb"].T
        lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
        loss = (lse - logits[np.arange(64), targets]).mean()

        dlogits = np.exp(logits - lse[:, None])
        dlogits[np.arange(64), targets] -= 1
        dlogits /= 64
        g["emb"] = dlogits.T @ x2f
        dx2 = dlogits @ p["emb"]
        g["b2"] = dx2.sum(0)
        g["w2"] = u.T @ dx2
        du = dx2 @ p["w2"].T
        dz = du * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z))
        g["w1"], g["b1"] = h3.T @ dz, dz.sum(0)
        dx1, g["ln2_g"], g["ln2_b"] = ln_bwd((dz @ p["w1"].T).reshape(8, 8, 16), ln2)
        dx1 = dx1 + dx2.reshape(8, 8, 16)
        dx1f = dx1.reshape(64, 16)
        g["wo"] = a.T @ dx1f
        da = heads(dx1f @ p["wo"].T)
        dpr, dv = da @ v.transpose(0, 1, 3, 2), pr.transpose(0, 1, 3, 2) @ da
        ds = pr * (dpr - (dpr * pr).sum(-1, keepdims=True)) / np.sqrt(8)
        dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
        dq, dk, dv = unheads(dq), unheads(dk), unheads(dv)
        g["wq"], g["wk"], g["wv"] = h2.T @ dq, h2.T @ dk, h2.T @ dv
        dh2 = dq @ p["wq"].T + dk @ p["wk"].T + dv @ p["wv"].T
        dx0, g["ln1_g"], g["ln1_b"] = ln_bwd(dh2.reshape(8, 8, 16), ln1)
        dx0 = dx0 + dx1
        g["pos"] = dx0.sum(0)
        np.add.at(g["emb"], ids, dx0)
        return loss, g

    m = {k: np.zeros_like(v) for k, v in p.items()}
    vv = {k: np.zeros_like(v) for k, v in p.items()}
    steps, losses = [], []
    for step in range(1, 7):
        loss, g = loss_and_grads(p)
        steps.append(np.int32(step))
        losses.append(loss)
        for k in p:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            vv[k] = 0.999 * vv[k] + 0.001 * g[k] * g[k]
            mhat, vhat = m[k] / (1 - 0.9 ** step), vv[k] / (1 - 0.999 ** step)
            p[k] = p[k] - 0.01 * (mhat / (np.sqrt(vhat) + eps) + 0.01 * p[k])
    return {"step": steps, "loss": losses, "final loss": loss_and_grads(p)[0]}


def pipeline_transformer():
    """samples/pipeline_transformer.smp: samples/transformer.smp's block and AdamW steps, cut into
    two pipeline stages (attention; MLP and the tied logits) over 4 micro-batches: the same
    function of the whole batch, so the same float64 model with its backward pass by hand."""
    return transformer()


def moe():
    """samples/moe.smp: top-2 mixture of experts, one expert per device, on data/moe.npz. The
    layer in float64 as its definition (Out[s] = sum_j gate[s, j] * expert_{e[s, j]}(a[s]); no
    dispatch at all), the gradients and the jvp by central finite differences of that (step
    1e-6), so neither the dispatch nor autodiff is trusted; then the sample's SGD steps on wg,
    w1, w2 with those finite-difference gradients. (The data was chosen so that no token's
    second and third router probabilities come within 0.01 of each other during training: the
    routing, a discontinuity, is the same in float32 and float64.)"""
    data = np.load(os.path.join(ROOT, "samples", "data", "moe.npz"))
    a, wg, w1, w2, target, ta, tw1 = (data[k].astype(np.float64) for k in ("a", "wg", "w1", "w2", "target", "ta", "tw1"))
    c = np.sqrt(2 / np.pi)

    def layer(a, wg, w1, w2):
        z = a @ wg
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        experts = np.argsort(-p, axis=1, kind="stable")[:, :2]        # [s, j]
        h = np.einsum("sd,sjdf->sjf", a, w1[experts])
        h = 0.5 * h * (1 + np.tanh(c * (h + 0.044715 * h ** 3)))
        y = np.einsum("sjf,sjfd->sjd", h, w2[experts])
        return np.einsum("sjd,sj->sd", y, np.take_along_axis(p, experts, axis=1))

    def loss(a, wg, w1, w2):
        d = layer(a, wg, w1, w2) - target
        return (d * d).mean()

    eps = 1e-6

    def fd_grads(params, which):
        grads = []
        for i in which:
            g = np.zeros_like(params[i])
            for idx in np.ndindex(params[i].shape):
                plus = [q.copy() for q in params]
                minus = [q.copy() for q in params]
                plus[i][idx] += eps
                minus[i][idx] -= eps
                g[idx] = (loss(*plus) - loss(*minus)) / (2 * eps)
            grads.append(g)
        return grads

    grads = fd_grads([a, wg, w1, w2], range(4))
    jvp = (loss(a + eps * ta, wg, w1 + eps * tw1, w2) - loss(a - eps * ta, wg, w1 - eps * tw1, w2)) / (2 * eps)
    out = {"dense": layer(a, wg, w1, w2), "ragged = dense": np.bool_(True), "loss": loss(a, wg, w1, w2),
           "d/da": grads[0], "d/dwg": grads[1], "d/dw1": grads[2], "d/dw2": grads[3],
           "jvp dense": jvp, "jvp ragged": jvp, "step": [], "train loss": []}
    params = [a, wg, w1, w2]
    for step in range(1, 7):  # SGD with lr 1
        out["step"].append(np.int32(step))
        out["train loss"].append(loss(*params))
        for i, g in zip((1, 2, 3), fd_grads(params, (1, 2, 3))):
            params[i] = params[i] - g
    out["final loss"] = loss(*params)
    return out


def collective_matmuls():
    """samples/collective_matmuls.smp on data/collective_matmuls.npz: every version computes
    a @ w (all-gather direction) or t @ w2 (reduce-scatter direction); the gradients of
    sum(out^2) are 2 out w^T and 2 a^T out. The training fits w and w2 by SGD (lr 0.5) to
    mean((a w - y)^2) + mean((t w2 - y2)^2), whose gradients are 2/64 a^T (a w - y) and
    2/64 t^T (t w2 - y2)."""
    data = np.load(os.path.join(ROOT, "samples", "data", "collective_matmuls.npz"))
    a, w, t, w2, y, y2 = (data[k].astype(np.float64) for k in ("a", "w", "t", "w2", "y", "y2"))
    out, out2 = a @ w, t @ w2
    yes = np.bool_(True)
    want = {"all-gather matmul": out, "unidirectional = plain": yes, "bidirectional = plain": yes,
            "all-gather d/da": 2 * out @ w.T, "all-gather d/dw": 2 * a.T @ out,
            "unidirectional gradients = plain": yes, "bidirectional gradients = plain": yes,
            "reduce-scatter matmul": out2, "rs unidirectional = plain": yes,
            "rs bidirectional = plain": yes, "reduce-scatter d/dt": 2 * out2 @ w2.T,
            "reduce-scatter d/dw2": 2 * t.T @ out2, "rs unidirectional gradients = plain": yes,
            "rs bidirectional gradients = plain": yes, "step": [], "train loss": []}

    def fit_loss(w, w2):
        return np.mean((a @ w - y) ** 2) + np.mean((t @ w2 - y2) ** 2)

    for step in range(1, 7):
        want["step"].append(np.int32(step))
        want["train loss"].append(fit_loss(w, w2))
        w, w2 = w - 0.5 * 2 / 64 * a.T @ (a @ w - y), w2 - 0.5 * 2 / 64 * t.T @ (t @ w2 - y2)
    want["final loss"] = fit_loss(w, w2)
    return want


def fsdp():
    """samples/fsdp.smp, unsharded (the gathers and scatters of FSDP move blocks, they do not
    change the sums), in float64 with the backward pass by hand; AdamW as optax's."""
    def normal(shape, seed, scale):
        n = int(np.prod(shape))
        return (shm_rng.normal(np.float32, seed, n).reshape(shape) * np.float32(scale)).astype(np.float64)

    p = {"w1": normal((8, 16), 1, 0.35), "w2": normal((16, 4), 2, 0.25)}
    x, y = normal((8, 8), 3, 1.0), normal((8, 4), 4, 1.0)
    mu = {k: np.zeros_like(v) for k, v in p.items()}
    nu = {k: np.zeros_like(v) for k, v in p.items()}
    losses = []
    for step in range(1, 5):
        h = np.tanh(x @ p["w1"])
        d = h @ p["w2"] - y
        losses.append(np.mean(d * d))
        dout = 2 * d / d.size
        dh = (dout @ p["w2"].T) * (1 - h * h)
        g = {"w1": x.T @ dh, "w2": h.T @ dout}
        for k in p:
            mu[k] = 0.1 * g[k] + 0.9 * mu[k]
            nu[k] = 0.001 * (g[k] * g[k]) + 0.999 * nu[k]
            u = mu[k] / (1 - 0.9 ** step) / (np.sqrt(nu[k] / (1 - 0.999 ** step)) + 1e-8)
            p[k] = p[k] - 0.05 * (u + 0.01 * p[k])
    return {"loss": losses, "p.w1": p["w1"], "p.w2": p["w2"]}


def sharded_layers():
    """samples/sharded_layers.smp, unsharded (Megatron's split and the data split change where
    the sums happen, not what they are), in float64 with the backward pass through the stack of
    layers by hand; AdamW as optax's."""
    def normal(shape, seed, scale):
        n = int(np.prod(shape))
        return (shm_rng.normal(np.float32, seed, n).reshape(shape) * np.float32(scale)).astype(np.float64)

    p = {"w1": normal((3, 8, 16), 1, 0.3), "w2": normal((3, 16, 8), 2, 0.2)}
    x, y = normal((8, 8), 3, 1.0), normal((8, 8), 4, 1.0)
    mu = {k: np.zeros_like(v) for k, v in p.items()}
    nu = {k: np.zeros_like(v) for k, v in p.items()}
    steps, losses = [], []
    for step in range(1, 5):
        xs, hs = [x], []
        for l in range(3):  # x + tanh(x @ w1) @ w2, layer by layer
            hs.append(np.tanh(xs[-1] @ p["w1"][l]))
            xs.append(xs[-1] + hs[-1] @ p["w2"][l])
        d = xs[-1] - y
        steps.append(np.int32(step))
        losses.append(np.mean(d * d))
        dx = 2 * d / d.size
        g = {"w1": np.zeros_like(p["w1"]), "w2": np.zeros_like(p["w2"])}
        for l in reversed(range(3)):
            g["w2"][l] = hs[l].T @ dx
            dpre = (dx @ p["w2"][l].T) * (1 - hs[l] * hs[l])
            g["w1"][l] = xs[l].T @ dpre
            dx = dx + dpre @ p["w1"][l].T
        for k in p:
            mu[k] = 0.1 * g[k] + 0.9 * mu[k]
            nu[k] = 0.001 * (g[k] * g[k]) + 0.999 * nu[k]
            u = mu[k] / (1 - 0.9 ** step) / (np.sqrt(nu[k] / (1 - 0.999 ** step)) + 1e-8)
            p[k] = p[k] - 0.02 * (u + 0.01 * p[k])
    return {"step": steps, "loss": losses, "w1[2, 0]": p["w1"][2, 0], "w2[0, 0]": p["w2"][0, 0]}


def megatron_mlp():
    x = iota(8).reshape(2, 4) / 8 - np.float32(0.3)
    w1 = np.sin(iota(32)).reshape(4, 8)
    w2 = np.cos(iota(32)).reshape(8, 4)
    pre = x @ w1
    h = np.maximum(pre, 0)
    out = h @ w2
    dout = 2 * out
    dh = (dout @ w2.T) * (pre > 0)
    return {"out": out, "d/dx": dh @ w1.T, "d/dw1": x.T @ dh, "d/dw2": h.T @ dout}


def collective_matmul_grad():
    a = iota(32).reshape(4, 8) / 32
    w = iota(32).reshape(8, 4) / 16 - 1
    dout = 2 * (a @ w)
    return {"d/da": dout @ w.T, "d/dw": a.T @ dout,
            "max abs difference to the all_gather version": f32(0)}


# ---- numpy twins of tests/run programs, compared exactly as printed text

def jit_layers():
    """samples/jit_layers.smp: each jit function computes what the unsharded function does;
    the gradients of the mean of y*y, y = tanh(x w1) w2, by hand."""
    x = iota(128).reshape(8, 16) * f32(0.01)
    w = iota(512).reshape(16, 32) * f32(0.001) - f32(0.2)
    w2 = iota(128).reshape(32, 4) * f32(0.01) - f32(0.6)
    h = np.tanh(x @ w)
    y = h @ w2
    dy = 2 * y / y.size
    dh = dy @ w2.T
    g1 = x.T @ (dh * (1 - h * h))
    a = iota(32).reshape(8, 4)
    w_in = iota(512).reshape(32, 16) * f32(0.002) - f32(0.5)
    return {"layer row 0": (x @ w)[0], "loss": (y * y).mean(), "grad w1 row 3": g1[3], "grad w2": h.T @ dy,
            "moved": a + a * f32(10), "constrained row 5": ((x @ w_in.T) @ w.T)[5],
            "shard means": (a * a).reshape(2, 4, 4).mean(axis=1), "relayout": a * f32(2),
            "down row 3": ((iota(256).reshape(8, 32) * f32(0.01)) @ (w_in * f32(2)))[3],
            "collective baseline row 2": (x @ w)[2], "block row 6": (np.tanh(x @ w) @ (w.T * f32(0.5)))[6],
            "moe": moe_numpy()}


def rooted_training():
    """samples/rooted_training.smp: device 0's draws (seed 0: shm_rng, bit-identical to the
    runtime) are the dataset and the first weights; 20 steps of gradient descent on the mean
    squared error; the errors of every example (device 0's report) and their sum."""
    xs = shm_rng.normal(np.float32, 0, 256).reshape(32, 8)
    w_true = shm_rng.uniform(np.float32, 100, 8) - f32(0.5)
    ys = xs @ w_true + shm_rng.normal(np.float32, 300, 32) * f32(0.1)
    w0 = shm_rng.normal(np.float32, 200, 8) * f32(0.1)
    loss = lambda w: np.mean((xs @ w - ys) ** 2)
    w = w0.astype(np.float64)
    for _ in range(20):
        w = w - 0.5 * (2.0 / 32) * xs.T.astype(np.float64) @ (xs @ w - ys)
    errors = (xs @ w - ys) ** 2
    return {"initial weights": w0, "loss before": loss(w0), "loss after": loss(w),
            "errors on device 0, first 8": errors[:8], "what the other devices hold": 0.0,
            "sum of errors on device 0": np.array([errors.sum(), 0, 0, 0])}


def moe_numpy():
    """How To Scale Your Model's Problem 2: Out[i] = W[B[i]] @ A[i], directly (no one-hot buffer)."""
    we = np.sin(iota(512)).reshape(4, 8, 16)
    ae = np.cos(iota(64)).reshape(8, 8)
    routes = (np.arange(8) * 3) % 4
    return np.stack([ae[i] @ we[routes[i]] for i in range(8)])


def int_arith_numpy():
    i32, f64 = np.int32, np.float64
    a = np.array([-7, -7, 7, 7, 0, -1, 5, -2**31], i32)
    b = np.array([2, -2, 2, -2, 3, 4, 0, -1], i32)
    x = f32([-7.5, 7.5, -7.5, 7.5, 1.0, -1.0, 0.0, -0.0])
    y = f32([2.0, 2.0, -2.0, -2.0, 0.1, 0.0, -3.0, 3.0])
    v = f32([np.nan, 2.0, -1.0])
    one = f32([1, 1, 1])
    ix = np.arange(3, dtype=i32)
    blocks = f32([np.nan, 1, 2, 3, 4, 5, 6, np.nan]).reshape(4, 2)  # device k holds row k
    return {
        "(-7) // 2": i32(-7) // i32(2), "(-7) % 4": i32(-7) % i32(4),
        "7 % (-4)": i32(7) % i32(-4), "(-1) % 4": i32(-1) % i32(4),
        "a // b": a // b, "a % b": a % b,
        "a / b": (a.astype(np.float32) / b.astype(np.float32)),  # JAX: int32 / int32 -> f32
        "i32 / i32": f32(7) / f32(2),
        "(idx - 1) % 4": (np.arange(4, dtype=i32) - 1) % i32(4),
        "x // y": x // y, "x % y": x % y, "f64 % f64": x.astype(f64) % y.astype(f64),
        "floor": np.floor(x * f32(0.5)),
        "i32 + f32": ix.astype(np.float32) + f32([0.5, 0.25, 0.125]),
        "i32 * float literal": ix.astype(np.float32) * f32(1.5),
        "f32 + f64": f32([0.1, 0.2]).astype(f64) + f32([0.1, 0.2]).astype(f64),
        "i32 < float literal": ix.astype(np.float32) < f32(1.5),
        "where(i32, f32)": np.where(ix > 0, ix.astype(np.float32), f32(0.5)),
        "maximum(v, 1)": np.maximum(v, one), "maximum(1, v)": np.maximum(one, v),
        "minimum(v, 1)": np.minimum(v, one), "minimum(1, v)": np.minimum(one, v),
        "max(v), min(v)": f32([v.max(), v.min()]),
        "maximum of i32 and f32": np.maximum(ix.astype(np.float32), f32(0.5)),
        "pmax with nan": blocks.max(0), "pmin with nan": blocks.min(0),
    }


def sum_pairwise():
    # The reference is numpy's float64 sum, rounded to f32 where shmapc prints f32: pairwise
    # f32 sums agree with it to the 6 printed digits (a left-to-right f32 sum would not).
    u = shm_rng.uniform(np.float32, 7, 1 << 22).astype(np.float64)
    x = shm_rng.uniform(np.float32, 8, 1 << 22).reshape(1 << 20, 4).astype(np.float64)
    return {
        "sum of 1e8 ones": f32(1e8), "sum of 2^22 uniforms": f32(u.sum()),
        "mean of 2^22 uniforms": f32(u.mean()), "sum over axis 0": f32(x.sum(0)),
        "mean over axis 0": f32(x.mean(0)), "sum over axis 1 of x^T": f32(x.sum(0)),
        "f64 sum of normals": np.float64(shm_rng.normal(np.float64, 9, 1000000).sum()),
    }


def grad_rem_floordiv():
    a = f32([-3.7, -3.2, 1.1, 2.9, 5.3])
    b = f32([1.5, -2.0, 0.7, -1.1, 2.5])
    zeros = np.zeros(5, np.float32)
    return {
        "check_grads a % b": np.bool_(True), "check_grads a // b": np.bool_(True),
        # a % b = a - b * floor(a / b): d/da = 1, d/db = -floor(a / b); // and floor: 0
        "d/da sum(a % b)": np.ones(5, np.float32), "d/db sum(a % b)": -np.floor(a / b),
        "d/da sum(a // b + floor(a * b))": zeros, "d/db sum(a // b + floor(a * b))": zeros,
        "f64 d/db sum(a % b)": -np.floor(a.astype(np.float64) / b.astype(np.float64)),
    }


def run_data(name):
    """np.load of a fixture of tests/run/data (tests/run/data/make_npy.py)."""
    return np.load(os.path.join(ROOT, "tests", "run", "data", name))


def npz_files():
    stored, deflated = run_data("arrays.npz"), run_data("arrays_compressed.npz")
    grid = deflated["grid"]
    return {
        "w": stored["w"], "n": stored["n"], "mask": stored["mask"],
        "compressed w": deflated["w"], "compressed n": deflated["n"], "compressed mask": deflated["mask"],
        "grid row sums": grid.sum(1, dtype=np.float32),
        "grid equal in both": np.int32(np.array_equal(grid, stored["grid"])),
    }


def npz_roundtrip():
    w1 = (np.arange(12, dtype=np.float32).reshape(3, 4) * f32(0.25) - f32(1)).astype(np.float32)
    b1 = np.arange(4, dtype=np.int32) * 3 - 5
    return {
        "w1": w1, "b1": b1, "m": np.arange(3, dtype=np.int32) > 0,
        "arr_0": w1 * f32(2), "arr_1": b1.astype(np.float64), "scale": f32(1.5),
        "overwritten w1": w1 + f32(1),
    }


def npy_sharded():
    grid = run_data("grid_8x4.npy")
    assert np.array_equal(grid, run_data("grid_8x4_fortran.npy"))
    assert np.array_equal(grid, run_data("arrays.npz")["grid"])
    assert np.array_equal(grid, run_data("arrays_compressed.npz")["grid"])
    return {
        "P(x, y)": grid, "P(x, None)": grid, "all_gather of P(x, y) blocks": grid,
        "psum of block sums": grid.sum(dtype=np.float32),
        "Fortran order, P(y, x)": grid, "npz P(None, (x, y))": grid, "compressed npz P((y, x))": grid,
    }


def fused_broadcasts():
    x = iota(12).reshape(3, 4)
    bias = f32([0.5, -1.0, 2.0, 0.25])
    col = f32([10.0, 20.0, 30.0])
    a = f32([1.0, 2.0, 3.0, 4.0])
    return {"bias": x + bias, "leading": x * col.reshape(3, 1) - f32(1.0),
            "outer": a[:, None] * a[None, :] + a[None, :],
            "relu bias": np.maximum(x * f32(0.5) - bias, f32(0.0))}


def fused_concatenate():
    a, b = iota(7) * f32(0.5), iota(5) - f32(2.0)
    r, q = iota(20).reshape(1, 20), (iota(12) * f32(-1.0)).reshape(1, 12)
    top, bottom = iota(32).reshape(2, 16), (iota(48) * f32(0.25)).reshape(3, 16)
    col = f32([1.0, -1.0, 2.0, -2.0, 0.5]).reshape(5, 1)
    c = np.concatenate([b, a])
    i = np.arange(9, dtype=np.int32)
    big = np.concatenate([np.arange(40001, dtype=np.int32) % 97, np.arange(30002, dtype=np.int32) % 89 * -2,
                          np.arange(999, dtype=np.int32)]) * np.int32(3) + np.int32(7)
    bigf = np.concatenate([iota(65537) * f32(0.5), iota(131) * f32(-0.25)]) + f32(1.0)
    devices = [iota(16)[:8], iota(16)[8:]]  # the shmap's blocks, then 3 steps of the loop
    for _ in range(3):
        ys = [devices[0][4 * d:4 * d + 4] + devices[1][4 * d:4 * d + 4] for d in range(2)]
        devices = [np.concatenate([y, y]) * f32(0.5) for y in ys]
    x, w = iota(5) + f32(1.0), iota(10) * f32(0.5) - f32(1.0)
    return {"two": np.concatenate([a, b]) * f32(3.0) + f32(1.0),
            "three": np.maximum(np.concatenate([b, a, b]), f32(0.5)) - f32(0.25),
            "mid-row": np.concatenate([r, q], axis=1) + iota(32) * f32(0.125),
            "leading and transpose": np.concatenate([top, bottom]) * col + iota(80).reshape(16, 5).T,
            "splat": np.concatenate([a, np.zeros(3, np.float32)]) * f32(2.0) + f32(0.5),
            "stored": c, "consumed": c * c - f32(1.0),
            "i32 and bool": np.concatenate([i, i * 3]) % 4 == 1,
            "big, sum": np.int32(big.sum(dtype=np.int64)), "big, across the runs": big[39998:40006],
            "big, the last run": big[70000:70006],
            "big f32, across the runs": bigf[65533:65541], "big f32, max": bigf.max(),
            "psum_scatter steps": np.concatenate(devices),
            "loss": np.sum(np.concatenate([x, x * f32(2.0)]) * w), "grad": w[:5] + f32(2.0) * w[5:]}


RUN_TWINS = {"int_arith_numpy": int_arith_numpy, "fused_broadcasts": fused_broadcasts, "sum_pairwise": sum_pairwise,
             "fused_concatenate": fused_concatenate,
             "grad_rem_floordiv": grad_rem_floordiv, "npz_files": npz_files,
             "npz_roundtrip": npz_roundtrip, "npy_sharded": npy_sharded}

PRINTED_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
                  np.dtype(np.int32): "i32", np.dtype(np.bool_): "bool"}


def printed_element(v):
    """One element in shm_print's format (docs/numerics.md): %.6g, %d, true/false."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return "%d" % v
    return "nan" if np.isnan(v) else "%.6g" % float(v)


def printed_expected(path):
    """label -> (header without the label, the elements as printed), in file order."""
    out = {}
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = HEADER.match(lines[i])
        i += 1
        if not m:
            continue
        text = m.group(5)
        if text is None:
            body = []
            while i < len(lines) and lines[i] and not HEADER.match(lines[i]):
                body.append(lines[i])
                i += 1
            text = " ".join(body)
        elements = [e for e in re.split(r"[\[\], ]+", text) if e]
        out[m.group(1)] = ("%s[%s]" % (m.group(2), m.group(3)), elements)
    return out


def check_run_twin(name):
    path = os.path.join(ROOT, "tests", "run", name + ".expected")
    got, problems = printed_expected(path), []
    with np.errstate(all="ignore"):  # division by zero and overflow are part of the tests
        twin = RUN_TWINS[name]()
    for label, ref in twin.items():
        ref = np.asarray(ref)
        want = ("%s[%s]" % (PRINTED_DTYPES[ref.dtype], ",".join(str(d) for d in ref.shape)),
                [printed_element(v) for v in ref.reshape(-1)])
        if label not in got:
            problems.append("label %r not printed" % label)
        elif got[label] != want:
            problems.append("%r\n  expected %s\n  numpy    %s" % (label, got[label], want))
    extra = set(got) - set(twin)
    if extra:
        problems.append("printed labels the numpy twin does not check: %s" % sorted(extra))
    return problems


SAMPLES = {name: fn for name, fn in globals().items()
           if callable(fn) and os.path.exists(os.path.join(ROOT, "samples", name + ".smp"))}


def check_sample(name):
    """The problems found in one sample's expected output (empty = it agrees with numpy)."""
    if name not in SAMPLES:
        return ["no numpy twin in check_samples.py"]
    path = os.path.join(ROOT, "samples", name + ".expected")
    if not os.path.exists(path):
        return ["no expected output"]
    got, want = parse_expected(path), SAMPLES[name]()
    problems = []
    for label, ref in want.items():
        value = got.get(label)
        if isinstance(ref, list):  # printed once per loop iteration
            if not isinstance(value, list) or len(value) != len(ref):
                problems.append("%r: printed %s times, numpy has %d" % (
                    label, len(value) if isinstance(value, list) else int(value is not None), len(ref)))
                continue
            value, ref = np.stack(value), np.stack(ref)
        ref = np.asarray(ref)
        if value is None:
            problems.append("label %r not printed" % label)
        elif value.shape != ref.shape or not np.allclose(
                value.astype(np.float64), ref.astype(np.float64), rtol=1e-5, atol=1e-5):
            problems.append("%r\n  expected %s\n  numpy    %s" % (label, value, ref))
    extra = set(got) - set(want)
    if extra:
        problems.append("printed labels the numpy twin does not check: %s" % sorted(extra))
    return problems


def main():
    names = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROOT, "samples"))
                   if f.endswith(".smp"))
    failed = 0
    for name in names:
        problems = check_sample(name)
        for p in problems:
            print("FAIL %s: %s" % (name, p))
        if problems:
            failed += 1
        else:
            print("ok   %s" % name)
    for name in sorted(RUN_TWINS):
        problems = check_run_twin(name)
        for p in problems:
            print("FAIL tests/run/%s: %s" % (name, p))
        failed += bool(problems)
        if not problems:
            print("ok   tests/run/%s" % name)
    names += sorted(RUN_TWINS)
    print("%d passed, %d failed" % (len(names) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
