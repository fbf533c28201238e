// Tokens -> Template, following Jinja2's parser production by production
// (parse_tuple, parse_condexpr, parse_or, ... parse_postfix, parse_filter_expr),
// so precedence and associativity are Jinja's: filters and tests bind to the
// unary operand, `~` between + and *, comparisons chain, `x if c` without
// else is undefined.
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "admission/template/jinja/builtins.hpp"
#include "admission/template/jinja/lexer.hpp"
#include "admission/template/jinja/methods.hpp"
#include "admission/template/jinja/template.hpp"

namespace dpgate::admission::jinja {

namespace {

struct ParseError {
    std::string message;
    int line;
};

}  // namespace

class Parser {
public:
    Parser(Template& tpl, std::vector<Token>& tokens) : t_(tpl), tokens_(tokens) {}

    Body parseTemplate() {
        Body body = subparse({});
        if (current().kind != TokenKind::eof) fail("unexpected token");
        return body;
    }

private:
    const Token& current() const { return tokens_[pos_]; }
    const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
    const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

    [[noreturn]] void fail(const std::string& message, int line = -1) const {
        throw ParseError{message, line < 0 ? current().line : line};
    }

    static std::string describe(const Token& token) {
        switch (token.kind) {
            case TokenKind::name:
            case TokenKind::op: return "'" + token.text + "'";
            case TokenKind::string: return "string";
            case TokenKind::integer: return "integer";
            case TokenKind::floating: return "float";
            case TokenKind::block_end: return "end of statement block";
            case TokenKind::variable_end: return "end of print statement";
            case TokenKind::eof: return "end of template";
            default: return "template data";
        }
    }

    bool isName(std::string_view name) const { return current().kind == TokenKind::name && current().text == name; }
    bool isOp(std::string_view op) const { return current().kind == TokenKind::op && current().text == op; }
    bool skipName(std::string_view name) {
        if (!isName(name)) return false;
        next();
        return true;
    }
    bool skipOp(std::string_view op) {
        if (!isOp(op)) return false;
        next();
        return true;
    }
    void expectOp(std::string_view op) {
        if (!skipOp(op)) fail("expected '" + std::string(op) + "', got " + describe(current()));
    }
    void expectName(std::string_view name) {
        if (!skipName(name)) fail("expected '" + std::string(name) + "', got " + describe(current()));
    }
    std::string_view expectAnyName() {
        if (current().kind != TokenKind::name) fail("expected name, got " + describe(current()));
        return t_.keep(next().text);
    }
    void expectKind(TokenKind kind) {
        if (current().kind == TokenKind::eof) fail("unexpected end of template, expected " + describeKind(kind));
        if (current().kind != kind) fail("expected " + describeKind(kind) + ", got " + describe(current()));
        next();
    }
    static std::string describeKind(TokenKind kind) {
        return kind == TokenKind::block_end ? "'end of statement block'" : "'end of print statement'";
    }

    Expr& expr(ExprKind kind) { return t_.newExpr(kind, current().line); }

    // Levels of nesting taken while it lives: one per deeper() call, each
    // checked against kMaxTemplateNesting.
    class Depth {
    public:
        explicit Depth(Parser& parser) : parser_(parser) {}
        ~Depth() { parser_.depth_ -= taken_; }
        Depth(const Depth&) = delete;
        Depth& operator=(const Depth&) = delete;
        void deeper() {
            ++taken_;
            if (++parser_.depth_ > kMaxTemplateNesting) {
                parser_.fail("the template nests more than " + std::to_string(kMaxTemplateNesting) + " levels deep");
            }
        }

    private:
        Parser& parser_;
        unsigned taken_ = 0;
    };

    // --- statements -------------------------------------------------------

