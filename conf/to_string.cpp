#include "conf/config.hpp"

namespace dpgate::conf {

// The spellings are the YAML values, so status output can be pasted back into a config.
const char* toString(BackendRole role) {
    switch (role) {
        case BackendRole::primary: return "primary";
        case BackendRole::standby: return "standby";
    }
    return "?";
}

const char* toString(RoutingMode mode) {
    switch (mode) {
        case RoutingMode::failover: return "failover";
        case RoutingMode::active_active: return "active-active";
    }
    return "?";
}

}  // namespace dpgate::conf
