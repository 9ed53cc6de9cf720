#!/usr/bin/python3
"""The sharded-model memory benchmark: a Transformer of 8 stacked layers (a record of [8, ...]
leaves scanned layer by layer), tensor-parallel over a mesh of 4 devices, trained with the
stdlib's AdamW on trees under `mpirun -np 4` (one device per rank). Parameters and optimizer
state stay on the devices between steps, so each rank should hold a quarter of them.

Two figures, for the large model (parameters and AdamW's two moments: every rank held all of
it before the blocks form):
- held: the most bytes a rank's host held at once as blocks (SHMAP_LOG_RANKS=1 reports it:
  the parameters, the moments and, during a step, the gradient), against a quarter of the
  parameters, moments and gradient: 1.0 when a rank holds exactly its quarter (target <= 1.1).
- peak: each rank's peak resident memory (getrusage of the rank's program, through a wrapper)
  for a small model, whose memory is the fixed overhead (the executable, its libraries, MPI),
  and the large one; the growth of a rank's peak against the growth of a quarter of the model:
  1.0 for the parameters and moments, 1/3 for the gradient, and the backward pass's
  temporaries of one layer and the allocator's cache (target <= 1.6).
The runs also check that the loop moves no parameter bytes (SHMAP_LOG_RANKS=1: every shmap of
a step receives 0 bytes) and that the losses equal one process of 4 threads'.

The initial parameters come from a file each rank reads only its blocks of (a checkpoint, as
a run resumed from one): a program this script writes and runs once per width makes it.

    python3 bench/sharded_model/run.py --shmapc build/compiler/shmapc [--quick] [--json PATH]

--quick: widths 64 and 384 (the full run: 64 and 768), 2 steps."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import compile_flags, Record, parse, parser  # noqa: E402

LAYERS, VOCAB, BATCH, TOKENS, RANKS = 8, 64, 4, 16, 4

SHAPES = "{emb: f32[V, D], layers: {g: f32[L, D], b: f32[L, D], wq: f32[L, D, D], wv: f32[L, D, D], " \
         "wo: f32[L, D, D], w1: f32[L, D, F], w2: f32[L, F, D]}}"

INIT = """arg out: str = "init.npz";
def main() {{
  let p = {{emb: random_normal(f32[{V}, {D}], seed=1) * 0.02,
           layers: {{g: ones(f32[{L}, {D}]), b: zeros(f32[{L}, {D}]),
                     wq: random_normal(f32[{L}, {D}, {D}], seed=2) * {s},
                     wv: random_normal(f32[{L}, {D}, {D}], seed=3) * {s},
                     wo: random_normal(f32[{L}, {D}, {D}], seed=4) * {s},
                     w1: random_normal(f32[{L}, {D}, {F}], seed=5) * {s},
                     w2: random_normal(f32[{L}, {F}, {D}], seed=6) * {s2}}}}};
  savez(out, params=p);
}}
"""

TRAIN = """import nn;
import optim;
arg steps: i32 = 2;
arg init_file: str = "init.npz";
mesh m = <["model"=4]>;

# One layer: attention-like mixing with heads split over "model" (Megatron: the input
# projections by columns, the output one by rows, a psum after each half), then the MLP.
def block(x, w) {{
  let h = reshape(nn.layer_norm(x, w.g, w.b, 1e-5), [{BT}, {D}]);
  let a = tanh(h @ w.wq) * (h @ w.wv);
  x = x + reshape(psum(a @ w.wo, "model"), [{B}, {T}, {D}]);
  let u = nn.gelu(reshape(x, [{BT}, {D}]) @ w.w1);
  return x + reshape(psum(u @ w.w2, "model"), [{B}, {T}, {D}]), 0.0;
}}

@shmap(mesh=m, in_specs=(P(), {{emb: P(), layers: {{g: P(), b: P(), wq: P(None, None, "model"),
         wv: P(None, None, "model"), wo: P(None, "model", None), w1: P(None, None, "model"),
         w2: P(None, "model", None)}}}}), out_specs=P())
def loss(tokens, p) {{
  let x = nn.embedding(p.emb, tokens[:, 0:{T}]);
  let y, unused = scan(block, x, p.layers);
  let logits = reshape(y, [{BT}, {D}]) @ transpose(p.emb);
  return nn.cross_entropy(logits, reshape(tokens[:, 1:{T1}], [{BT}]));
}}

