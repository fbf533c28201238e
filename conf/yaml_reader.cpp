#include "conf/yaml_reader.hpp"

#include "conf/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

namespace dpgate::conf::detail {

namespace {

// Values quoted back in messages are cut: a fuzzer's 1 MB scalar should not
// become a 1 MB log line.
std::string quoteValue(std::string_view text) {
    constexpr std::size_t max_chars = 40;
    std::string out = "\"";
    out.append(text.substr(0, max_chars));
    if (text.size() > max_chars) out += "...";
    out += '"';
    return out;
}

std::string kindOf(const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Null: return "null";
        case YAML::NodeType::Sequence: return "a sequence";
        case YAML::NodeType::Map: return "a mapping";
        case YAML::NodeType::Scalar: return quoteValue(node.Scalar());
        default: return "nothing";
    }
}

// yaml-cpp tags plain (unquoted) scalars "?" and quoted ones "!". Numbers and
// booleans must be plain: `port: "8900"` is a string, and saying so catches
// templating mistakes early.
bool isPlainScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() == "?"; }

std::string rangeText(uint64_t min, uint64_t max) {
    if (max == std::numeric_limits<uint64_t>::max()) return "at least " + std::to_string(min);
    return "between " + std::to_string(min) + " and " + std::to_string(max);
}

void checkRange(const Field& field, uint64_t value, uint64_t min, uint64_t max) {
    if (value < min || value > max) fail(field, "must be " + rangeText(min, max) + ", got " + std::to_string(value));
}

// Digits only; nullopt on anything else or on overflow.
std::optional<uint64_t> parseDigits(std::string_view text) {
    if (text.empty()) return std::nullopt;
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// "256MiB" -> (256, "MiB"); the unit may be preceded by one space.
std::pair<std::string_view, std::string_view> splitUnit(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    std::string_view digits = text.substr(0, i);
    std::string_view unit = text.substr(i);
    if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    return {digits, unit};
}

void rejectNegative(const Field& field, std::string_view text, const char* expected) {
    if (!text.empty() && text.front() == '-') fail(field, std::string(expected) + ", got " + quoteValue(text));
}

}  // namespace

int lineOf(const YAML::Node& node) {
    const YAML::Mark mark = node.Mark();
    return mark.line >= 0 ? mark.line + 1 : 0;
}

std::string childPath(const std::string& parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    return parent + "." + std::string(key);
}

std::string indexPath(const std::string& parent, std::size_t index) {
    return parent + "[" + std::to_string(index) + "]";
}

void fail(const Field& at, const std::string& what) { throw ConfigError(at.path, at.line, what); }

MappingReader::MappingReader(const Field& field, std::initializer_list<std::string_view> allowed_keys)
    : MappingReader(field) {
    const std::vector<std::string_view> allowed(allowed_keys);
    for (const Entry& entry : entries_) {
        if (std::find(allowed.begin(), allowed.end(), entry.key) != allowed.end()) continue;
        std::string list;
        for (std::string_view key : allowed) {
            if (!list.empty()) list += ", ";
            list += key;
        }
        fail({entry.value.path, entry.value.node, entry.key_line}, "unknown key; expected one of: " + list);
    }
}

MappingReader MappingReader::anyKeys(const Field& field) { return MappingReader(field); }

