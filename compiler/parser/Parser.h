// Hand-written recursive-descent parser: tokens -> ast::Program. Each parse function quotes
// the grammar rule (grammar/shmap.ebnf) it implements. Errors are fatal (CompileError).
#pragma once
#include "ast/AST.h"
#include "lexer/Lexer.h"

namespace shmapc {
ast::Program parseProgram(int fileId, const SourceManager &sm, Diagnostics &diags);
} // namespace shmapc
