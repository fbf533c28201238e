// `dpgate accept`: the acceptance checklist against one backend, its
// verdicts on stdout and its record saved; `dpgate accept --compare` says
// what changed between two records.
#pragma once

namespace dpgate::acceptance {

// argv after "accept". Exit codes: 0 passed (or the records agree),
// 1 failed (or they differ), 2 usage or unreadable input.
int runAcceptCli(int argc, char** argv, const char* dpgate_version);

}  // namespace dpgate::acceptance
