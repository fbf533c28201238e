#include "admission/tokenizer/added_tokens.hpp"

#include <algorithm>
#include <cstring>

#include "routing/hash64.hpp"

namespace dpgate::admission {

AddedTokens::AddedTokens(const std::vector<AddedToken>& tokens) {
    raw_.token_at.push_back(-1);
    normalized_.token_at.push_back(-1);
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
            const auto child = static_cast<std::uint32_t>(trie.token_at.size());
            trie.token_at.push_back(-1);
            it = trie.building.emplace(key, child).first;
        }
        node = it->second;
    }
    // Two entries with the same content: the later one wins, as in a map.
    trie.token_at[node] = id;
}

void AddedTokens::finish(Trie& trie) {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> edges(trie.building.begin(), trie.building.end());
    std::sort(edges.begin(), edges.end());  // by parent node, then byte
    const std::size_t nodes = trie.token_at.size();
    trie.edge_begin.assign(nodes + 1, 0);
    trie.edge_byte.reserve(edges.size());
    trie.edge_child.reserve(edges.size());
    for (const auto& [key, child] : edges) {
        ++trie.edge_begin[(key >> 8) + 1];
        trie.edge_byte.push_back(static_cast<unsigned char>(key & 0xff));
        trie.edge_child.push_back(child);
    }
    for (std::size_t n = 0; n < nodes; ++n) trie.edge_begin[n + 1] += trie.edge_begin[n];
    trie.building.clear();

    // Chains, from the root down: a chain's inner nodes are skipped, and the
    // walk goes on from where it ends.
    trie.run_begin.assign(nodes, 0);
    trie.run_length.assign(nodes, 0);
    trie.run_end.assign(nodes, 0);
    auto edges_of = [&](std::uint32_t n) { return trie.edge_begin[n + 1] - trie.edge_begin[n]; };
    std::vector<std::uint32_t> todo = {0};
    while (!todo.empty()) {
        std::uint32_t n = todo.back();
        todo.pop_back();
        if (edges_of(n) == 1) {
            const auto begin = static_cast<std::uint32_t>(trie.run_bytes.size());
            std::uint32_t m = n;
            do {
                const std::uint32_t e = trie.edge_begin[m];
                trie.run_bytes.push_back(static_cast<char>(trie.edge_byte[e]));
                m = trie.edge_child[e];
            } while (trie.token_at[m] < 0 && edges_of(m) == 1);
            trie.run_begin[n] = begin;
            trie.run_length[n] = static_cast<std::uint32_t>(trie.run_bytes.size()) - begin;
            trie.run_end[n] = m;
            todo.push_back(m);
        } else {
            for (std::uint32_t e = trie.edge_begin[n]; e < trie.edge_begin[n + 1]; ++e)
                todo.push_back(trie.edge_child[e]);
        }
    }
}

namespace {

// Whether the n bytes at a and at b are the same, a word at a time with
// routing's loads: eight bytes (the last eight overlapping the ones
// before), or one word for fewer than eight. A chain is a few to a few dozen
// bytes, where a call to memcmp cost more than the compare (issue 18).
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
    std::uint32_t node = 0;
    std::size_t best = 0;
    std::size_t i = pos;
    while (i < text.size()) {
        if (const std::uint32_t run = trie.run_length[node]; run != 0) {
            // No token ends inside a chain: all of it matches, or nothing new does.
            if (text.size() - i < run || !sameBytes(text.data() + i, trie.run_bytes.data() + trie.run_begin[node], run))
                break;
            i += run;
            node = trie.run_end[node];
        } else {
            const auto byte = static_cast<unsigned char>(text[i]);
            std::uint32_t e = trie.edge_begin[node];
            const std::uint32_t end = trie.edge_begin[node + 1];
            if (end - e > 8) {
                e = static_cast<std::uint32_t>(
                    std::lower_bound(trie.edge_byte.begin() + e, trie.edge_byte.begin() + end, byte) -
                    trie.edge_byte.begin());
            } else {
                while (e < end && trie.edge_byte[e] < byte) ++e;
            }
            if (e == end || trie.edge_byte[e] != byte) break;
            node = trie.edge_child[e];
            ++i;
        }
        if (trie.token_at[node] >= 0) {
            best = i - pos;
            id = static_cast<std::uint32_t>(trie.token_at[node]);
        }
    }
    return best;
}

std::int64_t AddedTokens::idOf(std::string_view content) const {
    const auto it = by_content_.find(std::string(content));
    return it == by_content_.end() ? -1 : static_cast<std::int64_t>(it->second);
}

}  // namespace dpgate::admission