MappingReader::MappingReader(const Field& field) : self_(field) {
    if (field.node.IsNull()) return;
    if (!field.node.IsMap()) fail(field, "expected a mapping, got " + kindOf(field.node));
    // Key -> line of its first occurrence; a hash, so a keys file of
    // thousands of users is checked in linear time.
    std::unordered_map<std::string, int> first_line;
    for (auto it = field.node.begin(); it != field.node.end(); ++it) {
        const YAML::Node key_node = it->first;
        const YAML::Node value_node = it->second;
        const int key_line = lineOf(key_node);
        if (!key_node.IsScalar())
            fail({field.path, key_node, key_line}, "expected a plain key, got " + kindOf(key_node));
        const std::string& key = key_node.Scalar();
        const std::string path = childPath(field.path, key);
        // yaml-cpp keeps both copies of a repeated key and lookups see only the
        // first: a silent override an operator would never spot.
        if (auto [seen, added] = first_line.try_emplace(key, key_line); !added)
            fail({path, key_node, key_line}, "duplicate key (first at line " + std::to_string(seen->second) + ")");
        const int value_line = value_node.IsNull() ? key_line : lineOf(value_node);
        entries_.push_back({key, key_line, {path, value_node, value_line ? value_line : key_line}});
    }
}

std::optional<Field> MappingReader::get(std::string_view key) const {
    for (const Entry& entry : entries_)
        if (entry.key == key) return entry.value;
    return std::nullopt;
}

int MappingReader::lineOfKey(std::string_view key) const {
    for (const Entry& entry : entries_)
        if (entry.key == key) return entry.key_line;
    return self_.line;
}

std::vector<Field> readSequence(const Field& field) {
    std::vector<Field> items;
    if (field.node.IsNull()) return items;
    if (!field.node.IsSequence()) fail(field, "expected a sequence, got " + kindOf(field.node));
    std::size_t index = 0;
    for (auto it = field.node.begin(); it != field.node.end(); ++it, ++index) {
        const YAML::Node item = *it;
        const int line = lineOf(item);
        items.push_back({indexPath(field.path, index), item, line ? line : field.line});
    }
    return items;
}

std::string readString(const Field& field) {
    if (!field.node.IsScalar()) fail(field, "expected a string, got " + kindOf(field.node));
    return field.node.Scalar();
}

bool readBool(const Field& field) {
    if (isPlainScalar(field.node)) {
        const std::string& text = field.node.Scalar();
        // YAML 1.2's core schema; yes/no/on/off are YAML 1.1 traps.
        if (text == "true" || text == "True" || text == "TRUE") return true;
        if (text == "false" || text == "False" || text == "FALSE") return false;
    }
    fail(field, "expected true or false, got " + kindOf(field.node));
}

double readDouble(const Field& field) {
    if (isPlainScalar(field.node)) {
        const std::string& text = field.node.Scalar();
        double value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc() && end == text.data() + text.size() && std::isfinite(value)) return value;
    }
    fail(field, "expected a number, got " + kindOf(field.node));
}

uint64_t readUint(const Field& field, uint64_t min, uint64_t max) {
    if (!isPlainScalar(field.node)) fail(field, "expected an integer, got " + kindOf(field.node));
    const std::string& text = field.node.Scalar();
    rejectNegative(field, text, "expected a non-negative integer");
    const std::optional<uint64_t> value = parseDigits(text);
    if (!value) {
        const bool all_digits =
            !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        fail(field, all_digits ? "must be " + rangeText(min, max) + ", got " + quoteValue(text)
                               : "expected an integer, got " + quoteValue(text));
    }
    checkRange(field, *value, min, max);
    return *value;
}

uint64_t readBytes(const Field& field, uint64_t min, uint64_t max) {
    static constexpr const char* expected = "expected a byte count (an integer, or e.g. 256MiB)";
    if (!field.node.IsScalar()) fail(field, std::string(expected) + ", got " + kindOf(field.node));
    const std::string& text = field.node.Scalar();
    rejectNegative(field, text, expected);
    const auto [digits, unit] = splitUnit(text);
    const std::optional<uint64_t> count = parseDigits(digits);
    struct Unit {
        std::string_view name;
        uint64_t bytes;
    };
    static constexpr Unit units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40}};
    for (const Unit& u : units) {
        if (u.name != unit) continue;
        if (!count || (u.name.empty() && !isPlainScalar(field.node))) break;
        if (*count > std::numeric_limits<uint64_t>::max() / u.bytes)
            fail(field, "must be " + rangeText(min, max) + ", got " + quoteValue(text));
        const uint64_t value = *count * u.bytes;
        checkRange(field, value, min, max);
        return value;
    }
    fail(field, std::string(expected) + ", got " + quoteValue(text));
}

