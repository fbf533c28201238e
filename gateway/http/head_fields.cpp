#include "gateway/http/head_fields.hpp"

#include <boost/beast/core/string.hpp>

#include <algorithm>

namespace dpgate::gateway {

void HeadFields::add(http::field name, std::string_view name_string, std::string_view value) {
    if (bytes_.capacity() == 0) bytes_.reserve(512);
    const auto name_at = uint32_t(bytes_.size());
    bytes_.append(name_string);
    const auto value_at = uint32_t(bytes_.size());
    bytes_.append(value);
    fields_.push_back({name, name_at, uint32_t(name_string.size()), value_at, uint32_t(value.size())});
}

std::string_view HeadFields::operator[](http::field name) const {
    for (const Field& f : fields_)
        if (f.name == name) return valueOf(f);
    return {};
}

std::string_view HeadFields::operator[](std::string_view name) const {
    for (const Field& f : fields_)
        if (f.name_bytes == name.size() && beast::iequals(beast::string_view(nameOf(f)), beast::string_view(name)))
            return valueOf(f);
    return {};
}

bool HeadFields::has(http::field name) const {
    return std::any_of(fields_.begin(), fields_.end(), [&](const Field& f) { return f.name == name; });
}

}  // namespace dpgate::gateway