    Body subparse(std::initializer_list<std::string_view> end_tokens) {
        Depth depth(*this);
        depth.deeper();
        Body body;
        Stmt* output = nullptr;
        auto outputStmt = [&]() -> Stmt& {
            if (output == nullptr) {
                output = &t_.newStmt(StmtKind::output, current().line);
                body.push_back(output);
            }
            return *output;
        };
        while (current().kind != TokenKind::eof) {
            const Token& token = current();
            if (token.kind == TokenKind::data) {
                outputStmt().output.push_back(OutputItem{t_.keep(token.text), nullptr});
                next();
            } else if (token.kind == TokenKind::variable_begin) {
                next();
                const Expr* e = parseTuple(false, true, {}, false);
                outputStmt().output.push_back(OutputItem{{}, e});
                expectKind(TokenKind::variable_end);
            } else if (token.kind == TokenKind::block_begin) {
                output = nullptr;
                next();
                for (std::string_view end : end_tokens) {
                    if (isName(end)) return body;
                }
                parseStatement(body);
                expectKind(TokenKind::block_end);
            } else {
                fail("unexpected " + describe(token));
            }
        }
        if (end_tokens.size() > 0) {
            std::string expected;
            for (std::string_view end : end_tokens)
                expected += (expected.empty() ? "'" : " or '") + std::string(end) + "'";
            fail("Unexpected end of template. Jinja was looking for the following tags: " + expected + ".");
        }
        return body;
    }

    Body parseStatements(std::initializer_list<std::string_view> end_tokens, bool drop_needle) {
        skipOp(":");
        expectKind(TokenKind::block_end);
        Body body = subparse(end_tokens);
        if (drop_needle) next();
        return body;
    }

    void parseStatement(Body& body) {
        if (current().kind != TokenKind::name) fail("tag name expected");
        const std::string keyword = current().text;
        const int line = current().line;
        if (keyword == "for") {
            body.push_back(&parseFor());
        } else if (keyword == "if") {
            body.push_back(&parseIf());
        } else if (keyword == "set") {
            body.push_back(&parseSet());
        } else if (keyword == "macro") {
            body.push_back(&parseMacro());
        } else if (keyword == "call") {
            body.push_back(&parseCallBlock());
        } else if (keyword == "filter") {
            next();
            Stmt& s = t_.newStmt(StmtKind::filter_block, line);
            s.expr = parseFilter(nullptr, true);
            s.body = parseStatements({"endfilter"}, true);
            body.push_back(&s);
        } else if (keyword == "with") {
            body.push_back(&parseWith());
        } else if (keyword == "break" || keyword == "continue") {
            next();
            body.push_back(&t_.newStmt(keyword == "break" ? StmtKind::break_ : StmtKind::continue_, line));
        } else if (keyword == "generation") {
            next();
            Stmt& s = t_.newStmt(StmtKind::scope, line);
            s.body = parseStatements({"endgeneration"}, true);
            body.push_back(&s);
        } else if (keyword == "print") {
            next();
            Stmt& s = t_.newStmt(StmtKind::output, line);
            s.output.push_back(OutputItem{{}, parseTuple(false, true, {}, false)});
            body.push_back(&s);
        } else if (keyword == "extends" || keyword == "include" || keyword == "import" || keyword == "from" ||
                   keyword == "block") {
            fail("'" + keyword + "' is not supported in a chat template (it must be one self-contained file)");
        } else if (keyword == "autoescape") {
            next();
            parseExpression(true);
            Stmt& s = t_.newStmt(StmtKind::scope, line);
            s.body = parseStatements({"endautoescape"}, true);
            body.push_back(&s);
        } else {
            fail("Encountered unknown tag '" + keyword + "'.");
        }
    }

    Stmt& parseFor() {
        Stmt& s = t_.newStmt(StmtKind::for_, next().line);
        s.target = parseAssignTarget(true, false, {"in"}, false);
        expectName("in");
        s.expr = parseTuple(false, false, {"recursive"}, false);
        if (skipName("if")) s.loop_filter = parseExpression(true);
        if (isName("recursive")) fail("recursive loops are not supported");
        s.body = parseStatements({"endfor", "else"}, false);
        if (next().text != "endfor") s.else_body = parseStatements({"endfor"}, true);
        s.uses_loop = mentions(s.body, Template::kLoopId);
        return s;
    }

    Stmt& parseIf() {
        Stmt& s = t_.newStmt(StmtKind::if_, next().line);
        s.expr = parseTuple(false, false, {}, false);
        s.body = parseStatements({"elif", "else", "endif"}, false);
        for (;;) {
            const Token& token = next();
            if (token.text == "elif") {
                const Expr* test = parseTuple(false, false, {}, false);
                Body body = parseStatements({"elif", "else", "endif"}, false);
                s.elifs.emplace_back(test, std::move(body));
                continue;
            }
            if (token.text == "else") s.else_body = parseStatements({"endif"}, true);
            break;
        }
        return s;
    }

