#!/usr/bin/python3
"""Issue 11's Transformer benchmark: one training step (value_and_grad and SGD) of the
Transformer block of samples/transformer.smp (layer norm, causal attention, GELU MLP, tied
embedding logits, cross-entropy) at benchmark size: 16 sequences of 64 tokens, width 256, MLP
width 1024, vocabulary 512. shmapc on meshes data x model of 1x1 (pinned to one core), 2x1
(data parallel), 1x2 (Megatron: one head and half the MLP per device) and 2x2 (both), each
"model" device holding one attention head of width 256 / model; against JAX jit of the same
block with one head on one core (the 1x1 math). Prints ms per step and ratios; the quietest of
--repeats runs counts.

    python3 bench/transformer/run.py --shmapc build/compiler/shmapc [--repeats 3] [--quick] [--json PATH]

--quick: the same model and step counts, one repeat."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import PIN, Record, parse, parser, peer_output, seconds_per_step, venv_python  # noqa: E402

B, T, D, F, V = 16, 64, 256, 1024, 512

PROGRAM = """import nn;
arg steps: i32 = 1;
mesh m = <["data"={dp}, "model"={mp}]>;

@shmap(mesh=m,
       in_specs=(P("data", None), P(), P(), P(), P(), P(None, "model"), P(None, "model"),
                 P(None, "model"), P("model", None), P(), P(), P(None, "model"), P("model"),
                 P("model", None), P()),
       out_specs=P())
def loss(tokens: i32[{b}, {T1}], emb: f32[{V}, {D}], pos: f32[{T}, {D}], ln1_g: f32[{D}], ln1_b: f32[{D}],
         wq: f32[{D}, {Dm}], wk: f32[{D}, {Dm}], wv: f32[{D}, {Dm}], wo: f32[{Dm}, {D}], ln2_g: f32[{D}],
         ln2_b: f32[{D}], w1: f32[{D}, {Fm}], b1: f32[{Fm}], w2: f32[{Fm}, {D}], b2: f32[{D}]) -> f32[] {{
  let ids = tokens[:, 0:{T}];
  let targets = reshape(tokens[:, 1:{T1}], [{bT}]);
  let x = nn.embedding(emb, ids) + pos;
  let h = reshape(nn.layer_norm(x, ln1_g, ln1_b, 1e-5), [{bT}, {D}]);
  let q = reshape(h @ wq, [{b}, {T}, {Dm}]);
  let k = reshape(h @ wk, [{b}, {T}, {Dm}]);
  let v = reshape(h @ wv, [{b}, {T}, {Dm}]);
  let scores = (q @ transpose(k, [0, 2, 1])) / sqrt({Dm}.0);
  let causal = iota(i32[{T}, {T}], dim=0) >= iota(i32[{T}, {T}], dim=1);
  let attn = nn.softmax(where(causal, scores, -1e9)) @ v;
  x = x + reshape(psum(reshape(attn, [{bT}, {Dm}]) @ wo, "model"), [{b}, {T}, {D}]);
  let h2 = reshape(nn.layer_norm(x, ln2_g, ln2_b, 1e-5), [{bT}, {D}]);
  let u = nn.gelu(h2 @ w1 + b1);
  x = x + reshape(psum(u @ w2, "model") + b2, [{b}, {T}, {D}]);
  let logits = reshape(x, [{bT}, {D}]) @ transpose(emb);
  return pmean(nn.cross_entropy(logits, targets), "data");
}}