uint64_t readDurationMs(const Field& field, uint64_t min, uint64_t max) {
    static constexpr const char* expected = "expected milliseconds (an integer, or e.g. 10s)";
    if (!field.node.IsScalar()) fail(field, std::string(expected) + ", got " + kindOf(field.node));
    const std::string& text = field.node.Scalar();
    rejectNegative(field, text, expected);
    const auto [digits, unit] = splitUnit(text);
    const std::optional<uint64_t> count = parseDigits(digits);
    struct Unit {
        std::string_view name;
        uint64_t ms;
    };
    static constexpr Unit units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"min", 60'000}, {"h", 3'600'000}};
    for (const Unit& u : units) {
        if (u.name != unit) continue;
        if (!count || (u.name.empty() && !isPlainScalar(field.node))) break;
        if (*count > std::numeric_limits<uint64_t>::max() / u.ms)
            fail(field, "must be " + rangeText(min, max) + " ms, got " + quoteValue(text));
        const uint64_t value = *count * u.ms;
        if (value < min || value > max)
            fail(field, "must be " + rangeText(min, max) + " ms, got " + std::to_string(value));
        return value;
    }
    fail(field, std::string(expected) + ", got " + quoteValue(text));
}

}  // namespace dpgate::conf::detail

namespace dpgate::conf::detail {

namespace {

// Sees only where documents start. yaml-cpp 0.7 stalls on a stray ',' where a
// node is expected (",a: 1", "- a\n,"): it reports an empty document at that
// position and, asked for the next one, reports it again, forever; LoadAll
// would then allocate until memory runs out. Counting document starts with
// this handler, and stopping at the second, is how the loader stays finite.
class DocumentStarts : public YAML::EventHandler {
public:
    std::vector<YAML::Mark> marks;

    void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

[[noreturn]] void failYaml(const YAML::Exception& e) {
    // DeepRecursion (nesting past yaml-cpp's 2,000 levels) is a ParserException too.
    throw ConfigError("", e.mark.line >= 0 ? e.mark.line + 1 : 0, "invalid YAML: " + e.msg);
}

}  // namespace

Field parseDocument(const std::string& text) {
    DocumentStarts starts;
    try {
        std::istringstream in(text);
        YAML::Parser parser(in);
        while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {
        }
    } catch (const YAML::Exception& e) {
        failYaml(e);
    }
    if (starts.marks.size() > 1) {
        const YAML::Mark& second = starts.marks[1];
        const int line = second.line + 1;
        const char c = second.pos >= 0 && static_cast<std::size_t>(second.pos) < text.size() ? text[second.pos] : 0;
        if (c == ',' || second.pos == starts.marks[0].pos)
            throw ConfigError("", line,
                              std::string("invalid YAML: unexpected '") + (c >= ' ' && c <= '~' ? c : '?') + "'");
        throw ConfigError("", line, "expected one YAML document; another starts here");
    }
    YAML::Node root;
    try {
        root = YAML::Load(text);  // the first document only: the pass above proved there is no other
    } catch (const YAML::Exception& e) {
        failYaml(e);
    }
    const int line = lineOf(root);
    return {"", root, line ? line : 1};
}

std::string readTextFile(const std::string& path, const Field& at) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status)) fail(at, "file not found: " + path);
    if (!std::filesystem::is_regular_file(status)) fail(at, "not a regular file: " + path);
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) fail(at, "cannot read " + path + ": " + ec.message());
    if (size > max_file_bytes)
        fail(at, path + " is " + std::to_string(size) + " bytes; the limit is " + std::to_string(max_file_bytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(at, "cannot open " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) fail(at, "cannot read " + path);
    return text.str();
}

}  // namespace dpgate::conf::detail
