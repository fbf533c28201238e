#include "gateway/platform/code_pages.hpp"

#include "gateway/platform/heap_pages.hpp"

#include <gtest/gtest.h>

#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace dpgate::gateway {
namespace {

constexpr std::uintptr_t kMiB = std::uintptr_t{1} << 20;

TEST(CodePages, TakesTheWholeHugePagesInsideTheText) {
    EXPECT_EQ(wholeHugePagesWithin(0, 2 * kMiB), (CodeSpan{0, 2 * kMiB}));
    EXPECT_EQ(wholeHugePagesWithin(4096, 6 * kMiB + 4096), (CodeSpan{2 * kMiB, 6 * kMiB}));
    EXPECT_EQ(wholeHugePagesWithin(2 * kMiB, 4 * kMiB - 1), (CodeSpan{}));
    EXPECT_EQ(wholeHugePagesWithin(2 * kMiB - 1, 4 * kMiB), (CodeSpan{2 * kMiB, 4 * kMiB}));
    EXPECT_EQ(wholeHugePagesWithin(3 * kMiB, 3 * kMiB), (CodeSpan{}));
    EXPECT_EQ(wholeHugePagesWithin(5 * kMiB, 3 * kMiB), (CodeSpan{}));
    EXPECT_EQ(wholeHugePagesWithin(UINTPTR_MAX - 4096, UINTPTR_MAX), (CodeSpan{}));
}

const char kConstantTable[] = "a constant the compiler puts in .rodata";

TEST(CodePages, FindsTheExecutablesTextAndReadOnlyData) {
    const CodeSpan text = executableText();
    const auto code = reinterpret_cast<std::uintptr_t>(&wholeHugePagesWithin);
    EXPECT_LT(text.begin, text.end);
    EXPECT_LE(text.begin, code);
    EXPECT_LT(code, text.end);
    const CodeSpan data = executableReadOnlyData();
    const auto table = reinterpret_cast<std::uintptr_t>(kConstantTable);
    EXPECT_LE(text.end, data.begin);
    EXPECT_LE(data.begin, table);
    EXPECT_LT(table, data.end);
}

// The maps line of the mapping that holds `address`, or "".
std::string mappingOf(std::uintptr_t address) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        std::uintptr_t begin = 0, end = 0;
        char dash = 0;
        std::istringstream fields(line);
        fields >> std::hex >> begin >> dash >> end;
        if (begin <= address && address < end) return line;
    }
    return {};
}

// AnonHugePages, in KiB, of the mapping that starts at `begin`.
long anonHugeKiB(std::uintptr_t begin) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool in_it = false;
    while (std::getline(smaps, line)) {
        // A mapping's line starts "begin-end "; its fields' lines start "Name:".
        const std::string first = line.substr(0, line.find(' '));
        if (!first.empty() && first.back() != ':') {
            in_it = std::stoull(line, nullptr, 16) == begin;
            continue;
        }
        if (in_it && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
    }
    return -1;
}

// What a check in a child process found wrong, one line each.
struct Findings {
    std::string text;
    void expect(bool ok, const std::string& what) {
        if (!ok) text += what + "\n";
    }
};

// Runs `check` in a forked child, so that it sees the executable as loaded
// (this process never moves anything) and its move stays in the child.
// Returns what the check reported, or how the child ended when it did not
// report.
std::string inChild(std::string (*check)()) {
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    const pid_t pid = ::fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        ::close(fds[0]);
        const std::string found = "checked\n" + check();
        ssize_t ignored = ::write(fds[1], found.data(), found.size());
        (void)ignored;
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string reported;
    char buffer[4096];
    for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) reported.append(buffer, std::size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "the child ended with status " + std::to_string(status);
    if (reported.rfind("checked\n", 0) != 0) return "the child reported nothing";
    return reported.substr(8);
}

// The bytes of the executable's file behind [begin, end) of the segment
// that is mapped at `segment`.
std::vector<char> fileBytes(std::uintptr_t segment, std::uintptr_t begin, std::uintptr_t end) {
    struct Found {
        std::uintptr_t segment;
        std::uint64_t offset = 0;
    } found{segment};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) -> int {
            auto* found = static_cast<Found*>(out);
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
                if (phdr.p_type == PT_LOAD && info->dlpi_addr + phdr.p_vaddr == found->segment)
                    found->offset = phdr.p_offset;
            }
            return 1;
        },
        &found);
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    exe.seekg(static_cast<std::streamoff>(found.offset + (begin - segment)));
    std::vector<char> bytes(end - begin);
    exe.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (exe.gcount() != static_cast<std::streamsize>(bytes.size())) bytes.clear();
    return bytes;
}

// This process's memory at [begin, end), as the kernel reads it.
std::vector<char> memoryBytes(std::uintptr_t begin, std::uintptr_t end) {
    std::ifstream memory("/proc/self/mem", std::ios::binary);
    memory.seekg(static_cast<std::streamoff>(begin));
    std::vector<char> bytes(end - begin);
    memory.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (memory.gcount() != static_cast<std::streamsize>(bytes.size())) bytes.clear();
    return bytes;
}

std::uintptr_t pageEnd(std::uintptr_t end) { return roundUpTo(end, 4096); }

