#!/usr/bin/python3
"""The pipelined Transformer against data and tensor parallelism on the same devices: one
training step (value_and_grad and SGD) of a two-block Transformer (layer norm, causal attention,
GELU MLP, tied embedding logits, cross-entropy; 16 sequences of 32 tokens, width 128, MLP 512,
vocabulary 256, 4 heads) on 4 devices, three ways:

  data parallel     mesh data=4: each device 4 sequences, every weight whole
  tensor parallel   mesh model=4: Megatron, a head and a quarter of the MLP per device
  pipelined         mesh stage=2 x data=2: a block per stage (the embedding with the first,
                    the logits with the second), data-parallel inside each stage, 1F1B over 4
                    micro-batches

The three compute the same function (the same model, one program text each). Prints ms per
step and each against data parallelism; rows only (no target: which way wins depends on the
model's shape and the machine's cores; the point is to see it on the same devices). On a
machine with fewer cores than devices the device threads share the cores, alike for all three.

    python3 bench/pipeline_transformer/run.py --shmapc build/compiler/shmapc [--repeats 3] [--quick] [--json PATH]

--quick: one repeat."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import compile_flags, Record, parse, parser, per_step_interleaved  # noqa: E402

B, T, D, F, V, HEADS = 16, 32, 128, 512, 256, 4

PROGRAM = """import nn;
arg steps: i32 = 1;
mesh m = <[{axes}]>;

@shmap(mesh=m, in_specs=(P("data", None), P(), P()), out_specs=P("data", None, None))
def embed(tokens, emb, pos) {{ return nn.embedding(emb, tokens[:, 0:{T}]) + pos; }}

@shmap(mesh=m, in_specs=(P("data", None, None),
         {{ln1: P(), wq: P(None, "model"), wk: P(None, "model"), wv: P(None, "model"), wo: P("model", None),
          ln2: P(), w1: P(None, "model"), b1: P("model"), w2: P("model", None), b2: P()}}),
       out_specs=P("data", None, None))
def block(x, w) {{
  let b = x.shape[0];
  let h = reshape(nn.layer_norm(x, w.ln1.g, w.ln1.b, 1e-5), [b * {T}, {D}]);
  let q = transpose(reshape(h @ w.wq, [b, {T}, {Hm}, {Dh}]), [0, 2, 1, 3]);
  let k = transpose(reshape(h @ w.wk, [b, {T}, {Hm}, {Dh}]), [0, 2, 1, 3]);
  let v = transpose(reshape(h @ w.wv, [b, {T}, {Hm}, {Dh}]), [0, 2, 1, 3]);
  let causal = iota(i32[{T}, {T}], dim=0) >= iota(i32[{T}, {T}], dim=1);
  let s = (q @ transpose(k, [0, 1, 3, 2])) / sqrt({Dh}.0);
  let a = transpose(nn.softmax(where(causal, s, -1e9)) @ v, [0, 2, 1, 3]);
  let y = x + reshape(psum(reshape(a, [b * {T}, {Dm}]) @ w.wo, "model"), [b, {T}, {D}]);
  let u = nn.gelu(reshape(nn.layer_norm(y, w.ln2.g, w.ln2.b, 1e-5), [b * {T}, {D}]) @ w.w1 + w.b1);
  return y + reshape(psum(u @ w.w2, "model") + w.b2, [b, {T}, {D}]);
}}

@shmap(mesh=m, in_specs=(P("data", None, None), P("data", None), P()), out_specs=P())
def head(x, tokens, emb) {{
  let b = x.shape[0];
  let logits = reshape(x, [b * {T}, {D}]) @ transpose(emb);
  return pmean(nn.cross_entropy(logits, reshape(tokens[:, 1:{T1}], [b * {T}])), "data");
}}

def loss(p, tokens) {{
  let x = block(embed(tokens, p.emb, p.pos), p.b0);
  stage_boundary();
  return head(block(x, p.b1), tokens, p.emb);
}}

def sgd(w, g) {{ return w - 0.01 * g; }}