    Stmt& parseSet() {
        const int line = next().line;
        Target target = parseAssignTarget(true, false, {}, true);
        if (skipOp("=")) {
            Stmt& s = t_.newStmt(StmtKind::assign, line);
            s.target = std::move(target);
            s.expr = parseTuple(false, true, {}, false);
            return s;
        }
        Stmt& s = t_.newStmt(StmtKind::assign_block, line);
        s.target = std::move(target);
        s.expr = parseFilter(nullptr, false);
        s.body = parseStatements({"endset"}, true);
        return s;
    }

    Stmt& parseWith() {
        Stmt& s = t_.newStmt(StmtKind::with, next().line);
        while (current().kind != TokenKind::block_end) {
            if (!s.with_targets.empty()) expectOp(",");
            s.with_targets.push_back(parseAssignTarget(true, false, {}, false));
            expectOp("=");
            s.with_values.push_back(parseExpression(true));
        }
        s.body = parseStatements({"endwith"}, true);
        return s;
    }

    void parseSignature(Stmt& s) {
        expectOp("(");
        bool defaults = false;
        while (!isOp(")")) {
            if (!s.args.empty()) expectOp(",");
            MacroArg arg;
            arg.name = expectAnyName();
            arg.name_id = t_.intern(arg.name);
            if (skipOp("=")) {
                arg.default_value = parseExpression(true);
                defaults = true;
            } else if (defaults) {
                fail("non-default argument follows default argument");
            }
            s.args.push_back(arg);
        }
        expectOp(")");
    }

    Stmt& parseMacro() {
        Stmt& s = t_.newStmt(StmtKind::macro, next().line);
        s.name = expectAnyName();
        s.name_id = t_.intern(s.name);
        parseSignature(s);
        s.body = parseStatements({"endmacro"}, true);
        noteSpecialNames(s);
        return s;
    }

    Stmt& parseCallBlock() {
        Stmt& s = t_.newStmt(StmtKind::call_block, next().line);
        if (isOp("(")) parseSignature(s);
        s.expr = parseExpression(true);
        if (s.expr->kind != ExprKind::call) fail("expected call", s.line);
        s.body = parseStatements({"endcall"}, true);
        return s;
    }

    // Whether any expression in `body` (nested statements included) loads the name `id`.
    static bool mentions(const Body& body, std::uint32_t id) {
        for (const Stmt* s : body) {
            for (const OutputItem& item : s->output) {
                if (mentions(item.expr, id)) return true;
            }
            if (mentions(s->expr, id) || mentions(s->loop_filter, id)) return true;
            for (const MacroArg& arg : s->args) {
                if (mentions(arg.default_value, id)) return true;
            }
            for (const Expr* e : s->with_values) {
                if (mentions(e, id)) return true;
            }
            for (const auto& [test, elif_body] : s->elifs) {
                if (mentions(test, id) || mentions(elif_body, id)) return true;
            }
            if (mentions(s->body, id) || mentions(s->else_body, id)) return true;
        }
        return false;
    }
    static bool mentions(const Expr* e, std::uint32_t id) {
        if (e == nullptr) return false;
        if (e->kind == ExprKind::name && e->name_id == id) return true;
        for (const Expr* child : {e->a, e->b, e->c, e->dyn_args, e->dyn_kwargs}) {
            if (mentions(child, id)) return true;
        }
        for (const Expr* child : e->items) {
            if (mentions(child, id)) return true;
        }
        for (const Expr* child : e->keyword_values) {
            if (mentions(child, id)) return true;
        }
        return false;
    }

