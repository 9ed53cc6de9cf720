"""A Pygments lexer for shmapc's language (.smp files), so documentation and terminals highlight
programs: `pygmentize -l shmap prog.smp`, or ```shmap blocks in Markdown rendered by Pygments.

Install: `pip install ./editors/pygments` registers it with Pygments (an entry point), or copy
this file and use `pygmentize -l editors/pygments/shmap_lexer.py:ShmapLexer -x prog.smp`.

The tokens follow compiler/lexer/Lexer.cpp (grammar/shmap.ebnf): `#` comments, strings with
`\\"` and `\\\\` the only escapes (one line), integer and float literals, the keywords and dtypes,
operators. A character the compiler's lexer rejects (or a string left open at the end of its
line) is an Error token, as it would be a compile error.
"""
from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (Comment, Error, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

__all__ = ["ShmapLexer"]

# The collectives and builtins (compiler/sema/Builtins.cpp), highlighted as Pygments highlights
# Python's builtins.
BUILTINS = (
    "zeros", "ones", "zeros_like", "ones_like", "tree_map", "tree_leaves", "tree_reduce", "device_put", "full", "iota", "random_normal", "random_uniform", "load", "save", "savez", "load_checkpoint", "save_checkpoint", "stage_boundary",
    "cast", "exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "floor", "ceil", "maximum", "minimum", "pow",
    "select", "where", "clip", "sum", "mean", "max", "min", "take", "scatter_add", "argmax", "argmin",
    "cumsum", "roll", "take_along_axis", "argsort", "sort", "one_hot", "top_k", "scan", "matmul", "reshape",
    "transpose", "expand_dims", "concatenate", "dynamic_slice", "dynamic_update_slice", "print",
    "range", "grad", "value_and_grad", "vjp", "jvp", "linear_transpose", "check_grads",
    "sharding_constraint", "P",
)
COLLECTIVES = (
    "psum", "pmean", "pmax", "pmin", "pprod", "pand", "por", "pxor", "psum2", "pbroadcast", "pvary",
    "all_gather", "all_gather_invariant", "psum_scatter", "pscatter", "all_to_all", "ppermute",
    "axis_index", "axis_size", "broadcast", "reduce", "gather", "scatter",
)


class ShmapLexer(RegexLexer):
    name = "shmap"
    aliases = ["shmap", "smp", "shmapc"]
    filenames = ["*.smp"]
    mimetypes = ["text/x-shmap"]

    tokens = {
        "root": [
            (r"[ \t\r\n]+", Whitespace),
            (r"#[^\n]*", Comment.Single),
            (r'"', String.Double, "string"),
            # decorators: @shmap(...), @jit(...), @pipeline(...); a mesh named in a sharding: sharding<@m, ...>
            (r"(@)(shmap|jit|pipeline)\b", bygroups(Punctuation, Name.Decorator)),
            (r"(@)([A-Za-z_][A-Za-z0-9_]*)", bygroups(Punctuation, Name.Namespace)),
            (r"(def)([ \t]+)([A-Za-z_][A-Za-z0-9_]*)", bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            (r"(mesh)([ \t]+)([A-Za-z_][A-Za-z0-9_]*)", bygroups(Keyword.Declaration, Whitespace, Name.Namespace)),
            (words(("def", "let", "mesh", "import", "arg"), suffix=r"\b"), Keyword.Declaration),
            (words(("return", "for", "while", "in", "if", "else"), suffix=r"\b"), Keyword),
            (words(("true", "false", "None"), suffix=r"\b"), Keyword.Constant),
            (words(("f32", "f64", "i32", "i64", "f16", "bf16", "bool", "str"), suffix=r"\b"), Keyword.Type),
            (r"sharding(?=\s*<)", Keyword.Type),
            (words(COLLECTIVES, suffix=r"\b"), Name.Builtin),
            (words(BUILTINS, suffix=r"\b"), Name.Builtin),
            (r"[A-Za-z_][A-Za-z0-9_]*", Name),
            (r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+", Number.Float),
            (r"[0-9]+", Number.Integer),
            (r"->|\*\*|//|==|!=|<=|>=|&&|\|\||[-+*/%<>=!@?]", Operator),
            (r"[()\[\]{},;:.]", Punctuation),
            (r".", Error),  # (any other character: the compiler's [unexpected-char])
        ],
        "string": [
            (r'\\["\\]', String.Escape),
            (r'\\.', Error),  # (an unknown escape)
            (r'\x00', Error),  # (a NUL byte: the compiler's [unexpected-char])
            (r'[^"\\\n\x00]+', String.Double),
            (r'"', String.Double, "#pop"),
            (r"\n", Error, "#pop"),  # (a string open at the end of its line: [unterminated-string])
        ],
    }
