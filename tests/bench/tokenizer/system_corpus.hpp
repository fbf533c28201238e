#pragma once
// The "system" corpus of dpgate-bench-tokenizer: first-contact
// text made of what every Debian machine has, generated at run time and
// never committed. Half troff man pages (gzip'd) spread evenly over every
// installed language under /usr/share/man, half headers from /usr/include
// (C, and the extensionless C++ standard headers), alternating file by file.
// Deterministic for a given machine: sorted file lists, fixed strides and
// size caps; files that are not valid UTF-8 are skipped.
#include <cstddef>
#include <string>

namespace dpgate::bench {

struct SystemCorpus {
    std::string text;
    std::size_t languages = 0;  // man page languages found (English = the top-level man*/ folders)
    std::size_t man_files = 0;  // files taken
    std::size_t header_files = 0;
    std::size_t man_bytes = 0;
    std::size_t header_bytes = 0;
};

SystemCorpus systemCorpus(std::size_t bytes, const std::string& man_root = "/usr/share/man",
                          const std::string& include_root = "/usr/include");

}  // namespace dpgate::bench