std::uintptr_t hugePageEnd(std::uintptr_t end) { return roundUpTo(end, kHugePageBytes); }

std::string describe(CodeSpan moved, CodeSpan segment, const char* what) {
    return std::to_string((moved.end - moved.begin) >> 20) + " MiB of " + what + " (" +
           std::to_string((segment.end - segment.begin) >> 10) + " KiB)";
}

// That `segment` now lies in one anonymous mapping from its start to the
// next huge page, with `permissions`, holding the file's bytes and zeros
// after them, in huge pages.
void expectMoved(Findings& findings, CodeSpan segment, const char* permissions) {
    const CodeSpan moved{segment.begin, hugePageEnd(segment.end)};
    const std::string line = mappingOf(moved.begin);
    // /proc/self/maps pads low addresses with zeros (a build that is not PIE).
    const std::size_t dash = line.find('-');
    const bool one_mapping = dash != std::string::npos && std::stoull(line, nullptr, 16) == moved.begin &&
                             std::stoull(line.substr(dash + 1), nullptr, 16) == moved.end &&
                             line.find(std::string(" ") + permissions + " ") == line.find(' ');
    findings.expect(one_mapping, "not one " + std::string(permissions) + " mapping of the huge pages: " + line);
    findings.expect(line.find('/') == std::string::npos, "still the file's: " + line);
    // Read through the kernel: a sanitizer build poisons the gaps between
    // constants, and would report this process reading them itself.
    const std::vector<char> file = fileBytes(segment.begin, segment.begin, pageEnd(segment.end));
    findings.expect(!file.empty() && memoryBytes(moved.begin, pageEnd(segment.end)) == file,
                    "not the file's bytes: " + line);
    findings.expect(
        memoryBytes(pageEnd(segment.end), moved.end) == std::vector<char>(moved.end - pageEnd(segment.end), 0),
        "not zeros past the segment: " + line);
    // The copy was advised before it was first touched.
    const long huge = anonHugeKiB(moved.begin);
    findings.expect(huge >= 2048, "only " + std::to_string(huge) + " KiB in huge pages: " + line);
}

std::string movesTextAndReadOnlyData() {
    Findings findings;
    const std::string mode = thpMode();
    const CodeSpan text = executableText();
    const CodeSpan data = executableReadOnlyData();
    const std::string said = backCodeWithHugePages();
    if (mode.empty() || mode == "never") {
        findings.expect(said == "code: 4 KiB pages (the kernel's transparent huge pages are " +
                                    (mode.empty() ? std::string("absent") : mode) + ")",
                        said);
        return findings.text;
    }
    // Linked as dpgate is (tests/unit/gateway/CMakeLists.txt): each segment
    // starts on a huge page, and the next one on the huge page after its end.
    findings.expect(text.begin % kHugePageBytes == 0 && data.begin % kHugePageBytes == 0 && text.end <= data.begin,
                    "segments not aligned");
    const std::string expected = "code: " + describe({text.begin, hugePageEnd(text.end)}, text, "text") + " and " +
                                 describe({data.begin, hugePageEnd(data.end)}, data, "read-only data") +
                                 " in 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")";
    findings.expect(said == expected, "said '" + said + "', not '" + expected + "'");
    expectMoved(findings, text, "r-xp");
    expectMoved(findings, data, "r--p");
    // The checks above ran from the moved text and read tables of the moved data.
    findings.expect(wholeHugePagesWithin(kMiB, 5 * kMiB) == CodeSpan{2 * kMiB, 4 * kMiB}, "the moved code miscounts");
    return findings.text;
}

std::string leavesWhatIsMappedAfterTheText() {
    // A mapping right after the text's last page: the room is not free, so
    // only the huge pages wholly inside the text move, and the mapping stays.
    Findings findings;
    const CodeSpan text = executableText();
    const std::uintptr_t mapped_end = pageEnd(text.end);
    if (mapped_end % kHugePageBytes == 0 || thpMode() == "never" || thpMode().empty()) return {};
    void* neighbour = ::mmap(reinterpret_cast<void*>(mapped_end), 4096, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (neighbour != reinterpret_cast<void*>(mapped_end)) return "the room after the text was taken already";
    std::memcpy(neighbour, "still here", 11);
    const std::string said = backCodeWithHugePages();
    findings.expect(std::strcmp(static_cast<const char*>(neighbour), "still here") == 0, "the neighbour changed");
    findings.expect(mappingOf(mapped_end).find(" rw-p ") != std::string::npos, "gone: " + mappingOf(mapped_end));
    const CodeSpan inside = wholeHugePagesWithin(text.begin, mapped_end);
    if (inside.begin == inside.end) findings.expect(said.find("spans no whole 2 MiB page") != std::string::npos, said);
    else findings.expect(said.rfind("code: " + describe(inside, text, "text"), 0) == 0, said);
    return findings.text;
}

TEST(CodePages, MovesTextAndReadOnlyDataIntoHugePagesAndRunsOn) { EXPECT_EQ(inChild(&movesTextAndReadOnlyData), ""); }

TEST(CodePages, NothingMappedAfterASegmentIsReplaced) { EXPECT_EQ(inChild(&leavesWhatIsMappedAfterTheText), ""); }

}  // namespace
}  // namespace dpgate::gateway
