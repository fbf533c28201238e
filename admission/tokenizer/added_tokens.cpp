#include "admission/tokenizer/added_tokens.hpp"

#include <algorithm>
#include <cstring>

#include "routing/hash64.hpp"

namespace dpgate::admission {

AddedTokens::AddedTokens(const std::vector<AddedToken>& tokens) {
    raw_.nodes.emplace_back();
    normalized_.nodes.emplace_back();
    for (const AddedToken& token : tokens) {
        if (token.content.empty()) continue;
        insert(token.normalized ? normalized_ : raw_, token.content, token.id);
        by_content_[token.content] = token.id;
    }
    for (Trie* trie : {&raw_, &normalized_}) {
        finish(*trie);
        int distinct = 0;
        int last = -1;
        for (int b = 0; b < 256; ++b) {
            if (trie->first_byte[b]) {
                ++distinct;
                last = b;
            }
        }
        trie->only_first_byte = distinct == 1 ? last : -1;
    }
}

void AddedTokens::insert(Trie& trie, std::string_view content, std::uint32_t id) {
    std::uint32_t node = 0;
    trie.first_byte[static_cast<unsigned char>(content[0])] = true;
    for (const char c : content) {
        const std::uint64_t key = (static_cast<std::uint64_t>(node) << 8) | static_cast<unsigned char>(c);
        auto it = trie.building.find(key);
        if (it == trie.building.end()) {
            const auto child = static_cast<std::uint32_t>(trie.nodes.size());
            trie.nodes.emplace_back();
            it = trie.building.emplace(key, child).first;
        }
        node = it->second;
    }
    // Two entries with the same content: the later one wins, as in a map.
    trie.nodes[node].token = id;
}

void AddedTokens::finish(Trie& trie) {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> keyed(trie.building.begin(), trie.building.end());
    std::sort(keyed.begin(), keyed.end());  // by parent node, then byte
    trie.building.clear();
    // Each node's edges, as a range of `edges`; kept in first/next until the
    // chains below overwrite them for the nodes a chain starts at.
    std::vector<Node>& nodes = trie.nodes;
    trie.edges.reserve(keyed.size());
    for (const auto& [key, child] : keyed) {
        Node& parent = nodes[key >> 8];
        if (parent.next == 0) parent.first = static_cast<std::uint32_t>(trie.edges.size());
        trie.edges.push_back({child, static_cast<unsigned char>(key & 0xff)});
        parent.next = static_cast<std::uint32_t>(trie.edges.size());
    }
    auto edges_of = [&](std::uint32_t n) { return nodes[n].next - nodes[n].first; };

    // Chains, from the root down: a chain's inner nodes are skipped, and the
    // walk goes on from where it ends.
    std::vector<std::uint32_t> todo = {0};
    while (!todo.empty()) {
        const std::uint32_t n = todo.back();
        todo.pop_back();
        if (edges_of(n) == 1) {
            const auto begin = static_cast<std::uint32_t>(trie.run_bytes.size());
            std::uint32_t m = n;
            do {
                const Edge& edge = trie.edges[nodes[m].first];
                trie.run_bytes.push_back(static_cast<char>(edge.byte));
                m = edge.child;
            } while (nodes[m].token == kNoToken && edges_of(m) == 1);
            nodes[n].run_length = static_cast<std::uint32_t>(trie.run_bytes.size()) - begin;
            nodes[n].first = begin;
            nodes[n].next = m;
            todo.push_back(m);
        } else {
            for (std::uint32_t e = nodes[n].first; e < nodes[n].next; ++e) todo.push_back(trie.edges[e].child);
        }
    }
}

namespace {

// Whether the n bytes at a and at b are the same, a word at a time with
// routing's loads: eight bytes (the last eight overlapping the ones
// before), or one word for fewer than eight. A chain is a few to a few dozen
// bytes, where a call to memcmp costs more than the compare.
bool sameBytes(const char* a, const char* b, std::size_t n) {
    using routing::hash_detail::load64;
    using routing::hash_detail::loadShort;
    const auto* const x = reinterpret_cast<const unsigned char*>(a);
    const auto* const y = reinterpret_cast<const unsigned char*>(b);
    if (n < 8) return loadShort(x, n) == loadShort(y, n);
    for (std::size_t at = 0; at + 8 < n; at += 8)
        if (load64(x + at) != load64(y + at)) return false;
    return load64(x + n - 8) == load64(y + n - 8);
}

}  // namespace

std::size_t AddedTokens::longestAt(const Trie& trie, std::string_view text, std::size_t pos, std::uint32_t& id) {
    const Node* node = trie.nodes.data();
    std::size_t best = 0;
    std::size_t i = pos;
    while (i < text.size()) {
        if (const std::uint32_t run = node->run_length; run != 0) {
            // No token ends inside a chain: all of it matches, or nothing new does.
            if (text.size() - i < run || !sameBytes(text.data() + i, trie.run_bytes.data() + node->first, run)) break;
            i += run;
            node = &trie.nodes[node->next];
        } else {
            const auto byte = static_cast<unsigned char>(text[i]);
            const Edge* e = trie.edges.data() + node->first;
            const Edge* const end = trie.edges.data() + node->next;
            if (end - e > 8) {
                e = std::lower_bound(e, end, byte, [](const Edge& edge, unsigned char b) { return edge.byte < b; });
            } else {
                while (e < end && e->byte < byte) ++e;
            }
            if (e == end || e->byte != byte) break;
            node = &trie.nodes[e->child];
            ++i;
        }
        if (node->token != kNoToken) {
            best = i - pos;
            id = node->token;
        }
    }
    return best;
}

std::int64_t AddedTokens::idOf(std::string_view content) const {
    const auto it = by_content_.find(std::string(content));
    return it == by_content_.end() ? -1 : static_cast<std::int64_t>(it->second);
}

}  // namespace dpgate::admission
