#include "admission/simdjson_structurals.hpp"

namespace dpgate::admission {

namespace {

using Implementation = std::unique_ptr<simdjson::internal::dom_parser_implementation>;
using ImplementationMember = Implementation simdjson::ondemand::parser::*;

// An explicit instantiation may name a private member ([temp.explicit]/12):
// the one way to read ondemand::parser::implementation without changing
// simdjson. A simdjson without that member fails to compile here, not
// anywhere else.
ImplementationMember implementationMember();

template <ImplementationMember member>
struct ReadImplementation {
    friend ImplementationMember implementationMember() { return member; }
};

template struct ReadImplementation<&simdjson::ondemand::parser::implementation>;

// The version whose parser layout and stage 1 this was checked against.
constexpr bool kKnownSimdjson = simdjson::SIMDJSON_VERSION_MAJOR == 3 && simdjson::SIMDJSON_VERSION_MINOR == 0;

}  // namespace

std::span<const std::uint32_t> simdjsonStructurals(const simdjson::ondemand::parser& parser) {
    if constexpr (!kKnownSimdjson) return {};
    const Implementation& implementation = parser.*implementationMember();
    if (implementation == nullptr || implementation->structural_indexes == nullptr) return {};
    return {implementation->structural_indexes.get(), implementation->n_structural_indexes};
}

}  // namespace dpgate::admission
