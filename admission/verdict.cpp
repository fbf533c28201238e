#include "admission/verdict.hpp"

namespace dpgate::admission {

std::string splicedBody(std::string_view body, const Admitted& admitted) {
    if (!admitted.inserted_max_tokens) return std::string(body);
    std::string out;
    out.reserve(body.size() + admitted.splice_text.size());
    out.append(body.substr(0, admitted.splice_offset));
    out.append(admitted.splice_text);
    out.append(body.substr(admitted.splice_offset));
    return out;
}

}  // namespace dpgate::admission
