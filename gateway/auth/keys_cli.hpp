// `dpgate keys ...`: manage the client API keys file (auth.keys_file).
//
//   dpgate keys add NAME --file F [--trusted] [--metrics] [--max-concurrent N] [--requests-per-min N]
//   dpgate keys list --file F
//   dpgate keys remove NAME --file F
//
// `add` prints a fresh random key once, on stdout, and stores only its
// SHA-256; the key cannot be recovered later. The file is created with mode
// 0600 and always stays loadable by loadKeysFile: every change is parsed
// back before it is written.
#pragma once

#include <ostream>
#include <string>

namespace dpgate::auth {

// argv[0] is the word after "keys" ("add", "list", "remove"). Returns the
// process exit code: 0 done, 1 refused or failed (message on err), 2 usage.
int runKeysCli(int argc, char** argv);
int runKeysCli(int argc, char** argv, std::ostream& out, std::ostream& err);

// "sk-dpgate-" + 43 base62 characters (256 bits from OpenSSL RAND_bytes).
// Throws std::runtime_error if the random generator fails.
std::string generateApiKey();

}  // namespace dpgate::auth