def main() {{
  let tokens = cast(random_uniform(f32[{B}, {T1}], seed=9) * {V}.0, i32);
  let like = {{emb: zeros(f32[{V}, {D}]), layers: {{g: zeros(f32[{L}, {D}]), b: zeros(f32[{L}, {D}]),
              wq: zeros(f32[{L}, {D}, {D}]), wv: zeros(f32[{L}, {D}, {D}]), wo: zeros(f32[{L}, {D}, {D}]),
              w1: zeros(f32[{L}, {D}, {F}]), w2: zeros(f32[{L}, {F}, {D}])}}}};
  let p = load(init_file, like, key="params");
  let s = optim.adamw_init(p);
  while s.count < steps {{
    let l, g = value_and_grad(loss, argnums=1)(tokens, p);
    print("loss", l);
    p, s = optim.adamw(p, g, s, 0.001, 0.9, 0.999, 1e-8, 0.01);
  }}
}}
"""

# Runs the program as a child and prints its peak RSS (each rank through its own wrapper).
WRAPPER = ("import os, resource, subprocess, sys\n"
           "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
           "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr)\n"
           "print('peak_rss_kb rank %s %d' % (os.environ.get('OMPI_COMM_WORLD_RANK', '?'),\n"
           "      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), flush=True)\n"
           "sys.exit(r.returncode)\n")


def model_bytes(d):
    f = 4 * d
    params = VOCAB * d + 2 * LAYERS * d + LAYERS * (3 * d * d + 2 * d * f)
    return 3 * params * 4  # parameters and AdamW's two moments, f32


def build(a, tmp, d, steps):
    sizes = dict(V=VOCAB, D=d, F=4 * d, L=LAYERS, B=BATCH, T=TOKENS, T1=TOKENS + 1, BT=BATCH * TOKENS,
                 s=round(0.5 / d ** 0.5, 6), s2=round(0.5 / (4 * d) ** 0.5, 6))
    init_src, train_src = os.path.join(tmp, "init%d.smp" % d), os.path.join(tmp, "train%d.smp" % d)
    with open(init_src, "w") as f:
        f.write(INIT.format(**sizes))
    with open(train_src, "w") as f:
        f.write(TRAIN.format(**sizes))
    init = os.path.join(tmp, "init%d.npz" % d)
    subprocess.run([a.shmapc, "run", init_src, "--", "--out=" + init], check=True, stdout=subprocess.DEVNULL)
    exe = os.path.join(tmp, "train%d" % d)
    subprocess.run([a.shmapc, "compile", "--mpi", train_src, "-o", exe] + compile_flags(), check=True)
    threads = subprocess.run([a.shmapc, "run", train_src, "--", "--init_file=" + init, "--steps=%d" % steps],
                             check=True, capture_output=True, text=True).stdout
    return exe, init, threads


def run_ranks(exe, init, steps, wrapper):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS), sys.executable, wrapper, exe,
           "--init_file=" + init, "--steps=%d" % steps]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, SHMAP_LOG_RANKS="1"))
    peaks = [int(x) / 1024.0 for x in re.findall(r"peak_rss_kb rank \d+ (\d+)", out.stdout)]
    received = [int(x) for x in re.findall(r"\((\d+) bytes received\)", out.stderr)]
    held = [int(x) for x in re.findall(r"kept as blocks: at most (\d+) bytes", out.stderr)]
    losses = [line for line in out.stdout.splitlines() if line.startswith("loss")]
    return peaks, received, losses, max(held) if held else 0


def main():
    ap = parser(__doc__)
    ap.add_argument("--widths", default="64,768", help="the small and the large model's width")
    ap.add_argument("--steps", type=int, default=3)
    a = parse(ap, quick_repeats=1, widths="64,384", steps=2)
    if not shutil.which("mpirun"):
        print("mpirun not found: skipped")
        return 0
    small, large = (int(w) for w in a.widths.split(","))
    rec = Record("sharded_model", a, layers=LAYERS, ranks=RANKS, widths=a.widths, steps=a.steps)
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = os.path.join(tmp, "rss.py")
        with open(wrapper, "w") as f:
            f.write(WRAPPER)
        peak, held, same, moved = {}, {}, True, 0
        for d in (small, large):
            exe, init, threads = build(a, tmp, d, a.steps)
            best = None
            for _ in range(a.repeats):
                peaks, received, losses, held[d] = run_ranks(exe, init, a.steps, wrapper)
                best = max(peaks) if best is None else min(best, max(peaks))
                moved += sum(received)
            peak[d] = best
            threads_losses = [line for line in threads.splitlines() if line.startswith("loss")]
            same = same and losses == threads_losses
            print("width %4d: model %8.1f MB (parameters + AdamW moments), peak RSS per rank %7.1f MB; losses %s"
                  % (d, model_bytes(d) / 1e6, best, ", ".join(x.split("= ")[-1] for x in losses)))
        grown = (model_bytes(large) - model_bytes(small)) / 2 ** 20  # MiB, as the peaks
        share = (peak[large] - peak[small]) / (grown / RANKS)
        with_gradient = model_bytes(large) * 4 / 3  # (the gradient: as many bytes as the parameters)
        held_share = held[large] / (with_gradient / RANKS)
        print("whole model (what every rank held before): %.1f MB; a quarter of it: %.1f MB"
              % (model_bytes(large) / 1e6, model_bytes(large) / 4e6))
        print("held as blocks per rank: %.1f MB, %.2fx a quarter of parameters, moments and gradient (target <= 1.1x)"
              % (held[large] / 1e6, held_share))
        print("per-rank peak RSS growth: %.2fx the growth of a quarter of the model (target <= 1.6x: 1 parameters "
              "and moments, 1/3 gradient, a layer's temporaries)" % share)
        print("bytes received by shmaps during the runs: %d; losses under mpirun equal one process's: %s"
              % (moved, "yes" if same else "NO"))
        rec.row("peak RSS per rank, width %d (fixed overhead)" % small, peak[small], "MB")
        rec.row("peak RSS per rank, width %d" % large, peak[large], "MB")
        rec.row("whole model, width %d (parameters + AdamW moments)" % large, model_bytes(large) / 2 ** 20, "MB")
        rec.target("bytes held as blocks per rank / (parameters, moments and gradient / 4)", held_share, "<=", 1.1)
        rec.target("per-rank peak memory growth / (model growth / 4)", share, "<=", 1.6)
        rec.target("bytes received by shmaps in the training loop", moved, "<=", 0, unit="bytes")
        rec.target("losses under mpirun -np 4 differ from one process's", 0 if same else 1, "<=", 0, unit="runs")
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
