#include "admission/verdict.hpp"

#include <nlohmann/json.hpp>

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

std::string errorBody(const Refused& refused) {
  nlohmann::json error = {{"message", refused.message}, {"type", refused.type}, {"param", nullptr}, {"code", nullptr}};
  if (!refused.param.empty()) error["param"] = refused.param;
  if (!refused.code.empty()) error["code"] = refused.code;
  // Messages quote client bytes, which passed UTF-8 validation or were replaced.
  return nlohmann::json{{"error", error}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dpgate::admission
