#!/usr/bin/env python3
"""Editor support: the Pygments lexer (editors/pygments/shmap_lexer.py) and the
TextMate grammar (editors/vscode/syntaxes/shmap.tmLanguage.json, run by a TextMate engine:
textmate-grammar-python on Oniguruma) read every program of samples/, tests/ and stdlib/ as
the compiler's lexer does:

- a program the compiler's lexer accepts (`shmapc compile --emit=tokens`) gets no Error token
  from Pygments and no invalid.illegal scope from the grammar, and the grammar gives every
  character but whitespace a scope of its own;
- a program it rejects for a character it does not know ([unexpected-char]) or a string left
  open ([unterminated-string]) gets one of each (a number too large, [bad-number], is a matter
  of value, not of shape: no highlighter sees it).

    PY=$(tests/editors/venv.sh); $PY tests/editors/check_editors.py --shmapc build/compiler/shmapc"""
import argparse
import glob
import json
import logging
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "editors", "pygments"))
from pygments.token import Error  # noqa: E402
from shmap_lexer import ShmapLexer  # noqa: E402

GRAMMAR = os.path.join(ROOT, "editors", "vscode", "syntaxes", "shmap.tmLanguage.json")
LEXICAL = ("[unexpected-char]", "[unterminated-string]")


def programs():
    found = glob.glob(os.path.join(ROOT, "samples", "*.smp")) + glob.glob(os.path.join(ROOT, "stdlib", "*.smp"))
    found += glob.glob(os.path.join(ROOT, "tests", "**", "*.smp"), recursive=True)
    return sorted(p for p in found if os.path.isfile(p) and os.sep + "Output" + os.sep not in p)


def compiler_verdict(shmapc, path):
    """'ok', 'lexical' (rejected by the lexer for a character or an open string), or 'other'."""
    p = subprocess.run([shmapc, "compile", path, "--emit=tokens"], capture_output=True, text=True, errors="replace")
    if p.returncode == 0:
        return "ok"
    return "lexical" if any(d in p.stderr for d in LEXICAL) else "other"


def pygments_errors(text):
    return [v for t, v in ShmapLexer().get_tokens(text) if t in Error]


def textmate_problems(parser, text):
    """(illegal pieces, characters with no scope of the grammar's own)."""
    illegal, bare = [], []
    if not text:  # (an empty program: nothing to scope, and the engine fails on it)
        return illegal, bare
    element = parser.parse_string(text)
    for (line, col), piece, scopes in element.flatten() if element else []:
        if any(s.startswith("invalid.illegal") for s in scopes):
            illegal.append((line, col, piece))
        elif scopes == ["source.smp"] and piece.strip() and not re.fullmatch(r"\s+", piece):
            bare.append((line, col, piece))
    return illegal, bare


# What each highlighter must call the pieces of one program (by the grammar's intent, written
# by hand): the first scope / token type of each listed piece, in order of appearance.
SNIPPET = 'mesh m = <["x"=4]>;\n@shmap(mesh=m, in_specs=P("x"), out_specs=P())\n' \
          'def f(a: f32[4]) -> f32[] { return psum(sum(a) * 2.5e-3, "x"); }  # a "comment"\n'
EXPECTED = [  # (piece, TextMate scope, Pygments token type)
    ("mesh", "storage.type.mesh.smp", "Token.Keyword.Declaration"),
    ("m", "entity.name.namespace.mesh.smp", "Token.Name.Namespace"),
    ('"', "punctuation.definition.string.begin.smp", "Token.Literal.String.Double"),
    ("4", "constant.numeric.integer.smp", "Token.Literal.Number.Integer"),
    ("shmap", "entity.name.function.decorator.smp", "Token.Name.Decorator"),
    ("P", "support.function.builtin.smp", "Token.Name.Builtin"),
    ("def", "storage.type.function.smp", "Token.Keyword.Declaration"),
    ("f", "entity.name.function.smp", "Token.Name.Function"),
    ("f32", "storage.type.dtype.smp", "Token.Keyword.Type"),
    ("->", "keyword.operator.smp", "Token.Operator"),
    ("return", "keyword.control.smp", "Token.Keyword"),
    ("psum", "support.function.collective.smp", "Token.Name.Builtin"),
    ("sum", "support.function.builtin.smp", "Token.Name.Builtin"),
    ("2.5e-3", "constant.numeric.float.smp", "Token.Literal.Number.Float"),
    ('# a "comment"', "comment.line.number-sign.smp", "Token.Comment.Single"),
]


