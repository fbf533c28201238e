// The conversation affinity key: what decides which (backend, DP rank) slot
// holds a conversation's prefix in KV cache. Pure: the gateway fills the
// inputs from the request it already parsed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dpgate::routing {

struct MessageView {
    std::string_view role;
    std::string_view text;  // the message's rendered content (text parts joined; images by reference)
};

struct ConversationView {
    std::string_view tools;  // the request's tool definitions as sent (canonical bytes), empty if none
    std::vector<MessageView> messages;
};

struct AffinityInput {
    std::optional<std::string_view> session_header;    // value of the configured header (default X-Session-ID)
    std::optional<std::string_view> prompt_cache_key;  // body "prompt_cache_key"
    ConversationView conversation;
};

enum class AffinitySource { session_header, prompt_cache_key, conversation_head };

struct AffinityKey {
    uint64_t key;
    AffinitySource source;  // which input decided the key; only the tests read it (no metric or log field yet)
};

std::string_view affinitySourceName(AffinitySource source);

// Precedence: session header -> prompt_cache_key -> conversation head. An
// empty header or prompt_cache_key counts as absent.
//
// The head is tools + the leading system/developer messages + the first
// non-system message, and nothing after it:
//  - every later turn of an append-only conversation repeats exactly those
//    messages, so the key is the same on every turn;
//  - the first user message is the user's own words, so two conversations of
//    one agent (identical system prompt and tool list, however long) still
//    get different keys and spread over the slots. A key over the first N
//    bytes would stop inside the shared system prompt and send every user of
//    the agent to one slot.
// Weakness: conversations with identical system prompt AND identical first
// user message collide. Acceptable: they share that whole prefix, so
// co-locating them is a cache hit, and bounded load spills them when hot.
// A request with no non-system message is keyed on its system part alone and
// so differs from its own next turn; chat clients do not send such requests.
AffinityKey affinityKey(const AffinityInput& input);

// The same precedence with the head key already computed (admission computes
// it while it has the parsed messages; the gateway routes after).
AffinityKey affinityKey(std::optional<std::string_view> session_header,
                        std::optional<std::string_view> prompt_cache_key, uint64_t head_key);

// The head key alone (exposed for tests and the replay tool).
uint64_t conversationHeadKey(const ConversationView& conversation);

}  // namespace dpgate::routing