{decorator}
def train_step(p, tokens) {{
  let l, g = value_and_grad(loss)(p, tokens);
  return l, tree_map(sgd, p, g);
}}

def layer(seed) {{
  let norm = {{g: ones(f32[{D}]), b: zeros(f32[{D}])}};
  return {{ln1: norm, ln2: norm,
          wq: random_normal(f32[{D}, {D}], seed=seed) * 0.05, wk: random_normal(f32[{D}, {D}], seed=seed + 1) * 0.05,
          wv: random_normal(f32[{D}, {D}], seed=seed + 2) * 0.05, wo: random_normal(f32[{D}, {D}], seed=seed + 3) * 0.05,
          w1: random_normal(f32[{D}, {F}], seed=seed + 4) * 0.05, b1: zeros(f32[{F}]),
          w2: random_normal(f32[{F}, {D}], seed=seed + 5) * 0.05, b2: zeros(f32[{D}])}};
}}

def main() {{
  let tokens = cast(random_uniform(f32[{B}, {T1}], seed=9) * {V}.0, i32);
  let p = {{emb: random_normal(f32[{V}, {D}], seed=1) * 0.05, pos: random_normal(f32[{T}, {D}], seed=2) * 0.05,
           b0: layer(10), b1: layer(20)}};
  let last = 0.0;
  let step = 0;
  while step < steps {{
    let l, q = train_step(p, tokens);
    p = q;
    last = l;
    step = step + 1;
  }}
  print("loss", last);
}}
"""

WAYS = [  # (name, mesh axes, model axis size, the train step's decorator)
    ("data parallel (data=4)", '"data"=4, "model"=1', 1, ""),
    ("tensor parallel (model=4)", '"data"=1, "model"=4', 4, ""),
    ("pipelined (stage=2 x data=2, 1F1B, 4 micro-batches)", '"stage"=2, "data"=2, "model"=1', 1,
     '@pipeline(mesh=m, axis="stage", microbatches=4, schedule="1f1b", batch=(tokens))'),
]


def main():
    a = parse(parser(__doc__), quick_repeats=1)
    rec = Record("pipeline_transformer", a, sequences=B, tokens=T, width=D, mlp=F, vocabulary=V, heads=HEADS,
                 devices=4)
    exes, losses = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, axes, mp, decorator) in enumerate(WAYS):
            src = os.path.join(tmp, "way%d.smp" % i)
            with open(src, "w") as f:
                f.write(PROGRAM.format(axes=axes, decorator=decorator, B=B, T=T, T1=T + 1, D=D, Dm=D // mp, F=F,
                                       V=V, Hm=HEADS // mp, Dh=D // HEADS))
            exe = src[:-4]
            subprocess.run([a.shmapc, "compile", src, "-o", exe] + compile_flags(), check=True)
            out = subprocess.run([exe, "--steps=3"], check=True, capture_output=True, text=True).stdout
            losses.append(float(out.split("=")[-1]))
            exes.append(exe)
        # (the same function three ways: the same loss after 3 steps, up to the sums' order)
        if max(losses) - min(losses) > 1e-3 * abs(losses[0]):
            print("the three ways disagree on the loss after 3 steps: %s" % losses)
            return 1
        ms = [s * 1e3 for s in per_step_interleaved([lambda k, e=e: [e, "--steps=%d" % k] for e in exes],
                                                    a.repeats, 1, 4)]
    print("Two-block Transformer training step on 4 devices (%d x %d tokens, width %d, MLP %d, vocabulary %d, "
          "%d heads; %d cores)" % (B, T, D, F, V, HEADS, os.cpu_count() or 1))
    print("%-55s %10s %18s" % ("", "ms/step", "x data parallel"))
    for (name, _, _, _), t in zip(WAYS, ms):
        print("%-55s %10.3f %18.2f" % (name, t, t / ms[0]))
        rec.row(name, t, "ms/step", peers={"data parallel": t / ms[0]} if t is not ms[0] else None)
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