    // Whether a macro body loads `caller`, `varargs` or `kwargs` (Jinja gives
    // the macro those parameters only then).
    void noteSpecialNames(Stmt& macro) {
        const std::uint32_t caller = t_.nameId("caller");
        const std::uint32_t varargs = t_.nameId("varargs");
        const std::uint32_t kwargs = t_.nameId("kwargs");
        for (const Stmt* s : macro.body) scanStmt(*s, macro, caller, varargs, kwargs);
    }
    void scanStmt(const Stmt& s, Stmt& macro, std::uint32_t caller, std::uint32_t varargs, std::uint32_t kwargs) {
        auto scanBody = [&](const Body& body) {
            for (const Stmt* child : body) scanStmt(*child, macro, caller, varargs, kwargs);
        };
        for (const OutputItem& item : s.output) scanExpr(item.expr, macro, caller, varargs, kwargs);
        scanExpr(s.expr, macro, caller, varargs, kwargs);
        scanExpr(s.loop_filter, macro, caller, varargs, kwargs);
        for (const MacroArg& arg : s.args) scanExpr(arg.default_value, macro, caller, varargs, kwargs);
        for (const Expr* e : s.with_values) scanExpr(e, macro, caller, varargs, kwargs);
        for (const auto& [test, body] : s.elifs) {
            scanExpr(test, macro, caller, varargs, kwargs);
            scanBody(body);
        }
        if (s.kind == StmtKind::macro) return;  // a nested macro's caller is its own
        scanBody(s.body);
        scanBody(s.else_body);
    }
    void scanExpr(const Expr* e, Stmt& macro, std::uint32_t caller, std::uint32_t varargs, std::uint32_t kwargs) {
        if (e == nullptr) return;
        if (e->kind == ExprKind::name) {
            macro.uses_caller |= e->name_id == caller;
            macro.uses_varargs |= e->name_id == varargs;
            macro.uses_kwargs |= e->name_id == kwargs;
        }
        for (const Expr* child : {e->a, e->b, e->c, e->dyn_args, e->dyn_kwargs})
            scanExpr(child, macro, caller, varargs, kwargs);
        for (const Expr* child : e->items) scanExpr(child, macro, caller, varargs, kwargs);
        for (const Expr* child : e->keyword_values) scanExpr(child, macro, caller, varargs, kwargs);
    }

    Target parseAssignTarget(bool with_tuple, bool name_only, std::initializer_list<std::string_view> extra_end,
                             bool with_namespace) {
        Target target;
        if (with_namespace && current().kind == TokenKind::name && look().kind == TokenKind::op && look().text == ".") {
            target.kind = Target::Kind::ns_attr;
            target.name = expectAnyName();
            target.name_id = t_.intern(target.name);
            next();  // '.'
            target.attr = expectAnyName();
            return target;
        }
        if (name_only || !with_tuple) {
            target.name = expectAnyName();
            target.name_id = t_.intern(target.name);
            return target;
        }
        // parse_tuple(simplified=True): names, optionally parenthesised, separated by commas.
        std::vector<Target> items;
        bool is_tuple = false;
        for (;;) {
            if (!items.empty()) expectOp(",");
            if (isTupleEnd(extra_end)) break;
            items.push_back(parseTargetPrimary());
            if (isOp(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (items.empty()) fail("Expected an expression, got " + describe(current()));
            return items.front();
        }
        target.kind = Target::Kind::tuple;
        target.items = std::move(items);
        return target;
    }

    Target parseTargetPrimary() {
        Depth depth(*this);
        if (skipOp("(")) {
            depth.deeper();
            Target inner = parseAssignTarget(true, false, {}, false);
            expectOp(")");
            return inner;
        }
        if (current().kind != TokenKind::name) fail("can't assign to " + describe(current()));
        const std::string& name = current().text;
        if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
            name == "None") {
            fail("can't assign to constant");
        }
        Target target;
        target.name = expectAnyName();
        target.name_id = t_.intern(target.name);
        return target;
    }

    bool isTupleEnd(std::initializer_list<std::string_view> extra_end) const {
        const TokenKind kind = current().kind;
        if (kind == TokenKind::variable_end || kind == TokenKind::block_end || isOp(")")) return true;
        for (std::string_view end : extra_end) {
            if (isName(end)) return true;
        }
        return false;
    }

    // --- expressions -----------------------------------------------------

    const Expr* parseExpression(bool with_condexpr) { return with_condexpr ? parseCondExpr() : parseOr(); }

    const Expr* parseTuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                           bool explicit_parentheses) {
        Depth depth(*this);
        depth.deeper();
        const int line = current().line;
        std::vector<const Expr*> items;
        bool is_tuple = false;
        for (;;) {
            if (!items.empty()) expectOp(",");
            if (isTupleEnd(extra_end)) break;
            items.push_back(simplified ? parsePrimary() : parseExpression(with_condexpr));
            if (isOp(",")) {
                is_tuple = true;
            } else {
                break;
            }
        }
        if (!is_tuple) {
            if (!items.empty()) return items.front();
            if (!explicit_parentheses) fail("Expected an expression, got " + describe(current()));
        }
        Expr& e = t_.newExpr(ExprKind::tuple, line);
        e.items = std::move(items);
        return &e;
    }

