#include "routing/affinity_key.hpp"

#include "routing/hash64.hpp"

namespace dpgate::routing {
namespace {

// Header and prompt_cache_key share one seed: a client that names its session
// either way with the same string lands on the same slot.
constexpr uint64_t explicit_key_seed = 0x5e5510ca11ab1e01ULL;
constexpr uint64_t head_key_seed = 0x4ead0fc0a7e25a71ULL;

bool isSystemRole(std::string_view role) { return role == "system" || role == "developer"; }

}  // namespace

std::string_view affinitySourceName(AffinitySource source) {
    switch (source) {
        case AffinitySource::session_header: return "session_header";
        case AffinitySource::prompt_cache_key: return "prompt_cache_key";
        case AffinitySource::conversation_head: return "conversation_head";
    }
    return "unknown";
}

uint64_t conversationHeadKey(const ConversationView& conversation) {
    Hasher64 hasher(head_key_seed);
    hasher.addText(conversation.tools);
    for (const MessageView& message : conversation.messages) {
        hasher.addText(message.role).addText(message.text);
        if (!isSystemRole(message.role)) break;  // the first non-system turn closes the head
    }
    return hasher.digest();
}

AffinityKey affinityKey(std::optional<std::string_view> session_header,
                        std::optional<std::string_view> prompt_cache_key, uint64_t head_key) {
    if (session_header && !session_header->empty())
        return {hashBytes(*session_header, explicit_key_seed), AffinitySource::session_header};
    if (prompt_cache_key && !prompt_cache_key->empty())
        return {hashBytes(*prompt_cache_key, explicit_key_seed), AffinitySource::prompt_cache_key};
    return {head_key, AffinitySource::conversation_head};
}

AffinityKey affinityKey(const AffinityInput& input) {
    if ((input.session_header && !input.session_header->empty()) ||
        (input.prompt_cache_key && !input.prompt_cache_key->empty()))
        return affinityKey(input.session_header, input.prompt_cache_key, 0);
    return {conversationHeadKey(input.conversation), AffinitySource::conversation_head};
}

}  // namespace dpgate::routing
