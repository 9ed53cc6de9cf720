"""Writes tokens.npy for samples/transformer.smp: 8 sequences of 9 token ids (int32, vocab
16). Each sequence follows one rule, t[k+1] = (5 t[k] + 3) mod 16, from a random start, so a
model that learns the rule predicts every next token; the first 8 ids of a row are the input
and the last 8 the targets. Run: python3 samples/data/make_tokens.py (numpy only; the output
is committed, and this script regenerates it byte for byte)."""
import os
import numpy as np

VOCAB, ROWS, LENGTH = 16, 8, 9


def tokens():
    start = np.random.default_rng(2026).integers(0, VOCAB, size=ROWS)
    out = np.empty((ROWS, LENGTH), np.int32)
    out[:, 0] = start
    for k in range(1, LENGTH):
        out[:, k] = (5 * out[:, k - 1] + 3) % VOCAB
    return out


if __name__ == "__main__":
    np.save(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokens.npy"), tokens())