    const Expr* parseCondExpr() {
        Depth depth(*this);
        const Expr* e1 = parseOr();
        while (skipName("if")) {
            depth.deeper();
            const Expr* test = parseOr();
            const Expr* otherwise = skipName("else") ? parseCondExpr() : nullptr;
            Expr& e = expr(ExprKind::cond);
            e.a = test;
            e.b = e1;
            e.c = otherwise;
            e1 = &e;
        }
        return e1;
    }

    const Expr* binary(ExprKind kind, const Expr* left, const Expr* right, int line) {
        Expr& e = t_.newExpr(kind, line);
        e.a = left;
        e.b = right;
        return &e;
    }

    const Expr* parseOr() {
        Depth depth(*this);
        const Expr* left = parseAnd();
        while (isName("or")) {
            depth.deeper();
            const int line = next().line;
            left = binary(ExprKind::or_, left, parseAnd(), line);
        }
        return left;
    }

    const Expr* parseAnd() {
        Depth depth(*this);
        const Expr* left = parseNot();
        while (isName("and")) {
            depth.deeper();
            const int line = next().line;
            left = binary(ExprKind::and_, left, parseNot(), line);
        }
        return left;
    }

    const Expr* parseNot() {
        if (isName("not")) {
            Depth depth(*this);
            depth.deeper();
            const int line = next().line;
            Expr& e = t_.newExpr(ExprKind::not_, line);
            e.a = parseNot();
            return &e;
        }
        return parseCompare();
    }

    const Expr* parseCompare() {
        const int line = current().line;
        const Expr* first = parseMath1();
        std::vector<CompareOp> ops;
        std::vector<const Expr*> operands;
        for (;;) {
            CompareOp op;
            if (isOp("==")) {
                op = CompareOp::eq;
            } else if (isOp("!=")) {
                op = CompareOp::ne;
            } else if (isOp("<")) {
                op = CompareOp::lt;
            } else if (isOp("<=")) {
                op = CompareOp::lteq;
            } else if (isOp(">")) {
                op = CompareOp::gt;
            } else if (isOp(">=")) {
                op = CompareOp::gteq;
            } else if (isName("in")) {
                op = CompareOp::in;
            } else if (isName("not") && look().kind == TokenKind::name && look().text == "in") {
                next();
                op = CompareOp::notin;
            } else {
                break;
            }
            next();
            ops.push_back(op);
            operands.push_back(parseMath1());
        }
        if (ops.empty()) return first;
        Expr& e = t_.newExpr(ExprKind::compare, line);
        e.a = first;
        e.ops = std::move(ops);
        e.items = std::move(operands);
        return &e;
    }

    const Expr* parseMath1() {
        Depth depth(*this);
        const Expr* left = parseConcat();
        while (isOp("+") || isOp("-")) {
            depth.deeper();
            const ExprKind kind = current().text == "+" ? ExprKind::add : ExprKind::sub;
            const int line = next().line;
            left = binary(kind, left, parseConcat(), line);
        }
        return left;
    }

    const Expr* parseConcat() {
        const int line = current().line;
        std::vector<const Expr*> args{parseMath2()};
        while (skipOp("~")) args.push_back(parseMath2());
        if (args.size() == 1) return args.front();
        Expr& e = t_.newExpr(ExprKind::concat, line);
        e.items = std::move(args);
        return &e;
    }

    const Expr* parseMath2() {
        Depth depth(*this);
        const Expr* left = parsePow();
        for (;;) {
            ExprKind kind;
            if (isOp("*")) {
                kind = ExprKind::mul;
            } else if (isOp("/")) {
                kind = ExprKind::div;
            } else if (isOp("//")) {
                kind = ExprKind::floordiv;
            } else if (isOp("%")) {
                kind = ExprKind::mod;
            } else {
                break;
            }
            depth.deeper();
            const int line = next().line;
            left = binary(kind, left, parsePow(), line);
        }
        return left;
    }