def main() {{
  let tokens = cast(random_uniform(f32[{B}, {T1}], seed=9) * {V}.0, i32);
  let emb = random_normal(f32[{V}, {D}], seed=1) * 0.05;
  let pos = random_normal(f32[{T}, {D}], seed=2) * 0.05;
  let ln1_g = ones(f32[{D}]); let ln1_b = zeros(f32[{D}]);
  let wq = random_normal(f32[{D}, {D}], seed=3) * 0.05;
  let wk = random_normal(f32[{D}, {D}], seed=4) * 0.05;
  let wv = random_normal(f32[{D}, {D}], seed=5) * 0.05;
  let wo = random_normal(f32[{D}, {D}], seed=6) * 0.05;
  let ln2_g = ones(f32[{D}]); let ln2_b = zeros(f32[{D}]);
  let w1 = random_normal(f32[{D}, {F}], seed=7) * 0.05; let b1 = zeros(f32[{F}]);
  let w2 = random_normal(f32[{F}, {D}], seed=8) * 0.05; let b2 = zeros(f32[{D}]);
  let last = 0.0;
  let step = 0;
  while step < steps {{
    let l, g_emb, g_pos, g_ln1_g, g_ln1_b, g_wq, g_wk, g_wv, g_wo, g_ln2_g, g_ln2_b, g_w1, g_b1, g_w2, g_b2 =
        value_and_grad(loss, argnums=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14))(
            tokens, emb, pos, ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, b1, w2, b2);
    emb = emb - 0.01 * g_emb; pos = pos - 0.01 * g_pos;
    ln1_g = ln1_g - 0.01 * g_ln1_g; ln1_b = ln1_b - 0.01 * g_ln1_b;
    wq = wq - 0.01 * g_wq; wk = wk - 0.01 * g_wk; wv = wv - 0.01 * g_wv; wo = wo - 0.01 * g_wo;
    ln2_g = ln2_g - 0.01 * g_ln2_g; ln2_b = ln2_b - 0.01 * g_ln2_b;
    w1 = w1 - 0.01 * g_w1; b1 = b1 - 0.01 * g_b1; w2 = w2 - 0.01 * g_w2; b2 = b2 - 0.01 * g_b2;
    last = l;
    step = step + 1;
  }}
  print("loss", last);
}}
"""

JAX = r'''
import os, sys, time
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
import jax, jax.numpy as jnp, numpy as np
B, T, D, F, V = %d, %d, %d, %d, %d
def layer_norm(x, g, b):
    d = x - jnp.mean(x, -1, keepdims=True)
    return d / jnp.sqrt(jnp.mean(d * d, -1, keepdims=True) + 1e-5) * g + b
def gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
def loss(p, tokens):
    emb, pos, g1, b1_, wq, wk, wv, wo, g2, b2_, w1, b1, w2, b2 = p
    ids, targets = tokens[:, :T], tokens[:, 1:].reshape(-1)
    x = emb[ids] + pos
    h = layer_norm(x, g1, b1_).reshape(B * T, D)
    q, k, v = [(h @ w).reshape(B, T, D) for w in (wq, wk, wv)]
    s = q @ jnp.transpose(k, (0, 2, 1)) / jnp.sqrt(jnp.float32(D))
    a = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9), -1) @ v
    x = x + (a.reshape(B * T, D) @ wo).reshape(B, T, D)
    u = gelu(layer_norm(x, g2, b2_).reshape(B * T, D) @ w1 + b1)
    x = x + (u @ w2 + b2).reshape(B, T, D)
    logits = x.reshape(B * T, D) @ emb.T
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], 1))
r = np.random.default_rng(0)
n = lambda *s: jnp.asarray(r.standard_normal(s, np.float32) * 0.05)
p = [n(V, D), n(T, D), jnp.ones(D), jnp.zeros(D), n(D, D), n(D, D), n(D, D), n(D, D), jnp.ones(D),
     jnp.zeros(D), n(D, F), jnp.zeros(F), n(F, D), jnp.zeros(D)]
tokens = jnp.asarray(r.integers(0, V, (B, T + 1)), jnp.int32)
@jax.jit
def step(p, tokens):
    l, g = jax.value_and_grad(loss)(p, tokens)
    return [w - 0.01 * gw for w, gw in zip(p, g)], l
p, l = step(p, tokens); jax.block_until_ready(p)
ts = []
for _ in range(10):
    t0 = time.perf_counter(); p, l = step(p, tokens); jax.block_until_ready(p); ts.append(time.perf_counter() - t0)
print("%%.4f" %% (np.mean(ts) * 1e3))
''' % (B, T, D, F, V)


def shmapc_step_ms(shmapc, tmp, dp, mp, repeats, pin):
    src = os.path.join(tmp, "t%dx%d.smp" % (dp, mp))
    with open(src, "w") as f:
        f.write(PROGRAM.format(dp=dp, mp=mp, B=B, b=B // dp, T=T, T1=T + 1, bT=B // dp * T, D=D, Dm=D // mp,
                               F=F, Fm=F // mp, V=V))
    exe = src[:-4]
    subprocess.run([shmapc, "compile", src, "-o", exe], check=True)
    return seconds_per_step(exe, pin, repeats, 1, 6) * 1e3


def main():
    a = parse(parser(__doc__), quick_repeats=1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dp, mp in ((1, 1), (2, 1), (1, 2), (2, 2)):
            rows.append(("shmapc, mesh %dx%d%s" % (dp, mp, " (one core)" if dp * mp == 1 else ""),
                         shmapc_step_ms(a.shmapc, tmp, dp, mp, a.repeats, PIN if dp * mp == 1 else [])))
        py = venv_python()
        script = os.path.join(tmp, "jax_transformer.py")
        with open(script, "w") as f:
            f.write(JAX)
        ms = peer_output(PIN + [py, script], a.repeats) if py else None
        rows.append(("JAX jit (one core)" + ("" if ms else " (not installed: bench/setup.sh)"), ms))
    print("Transformer block training step (16 x 64 tokens, width %d, MLP %d, vocabulary %d)" % (D, F, V))
    base = rows[0][1]
    print("%-40s %10s %14s" % ("", "ms/step", "x shmapc 1x1"))
    for name, ms in rows:
        print("%-40s %10s %14s" % (name, "%.3f" % ms if ms else "-", "%.2f" % (ms / base) if ms else "-"))
    rec = Record("transformer", a, sequences=B, tokens=T, width=D, mlp=F, vocabulary=V)
    for name, ms in rows:
        rec.row(name, ms, "ms/step", peers={"shmapc 1x1": ms / base} if ms and name != rows[0][0] else None)
    rec.write()


if __name__ == "__main__":
    sys.exit(main())
