#include "admission/tokenizer/added_tokens.hpp"

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
    auto it = trie.children.find(key);
    if (it == trie.children.end()) {
      const auto child = static_cast<std::uint32_t>(trie.token_at.size());
      trie.token_at.push_back(-1);
      it = trie.children.emplace(key, child).first;
    }
    node = it->second;
  }
  // Two entries with the same content: the later one wins, as in a map.
  trie.token_at[node] = id;
}

std::size_t AddedTokens::longestAt(const Trie& trie, std::string_view text, std::size_t pos, std::uint32_t& id) {
  std::uint32_t node = 0;
  std::size_t best = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = trie.children.find((static_cast<std::uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == trie.children.end()) break;
    node = it->second;
    if (trie.token_at[node] >= 0) {
      best = i + 1 - pos;
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