    const Expr* parsePow() {
        Depth depth(*this);
        const Expr* left = parseUnary(true);
        while (isOp("**")) {
            depth.deeper();
            const int line = next().line;
            left = binary(ExprKind::pow, left, parseUnary(true), line);
        }
        return left;
    }

    const Expr* parseUnary(bool with_filter) {
        Depth depth(*this);
        const Expr* node;
        if (isOp("-") || isOp("+")) {
            depth.deeper();
            const ExprKind kind = current().text == "-" ? ExprKind::neg : ExprKind::pos;
            const int line = next().line;
            Expr& e = t_.newExpr(kind, line);
            e.a = parseUnary(false);
            node = &e;
        } else {
            node = parsePrimary();
        }
        node = parsePostfix(node);
        if (with_filter) node = parseFilterExpr(node);
        return node;
    }

    const Expr* constant(Value v, int line) {
        Expr& e = t_.newExpr(ExprKind::constant, line);
        e.constant = v;
        return &e;
    }

    const Expr* parsePrimary() {
        const Token& token = current();
        const int line = token.line;
        if (token.kind == TokenKind::name) {
            const std::string& n = token.text;
            next();
            if (n == "true" || n == "True") return constant(Value::boolean(true), line);
            if (n == "false" || n == "False") return constant(Value::boolean(false), line);
            if (n == "none" || n == "None") return constant(Value::none(), line);
            Expr& e = t_.newExpr(ExprKind::name, line);
            e.name = t_.keep(n);
            e.name_id = t_.intern(e.name);
            return &e;
        }
        if (token.kind == TokenKind::string) {
            std::string text = next().text;
            while (current().kind == TokenKind::string) text += next().text;
            return constant(Value::string(t_.keep(std::move(text))), line);
        }
        if (token.kind == TokenKind::integer) return constant(integerConstant(next().text), line);
        if (token.kind == TokenKind::floating) {
            const std::string text = next().text;
            return constant(Value::floating(std::strtod(text.c_str(), nullptr)), line);
        }
        if (skipOp("(")) {
            const Expr* inner = parseTuple(false, true, {}, true);
            expectOp(")");
            return inner;
        }
        if (isOp("[")) return parseList();
        if (isOp("{")) return parseDict();
        if (token.kind == TokenKind::eof) fail("unexpected end of template");
        fail("unexpected " + describe(token));
    }

    Value integerConstant(const std::string& text) {
        int base = 10;
        std::size_t skip = 0;
        if (text.size() > 2 && text[0] == '0') {
            const char p = static_cast<char>(text[1] | 0x20);
            base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 10;
            skip = base == 10 ? 0 : 2;
        }
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data() + skip, text.data() + text.size(), value, base);
        if (ec == std::errc() && end == text.data() + text.size()) return Value::integer(value);
        if (base == 10) {
            std::size_t first = text.find_first_not_of('0');
            return Value::bigInteger(t_.keep(first == std::string::npos ? "0" : text.substr(first)));
        }
        fail("integer literal too large: " + text);
    }

    const Expr* parseList() {
        Depth depth(*this);
        depth.deeper();
        const int line = next().line;
        Expr& e = t_.newExpr(ExprKind::list, line);
        while (!isOp("]")) {
            if (!e.items.empty()) expectOp(",");
            if (isOp("]")) break;
            e.items.push_back(parseExpression(true));
        }
        expectOp("]");
        return &e;
    }

    const Expr* parseDict() {
        Depth depth(*this);
        depth.deeper();
        const int line = next().line;
        Expr& e = t_.newExpr(ExprKind::dict, line);
        while (!isOp("}")) {
            if (!e.items.empty()) expectOp(",");
            if (isOp("}")) break;
            e.items.push_back(parseExpression(true));
            expectOp(":");
            e.items.push_back(parseExpression(true));
        }
        expectOp("}");
        return &e;
    }

