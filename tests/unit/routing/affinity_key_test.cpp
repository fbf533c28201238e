#include "routing/affinity_key.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace dpgate::routing;

namespace {

// An agent's conversation: the same long system prompt and tool list for
// every user; turns differ from the first user message on.
struct Chat {
    std::string tools;
    std::vector<std::pair<std::string, std::string>> turns;  // role, text

    ConversationView view(size_t message_count) const {
        ConversationView v;
        v.tools = tools;
        for (size_t i = 0; i < message_count && i < turns.size(); ++i)
            v.messages.push_back({turns[i].first, turns[i].second});
        return v;
    }
};

const std::string long_system(std::string(200'000, 's') + " You are a coding agent.");
const std::string long_tools(std::string(80'000, 't') + R"([{"type":"function","function":{"name":"bash"}}])");

Chat agentChat(const std::string& first_user_message, int turns) {
    Chat chat{long_tools, {{"system", long_system}, {"user", first_user_message}}};
    for (int i = 0; i < turns; ++i) {
        chat.turns.push_back({"assistant", "answer " + std::to_string(i) + " to " + first_user_message});
        chat.turns.push_back({"user", "follow-up " + std::to_string(i)});
    }
    return chat;
}

}  // namespace

TEST(AffinityKey, HeadKeyIsStableAcrossTurnsOfAnAppendOnlyConversation) {
    Chat chat = agentChat("fix the flaky test in parser.cpp", 10);
    uint64_t first = conversationHeadKey(chat.view(2));
    for (size_t n = 3; n <= chat.turns.size(); ++n)
        EXPECT_EQ(conversationHeadKey(chat.view(n)), first) << n << " messages";
}

TEST(AffinityKey, HeadKeyDiffersBetweenConversationsSharingALongPrefix) {
    // 1,000 users of one agent: identical 280 KB of tools + system prompt.
    std::set<uint64_t> keys;
    for (int user = 0; user < 1000; ++user)
        keys.insert(conversationHeadKey(agentChat("task number " + std::to_string(user), 1).view(4)));
    EXPECT_EQ(keys.size(), 1000u);
}

TEST(AffinityKey, HeadKeyCoversToolsAndSystemPrompt) {
    Chat a = agentChat("hello", 0);
    Chat other_tools = a;
    other_tools.tools += " ";
    Chat other_system = a;
    other_system.turns[0].second += " ";
    uint64_t key = conversationHeadKey(a.view(2));
    EXPECT_NE(conversationHeadKey(other_tools.view(2)), key);
    EXPECT_NE(conversationHeadKey(other_system.view(2)), key);
}

TEST(AffinityKey, SeveralSystemMessagesAllBelongToTheHead) {
    Chat a{"", {{"system", "rules"}, {"developer", "style A"}, {"user", "hi"}, {"assistant", "yo"}}};
    Chat b{"", {{"system", "rules"}, {"developer", "style B"}, {"user", "hi"}, {"assistant", "yo"}}};
    EXPECT_NE(conversationHeadKey(a.view(4)), conversationHeadKey(b.view(4)));
    EXPECT_EQ(conversationHeadKey(a.view(3)), conversationHeadKey(a.view(4)));
}

TEST(AffinityKey, IdenticalHeadsCollideByDesign) {
    // Same system prompt and same first user message: one shared cacheable
    // prefix, so one key. Later turns do not separate them.
    Chat a{"", {{"system", "sys"}, {"user", "hi"}, {"assistant", "one"}}};
    Chat b{"", {{"system", "sys"}, {"user", "hi"}, {"assistant", "two"}}};
    EXPECT_EQ(conversationHeadKey(a.view(3)), conversationHeadKey(b.view(3)));
}

TEST(AffinityKey, FieldBoundariesMatter) {
    Chat a{"", {{"system", "ab"}, {"user", "c"}}};
    Chat b{"", {{"system", "a"}, {"user", "bc"}}};
    EXPECT_NE(conversationHeadKey(a.view(2)), conversationHeadKey(b.view(2)));
}

TEST(AffinityKey, PrecedenceHeaderThenPromptCacheKeyThenHead) {
    Chat chat = agentChat("x", 0);
    AffinityInput input;
    input.conversation = chat.view(2);
    AffinityKey head = affinityKey(input);
    EXPECT_EQ(head.source, AffinitySource::conversation_head);
    EXPECT_EQ(head.key, conversationHeadKey(input.conversation));

    input.prompt_cache_key = "pck-1";
    AffinityKey by_pck = affinityKey(input);
    EXPECT_EQ(by_pck.source, AffinitySource::prompt_cache_key);
    EXPECT_NE(by_pck.key, head.key);

    input.session_header = "session-7";
    AffinityKey by_header = affinityKey(input);
    EXPECT_EQ(by_header.source, AffinitySource::session_header);
    EXPECT_NE(by_header.key, by_pck.key);

    // The same conversation keeps its key whatever its messages become.
    Chat longer = agentChat("y", 3);
    input.conversation = longer.view(8);
    EXPECT_EQ(affinityKey(input).key, by_header.key);
}

TEST(AffinityKey, EmptyExplicitKeysCountAsAbsent) {
    Chat chat = agentChat("x", 0);
    AffinityInput input;
    input.conversation = chat.view(2);
    input.session_header = "";
    input.prompt_cache_key = "";
    EXPECT_EQ(affinityKey(input).source, AffinitySource::conversation_head);
}

TEST(AffinityKey, SameStringSameKeyWhetherHeaderOrPromptCacheKey) {
    AffinityInput by_header;
    by_header.session_header = "abc";
    AffinityInput by_pck;
    by_pck.prompt_cache_key = "abc";
    EXPECT_EQ(affinityKey(by_header).key, affinityKey(by_pck).key);
}

TEST(AffinityKey, KnownValueIsStableAcrossBuilds) {
    // Two gateway replicas (and two releases) must agree on keys; pin one.
    AffinityInput input;
    input.session_header = "pinned";
    EXPECT_EQ(affinityKey(input).key, 13566982009359300111ULL);
    EXPECT_EQ(affinitySourceName(AffinitySource::conversation_head), "conversation_head");
}

TEST(AffinityKey, KnownHeadKeyIsStableAcrossBuilds) {
    // The head key of a known conversation, pinned: replicas of different
    // builds must route a conversation alike (hashed by Hasher64::addText).
    const Chat chat = agentChat("pinned first message", 1);
    EXPECT_EQ(conversationHeadKey(chat.view(4)), 2812737796574113083ULL);
}
