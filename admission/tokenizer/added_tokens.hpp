#pragma once
// Added tokens (special or not) are cut out of the raw text before
// pre-tokenization, as HuggingFace's AddedVocabulary does: first the tokens
// with normalized=false, leftmost-longest; then, inside the remaining text,
// the tokens with normalized=true (this tokenizer's normalizer is the
// identity, so both passes match raw bytes).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dpgate::admission {

struct AddedToken {
    std::string content;
    std::uint32_t id = 0;
    bool normalized = false;
    bool special = false;
};

class AddedTokens {
public:
    AddedTokens() = default;
    explicit AddedTokens(const std::vector<AddedToken>& tokens);

    // Calls on_text(segment) for each run of ordinary text (never empty) and
    // on_token(id) for each added token, in order.
    template <typename OnText, typename OnToken>
    void split(std::string_view text, OnText&& on_text, OnToken&& on_token) const {
        splitPass(
            raw_, text, [&](std::string_view segment) { splitPass(normalized_, segment, on_text, on_token); },
            on_token);
    }

    // Id of a token whose content is exactly `content`, or -1.
    std::int64_t idOf(std::string_view content) const;

    std::size_t size() const { return by_content_.size(); }

private:
    // Byte trie. While tokens are inserted, children are keyed by
    // (node << 8 | byte); finish() lays them out flat. A walk step reads one
    // 16-byte node and then either its edges (sorted by byte) or its chain's
    // bytes: each node's fields sit together, so a step touches one cache
    // line for the node, where parallel arrays cost one per field
    // (with them the split misses the first-level cache 16 times per small
    // request).
    static constexpr std::uint32_t kNoToken = 0xffffffff;
    struct Node {
        std::uint32_t token = kNoToken;  // id of the token ending here
        // A chain of one-edge nodes no token ends inside is walked with one
        // compare: for the node the chain starts at, its bytes are
        // run_bytes[first, first + run_length) and it ends at node `next` (a
        // node with a token, or with more or fewer than one edge). A walk
        // only ever meets a chain at its start.
        // run_length 0: no chain starts here; the node's edges are
        // edges[first, next).
        std::uint32_t run_length = 0;
        std::uint32_t first = 0;
        std::uint32_t next = 0;
    };
    struct Edge {
        std::uint32_t child = 0;
        unsigned char byte = 0;
    };
    struct Trie {
        std::unordered_map<std::uint64_t, std::uint32_t> building;
        std::vector<Node> nodes;
        std::vector<Edge> edges;
        std::string run_bytes;
        bool first_byte[256] = {};
        int only_first_byte = -1;  // set when every token starts with one byte (memchr path)
        bool empty() const { return nodes.size() <= 1; }
    };

    static void insert(Trie& trie, std::string_view content, std::uint32_t id);
    static void finish(Trie& trie);
    // Length and id of the longest token starting at text[pos], or length 0.
    static std::size_t longestAt(const Trie& trie, std::string_view text, std::size_t pos, std::uint32_t& id);

    template <typename OnText, typename OnToken>
    static void splitPass(const Trie& trie, std::string_view text, OnText&& on_text, OnToken&& on_token) {
        if (trie.empty()) {
            if (!text.empty()) on_text(text);
            return;
        }
        std::size_t start = 0;
        std::size_t pos = 0;
        while (pos < text.size()) {
            if (trie.only_first_byte >= 0) {
                const std::size_t next = text.find(static_cast<char>(trie.only_first_byte), pos);
                if (next == std::string_view::npos) break;
                pos = next;
            } else if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
                ++pos;
                continue;
            }
            std::uint32_t id = 0;
            const std::size_t len = longestAt(trie, text, pos, id);
            if (len == 0) {
                ++pos;
                continue;
            }
            if (start < pos) on_text(text.substr(start, pos - start));
            on_token(id);
            pos += len;
            start = pos;
        }
        if (start < text.size()) on_text(text.substr(start));
    }

    Trie raw_;
    Trie normalized_;
    std::unordered_map<std::string, std::uint32_t> by_content_;
};

}  // namespace dpgate::admission