    // Each subscript, call, filter or test wraps the node so far: one level more.
    const Expr* parsePostfix(const Expr* node) {
        Depth depth(*this);
        for (;;) {
            if (isOp(".") || isOp("[") || isOp("(")) depth.deeper();
            if (isOp(".") || isOp("[")) {
                node = parseSubscript(node);
            } else if (isOp("(")) {
                node = parseCall(node);
            } else {
                return node;
            }
        }
    }

    const Expr* parseFilterExpr(const Expr* node) {
        Depth depth(*this);
        for (;;) {
            if (isOp("|") || isName("is") || isOp("(")) depth.deeper();
            if (isOp("|")) {
                node = parseFilter(node, false);
            } else if (isName("is")) {
                node = parseTest(node);
            } else if (isOp("(")) {
                node = parseCall(node);
            } else {
                return node;
            }
        }
    }

    const Expr* parseSubscript(const Expr* node) {
        const Token& token = next();
        const int line = token.line;
        if (token.text == ".") {
            if (current().kind == TokenKind::name) {
                Expr& e = t_.newExpr(ExprKind::getattr, line);
                e.a = node;
                e.name = expectAnyName();
                e.names_dict_method = isDictMethodName(e.name);
                return &e;
            }
            if (current().kind == TokenKind::integer) {
                Expr& e = t_.newExpr(ExprKind::getitem, line);
                e.a = node;
                e.b = constant(integerConstant(next().text), line);
                return &e;
            }
            fail("expected name or number");
        }
        std::vector<const Expr*> args;
        while (!isOp("]")) {
            if (!args.empty()) expectOp(",");
            args.push_back(parseSubscribed());
        }
        expectOp("]");
        Expr& e = t_.newExpr(ExprKind::getitem, line);
        e.a = node;
        if (args.size() == 1) {
            e.b = args.front();
            if (e.b->kind == ExprKind::constant && e.b->constant.isString()) {
                e.names_dict_method = isDictMethodName(e.b->constant.text());
            }
        } else {
            Expr& tuple = t_.newExpr(ExprKind::tuple, line);
            tuple.items = std::move(args);
            e.b = &tuple;
        }
        return &e;
    }

    const Expr* parseSubscribed() {
        const int line = current().line;
        const Expr* start = nullptr;
        if (isOp(":")) {
            next();
        } else {
            const Expr* node = parseExpression(true);
            if (!isOp(":")) return node;
            next();
            start = node;
        }
        Expr& e = t_.newExpr(ExprKind::slice, line);
        e.a = start;
        if (!isOp(":") && !isOp("]") && !isOp(",")) e.b = parseExpression(true);
        if (skipOp(":")) {
            if (!isOp("]") && !isOp(",")) e.c = parseExpression(true);
        }
        return &e;
    }

    void parseCallArgs(Expr& e) {
        expectOp("(");
        bool require_comma = false;
        while (!isOp(")")) {
            if (require_comma) {
                expectOp(",");
                if (isOp(")")) break;
            }
            if (skipOp("*")) {
                e.dyn_args = parseExpression(true);
            } else if (skipOp("**")) {
                e.dyn_kwargs = parseExpression(true);
            } else if (current().kind == TokenKind::name && look().kind == TokenKind::op && look().text == "=") {
                e.keyword_names.push_back(expectAnyName());
                next();  // '='
                e.keyword_values.push_back(parseExpression(true));
            } else {
                if (e.dyn_args != nullptr || e.dyn_kwargs != nullptr || !e.keyword_names.empty()) {
                    fail("invalid syntax for function call expression");
                }
                e.items.push_back(parseExpression(true));
            }
            require_comma = true;
        }
        expectOp(")");
    }

    const Expr* parseCall(const Expr* node) {
        Expr& e = t_.newExpr(ExprKind::call, current().line);
        e.a = node;
        parseCallArgs(e);
        return &e;
    }

    const Expr* parseFilter(const Expr* node, bool start_inline) {
        Depth depth(*this);
        while (isOp("|") || start_inline) {
            depth.deeper();
            if (!start_inline) next();
            const int line = current().line;
            std::string name(expectAnyName());
            while (skipOp(".")) name += "." + std::string(expectAnyName());
            Expr& e = t_.newExpr(ExprKind::filter, line);
            e.a = node;
            e.name = t_.keep(name);
            e.filter = findFilter(e.name);
            if (e.filter == nullptr) fail("No filter named '" + name + "'.", line);
            if (isOp("(")) parseCallArgs(e);
            node = &e;
            start_inline = false;
        }
        return node;
    }

