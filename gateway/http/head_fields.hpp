// The header fields of one parsed message, kept as one string and a small
// index instead of a beast::http::fields, which costs an allocation and a
// red-black tree insert (case-insensitive compares) per field (with those,
// the two heads of a proxied request cost ~10 % of its instructions).
//
// Filled in arrival order by both head parsers (client_request.hpp,
// upstream_response_parser.hpp). Lookups are linear: a message has a
// handful of fields.
#pragma once

#include "gateway/net/net.hpp"
#include "gateway/platform/string_pool.hpp"

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace dpgate::gateway {

class HeadFields {
public:
    struct Field {
        http::field name;  // field::unknown for a name Beast does not know
        uint32_t name_at, name_bytes, value_at, value_bytes;
    };

    // A head is bounded by the parsers' limits, so offsets fit in 32 bits.
    // One field, copied in (a trailer's field; tests).
    void add(http::field name, std::string_view name_string, std::string_view value);

    HeadFields() = default;
    HeadFields(HeadFields&&) noexcept = default;
    HeadFields& operator=(HeadFields&&) noexcept = default;
    HeadFields(const HeadFields&) = default;
    HeadFields& operator=(const HeadFields&) = default;
    ~HeadFields() { StringPool::give(std::move(bytes_)); }

    // How the parsers fill it: the whole head copied once (into a buffer from
    // the thread's StringPool), then each field indexed where it lies in that copy.
    void assign(std::string_view head) {
        if (bytes_.capacity() < head.size()) bytes_ = StringPool::take();
        bytes_.assign(head.data(), head.size());
        fields_.clear();
    }
    void addAt(http::field name, uint32_t name_at, uint32_t name_bytes, uint32_t value_at, uint32_t value_bytes) {
        fields_.push_back({name, name_at, name_bytes, value_at, value_bytes});
    }
    std::string_view slice(uint32_t at, uint32_t bytes) const { return {bytes_.data() + at, bytes}; }

    // The first field of that name, or empty. A field named twice is seen
    // whole only through at(i).
    std::string_view operator[](http::field name) const;
    std::string_view operator[](std::string_view name) const;
    bool has(http::field name) const;

    size_t size() const { return fields_.size(); }
    const Field& at(size_t i) const { return fields_[i]; }
    std::string_view nameOf(const Field& f) const { return {bytes_.data() + f.name_at, f.name_bytes}; }
    std::string_view valueOf(const Field& f) const { return {bytes_.data() + f.value_at, f.value_bytes}; }
    // The field's line as "Name: value\r\n" where it lies so in the head's
    // copy (a parsed field with one SP after the colon and no whitespace
    // after the value), or empty: what a writer may copy whole.
    std::string_view lineOf(const Field& f) const {
        const size_t colon = size_t(f.name_at) + f.name_bytes, end = size_t(f.value_at) + f.value_bytes + 2;
        if (f.value_at != colon + 2 || end > bytes_.size()) return {};
        const char* const b = bytes_.data();
        if (b[colon] != ':' || b[colon + 1] != ' ' || b[end - 2] != '\r' || b[end - 1] != '\n') return {};
        return {b + f.name_at, end - f.name_at};
    }

    // fn(field id, name, value) for each field in arrival order.
    template <class Fn>
    void each(Fn&& fn) const {
        for (const Field& f : fields_) fn(f.name, nameOf(f), valueOf(f));
    }

private:
    std::string bytes_;  // every field's name and value, back to back
    boost::container::small_vector<Field, 12> fields_;
};

}  // namespace dpgate::gateway
