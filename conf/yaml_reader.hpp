// Typed reads from yaml-cpp nodes that fail with a ConfigError naming the
// key path and line. Internal to conf/: nothing outside includes yaml-cpp.
#pragma once

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dpgate::conf::detail {

// A value and where it sits: its key path ("backends[1].url") and 1-based
// line (0 = unknown). For a null value (`url:` with nothing after it) the line
// is the key's, which is where the reader's eye is.
struct Field {
    std::string path;
    YAML::Node node;
    int line = 0;
};

int lineOf(const YAML::Node& node);
std::string childPath(const std::string& parent, std::string_view key);
std::string indexPath(const std::string& parent, std::size_t index);

[[noreturn]] void fail(const Field& at, const std::string& what);

// One YAML mapping read against a fixed key set. Unknown keys, duplicate keys
// and non-scalar keys are errors at construction.
class MappingReader {
public:
    // A null node (an empty section, `limits:`) reads as an empty mapping.
    MappingReader(const Field& field, std::initializer_list<std::string_view> allowed_keys);

    std::optional<Field> get(std::string_view key) const;
    const Field& self() const { return self_; }
    // The line of `key` if present, else of the mapping itself.
    int lineOfKey(std::string_view key) const;

    // Every key in document order, for mappings with free-form keys (the keys file).
    struct Entry {
        std::string key;
        int key_line = 0;
        Field value;
    };
    const std::vector<Entry>& entries() const { return entries_; }

    // Free-form keys: any scalar key is accepted; duplicates are still errors.
    static MappingReader anyKeys(const Field& field);

private:
    explicit MappingReader(const Field& field);  // collects entries, checks nothing but duplicates

    Field self_;
    std::vector<Entry> entries_;
};

// A null node reads as an empty sequence.
std::vector<Field> readSequence(const Field& field);

std::string readString(const Field& field);
bool readBool(const Field& field);
double readDouble(const Field& field);
uint64_t readUint(const Field& field, uint64_t min, uint64_t max);
// An integer number of bytes, or a string with a binary unit: "256MiB", "64 KiB".
uint64_t readBytes(const Field& field, uint64_t min, uint64_t max);
// An integer number of milliseconds, or a string with a unit: "250ms", "10s", "30min", "2h".
uint64_t readDurationMs(const Field& field, uint64_t min, uint64_t max);

}  // namespace dpgate::conf::detail

namespace dpgate::conf::detail {

// Parses exactly one YAML document. yaml-cpp's exceptions never leave: a
// syntax error becomes a ConfigError with its line ("conf: line 3: invalid
// YAML: illegal map value"). An empty text is a null root.
Field parseDocument(const std::string& text);

// Reads a config or keys file whole. Refuses what is not a regular file
// (a FIFO or /dev/zero would hang or exhaust the loader) and files above
// max_file_bytes. Errors are reported at `at`.
std::string readTextFile(const std::string& path, const Field& at);

inline constexpr uint64_t max_file_bytes = 16ull << 20;

}  // namespace dpgate::conf::detail