def snippet_problems(parser):
    """Where either highlighter names a piece of SNIPPET otherwise than EXPECTED says."""
    tm = [(piece, scopes[-1]) for _, piece, scopes in parser.parse_string(SNIPPET).flatten()]
    pg = [(v, str(t)) for t, v in ShmapLexer().get_tokens(SNIPPET)]
    problems = []
    for which, got, column in (("TextMate", tm, 1), ("Pygments", pg, 2)):
        at = 0
        for want in EXPECTED:
            while at < len(got) and got[at][0] != want[0]:
                at += 1
            if at == len(got) or got[at][1] != want[column]:
                problems.append("%s: %r is %s, not %s" % (which, want[0], got[at][1] if at < len(got) else "missing",
                                                          want[column]))
                break
            at += 1
    return problems


def builtin_problems(parser):
    """The compiler's builtins (the table of compiler/sema/Builtins.cpp) that either highlighter
    does not show as a builtin: a builtin added to the language is added to the editors too."""
    table = open(os.path.join(ROOT, "compiler", "sema", "Builtins.cpp")).read()
    names = sorted(set(re.findall(r'\{"(\w+)", &Sema::b\w+\}', table)))
    problems = [] if names else ["no builtins found in compiler/sema/Builtins.cpp's table"]
    for name in names:
        text = "let y = %s(x);\n" % name
        tm = [(piece, scopes[-1]) for _, piece, scopes in parser.parse_string(text).flatten()]
        pg = [(v, str(t)) for t, v in ShmapLexer().get_tokens(text)]
        if not ((name, "support.function.builtin.smp") in tm or (name, "support.function.collective.smp") in tm):
            problems.append("TextMate: builtin %s is not support.function.builtin.smp (nor .collective.smp)" % name)
        if (name, "Token.Name.Builtin") not in pg:
            problems.append("Pygments: builtin %s is not Token.Name.Builtin" % name)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shmapc", required=True)
    ap.add_argument("programs", nargs="*")
    a = ap.parse_args()
    logging.disable(logging.WARNING)  # (the engine logs every character a region does not match)
    from textmate_grammar.parsers.base import LanguageParser
    parser = LanguageParser(json.load(open(GRAMMAR)))
    failed, counts = 0, {"ok": 0, "lexical": 0, "other": 0}
    for p in snippet_problems(parser):
        print("FAIL the highlighted snippet: %s" % p)
        failed += 1
    for p in builtin_problems(parser):
        print("FAIL %s" % p)
        failed += 1
    for path in a.programs or programs():
        name = os.path.relpath(path, ROOT)
        verdict = compiler_verdict(a.shmapc, path)
        counts[verdict] += 1
        if verdict == "other":  # (a [bad-number] or a file that is not one)
            continue
        # (utf-8-sig: a byte-order mark is no character of the program, and editors drop it
        # when they read the file, as the compiler does)
        text = open(path, encoding="utf-8-sig", errors="replace").read()
        errors = pygments_errors(text)
        illegal, bare = textmate_problems(parser, text)
        problems = []
        if verdict == "ok":
            if errors:
                problems.append("Pygments: Error tokens %r" % errors[:3])
            if illegal:
                problems.append("TextMate: invalid.illegal at %r" % illegal[:3])
            if bare:
                problems.append("TextMate: no scope for %r" % bare[:3])
        else:
            if not errors:
                problems.append("the compiler rejects it, Pygments shows no Error token")
            if not illegal:
                problems.append("the compiler rejects it, the grammar shows nothing invalid.illegal")
        for p in problems:
            print("FAIL %s: %s" % (name, p))
        failed += bool(problems)
    print("%d programs the compiler's lexer accepts, %d it rejects for a character or an open string, "
          "%d skipped; %d disagree" % (counts["ok"], counts["lexical"], counts["other"], failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