    const Expr* parseTest(const Expr* node) {
        const int line = next().line;  // 'is'
        const bool negated = skipName("not");
        std::string name(expectAnyName());
        while (skipOp(".")) name += "." + std::string(expectAnyName());
        Expr& e = t_.newExpr(ExprKind::test, line);
        e.a = node;
        e.name = t_.keep(name);
        e.test = findTest(e.name);
        if (e.test == nullptr) fail("No test named '" + name + "'.", line);
        const Token& token = current();
        if (isOp("(")) {
            parseCallArgs(e);
        } else if ((token.kind == TokenKind::name || token.kind == TokenKind::string ||
                    token.kind == TokenKind::integer || token.kind == TokenKind::floating || isOp("(") || isOp("[") ||
                    isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
            if (isName("is")) fail("You cannot chain multiple tests with is");
            e.items.push_back(parsePostfix(parsePrimary()));
        }
        if (!negated) return &e;
        Expr& n = t_.newExpr(ExprKind::not_, line);
        n.a = &e;
        return &n;
    }

    Template& t_;
    std::vector<Token>& tokens_;
    std::size_t pos_ = 0;
    unsigned depth_ = 0;
};

std::uint32_t Template::nameId(std::string_view name) const {
    const auto it = name_ids_.find(name);
    return it == name_ids_.end() ? kNoName : it->second;
}

std::uint32_t Template::intern(std::string_view name) {
    const auto it = name_ids_.find(name);
    if (it != name_ids_.end()) return it->second;
    const std::string_view kept = keep(std::string(name));
    const auto id = static_cast<std::uint32_t>(names_.size());
    names_.push_back(kept);
    name_ids_.emplace(kept, id);
    return id;
}

Expr& Template::newExpr(ExprKind kind, int line) {
    Expr& e = exprs_.emplace_back();
    e.kind = kind;
    e.line = line;
    return e;
}

Stmt& Template::newStmt(StmtKind kind, int line) {
    Stmt& s = stmts_.emplace_back();
    s.kind = kind;
    s.line = line;
    return s;
}

std::string_view Template::keep(std::string text) { return strings_.emplace_back(std::move(text)); }

std::shared_ptr<const Template> Template::parse(std::string_view source, std::string& error) {
    std::shared_ptr<Template> tpl(new Template());
    tpl->source_ = std::string(source);
    std::vector<Token> tokens;
    if (auto lex_error = lexTemplate(source, tokens)) {
        error = "line " + std::to_string(lex_error->line) + ": " + lex_error->message;
        return nullptr;
    }
    // Names every render may need, interned first so their ids are stable.
    for (std::string_view name : {"caller", "varargs", "kwargs", "loop"}) tpl->intern(name);
    try {
        Parser parser(*tpl, tokens);
        tpl->body_ = parser.parseTemplate();
    } catch (const ParseError& e) {
        error = "line " + std::to_string(e.line) + ": " + e.message;
        return nullptr;
    }
    struct Global {
        std::string_view name;
        GlobalFn fn;
    };
    static constexpr Global kGlobals[] = {{"range", GlobalFn::range},
                                          {"dict", GlobalFn::dict},
                                          {"namespace", GlobalFn::namespace_},
                                          {"raise_exception", GlobalFn::raise_exception},
                                          {"strftime_now", GlobalFn::strftime_now},
                                          {"joiner", GlobalFn::joiner},
                                          {"cycler", GlobalFn::cycler},
                                          {"lipsum", GlobalFn::lipsum}};
    tpl->base_globals_.assign(tpl->names_.size(), Value());
    for (const Global& g : kGlobals) {
        const std::uint32_t id = tpl->nameId(g.name);
        if (id == kNoName) continue;
        CallableData& c = tpl->global_callables_.emplace_back();
        c.kind = CallableData::Kind::global;
        c.name = g.name;
        c.global = g.fn;
        tpl->base_globals_[id] = Value::callable(&c);
    }
    return tpl;
}

}  // namespace dpgate::admission::jinja
