// vLLM's detection of a template's content format (`_detect_content_format`
// in vllm/renderers/hf.py), on this engine's syntax tree, which keeps Jinja's
// node kinds: `openai` when a `for` loop iterates over `<m>.content` or
// `<m>['content']` (possibly filtered, tested or sliced) where `<m>` is the
// target of a `for` loop over `messages`, or over a variable assigned from
// `messages` (transitively). vLLM asserts that such targets are plain names
// and falls back to `string` when one is not; so does this.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "admission/template/chat_template.hpp"

namespace dpgate::admission {

namespace {

using jinja::Body;
using jinja::Expr;
using jinja::ExprKind;
using jinja::Stmt;
using jinja::StmtKind;
using jinja::Target;

struct NotAName {};  // vLLM's failed assertion: the detection gives up

bool isVarAccess(const Expr* e, std::string_view name) {
    return e != nullptr && e->kind == ExprKind::name && e->name == name;
}

bool isAttrAccess(const Expr* e, std::string_view name, std::string_view key) {
    if (e == nullptr) return false;
    if (e->kind == ExprKind::getitem) {
        return isVarAccess(e->a, name) && e->b->kind == ExprKind::constant && e->b->constant.isString() &&
               e->b->constant.text() == key;
    }
    if (e->kind == ExprKind::getattr) return isVarAccess(e->a, name) && e->name == key;
    return false;
}

bool isVarOrElemsAccess(const Expr* e, std::string_view name, std::string_view key = {}) {
    if (e == nullptr) return false;
    if (e->kind == ExprKind::filter) return e->a != nullptr && isVarOrElemsAccess(e->a, name, key);
    if (e->kind == ExprKind::test) return isVarOrElemsAccess(e->a, name, key);
    if (e->kind == ExprKind::getitem && e->b->kind == ExprKind::slice) return isVarOrElemsAccess(e->a, name, key);
    return key.empty() ? isVarAccess(e, name) : isAttrAccess(e, name, key);
}

void collect(const Body& body, std::vector<const Stmt*>& assigns, std::vector<const Stmt*>& loops) {
    for (const Stmt* s : body) {
        if (s->kind == StmtKind::assign) assigns.push_back(s);
        if (s->kind == StmtKind::for_) loops.push_back(s);
        collect(s->body, assigns, loops);
        collect(s->else_body, assigns, loops);
        for (const auto& [test, elif_body] : s->elifs) collect(elif_body, assigns, loops);
    }
}

std::string_view targetName(const Target& target) {
    if (target.kind != Target::Kind::name) throw NotAName{};
    return target.name;
}

}  // namespace

ContentFormat detectContentFormat(const jinja::Template& tpl) {
    std::vector<const Stmt*> assigns;
    std::vector<const Stmt*> loops;
    collect(tpl.body(), assigns, loops);
    try {
        // Names bound to `messages` or to parts of it.
        std::vector<std::string> messages_names{"messages"};
        std::deque<std::string> pending{"messages"};
        while (!pending.empty()) {
            const std::string related = pending.front();
            pending.pop_front();
            for (const Stmt* assign : assigns) {
                if (!isVarOrElemsAccess(assign->expr, related)) continue;
                const std::string name(targetName(assign->target));
                // vLLM revisits a name assigned in a cycle forever; once is enough.
                if (std::find(messages_names.begin(), messages_names.end(), name) != messages_names.end()) continue;
                messages_names.push_back(name);
                pending.push_back(name);
            }
        }
        // Loop variables over those: the messages.
        std::vector<std::string> message_names;
        for (const Stmt* loop : loops) {
            for (const std::string& name : messages_names) {
                if (isVarOrElemsAccess(loop->expr, name)) {
                    message_names.emplace_back(targetName(loop->target));
                    break;
                }
            }
        }
        // A loop over a message's content.
        for (const Stmt* loop : loops) {
            for (const std::string& name : message_names) {
                if (isVarOrElemsAccess(loop->expr, name, "content")) {
                    targetName(loop->target);
                    return ContentFormat::openai;
                }
            }
        }
    } catch (const NotAName&) {
        return ContentFormat::string;
    }
    return ContentFormat::string;
}

std::string_view contentFormatName(ContentFormat format) {
    return format == ContentFormat::openai ? "openai" : "string";
}

}  // namespace dpgate::admission
