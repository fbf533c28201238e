// `dpgate ctl`: the operator's CLI over the admin API (status, watch, flip,
// drain, undrain, reload) and a shortcut to `dpgate accept`.
#pragma once

namespace dpgate::gateway::ctl {

// argv after "ctl". Exit codes: 0 done, 1 refused (the API's reason is
// printed; for accept: the backend failed), 2 usage or unreadable input,
// 3 the admin API could not be reached.
int runCtlCli(int argc, char** argv, const char* dpgate_version);

}  // namespace dpgate::gateway::ctl
