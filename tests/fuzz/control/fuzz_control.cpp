// etcd's answers as dpgate reads them: a range's or a watch's JSON, each
// "kv" decoded from base64, int64 fields from strings; and base64 itself.
#include "gateway/control/etcd_codec.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

using dpgate::gateway::control::Kv;
using nlohmann::json;

// Every kv a range ("kvs") or a watch result ("result.events[].kv") holds.
void readAnswer(const json& answer) {
    if (!answer.is_object()) return;
    (void)dpgate::gateway::control::readInt64(answer.value("header", json::object()), "revision");
    if (auto kvs = answer.find("kvs"); kvs != answer.end() && kvs->is_array())
        for (const json& kv : *kvs) (void)dpgate::gateway::control::readKv(kv);
    if (auto result = answer.find("result"); result != answer.end() && result->is_object()) {
        (void)dpgate::gateway::control::readInt64(*result, "compact_revision");
        if (auto events = result->find("events"); events != result->end() && events->is_array())
            for (const json& event : *events)
                if (event.is_object()) (void)dpgate::gateway::control::readKv(event.value("kv", json::object()));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace dpgate::gateway::control;
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    // Any bytes encode, and decode back to themselves.
    std::optional<std::string> back = base64Decode(base64Encode(bytes));
    if (!back || *back != bytes) std::abort();
    // Decoding never yields more than three bytes per four characters.
    if (std::optional<std::string> decoded = base64Decode(bytes); decoded && decoded->size() > size / 4 * 3)
        std::abort();
    // The end of a prefix's range sorts after the prefix.
    if (size > 0 && !(prefixEnd(bytes) > bytes)) std::abort();
    json answer = json::parse(bytes, nullptr, false);
    if (!answer.is_discarded()) readAnswer(answer);
    return 0;
}
