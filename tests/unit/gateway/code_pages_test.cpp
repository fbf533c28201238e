#include "gateway/code_pages.hpp"

#include "gateway/heap_pages.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <elf.h>
#include <fstream>
#include <link.h>
#include <sys/mman.h>
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

TEST(CodePages, FindsTheExecutablesText) {
    const CodeSpan text = executableText();
    const auto here = reinterpret_cast<std::uintptr_t>(&wholeHugePagesWithin);
    EXPECT_LT(text.begin, text.end);
    EXPECT_LE(text.begin, here);
    EXPECT_LT(here, text.end);
}

std::string formatHex(std::uintptr_t value) {
    std::ostringstream out;
    out << std::hex << value;
    return out.str();
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

// The bytes of the executable's file behind its text at [begin, end).
std::vector<char> fileBytesOfText(std::uintptr_t begin, std::uintptr_t end) {
    struct Found {
        std::uintptr_t segment = 0;
        std::uint64_t offset = 0;
    } found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) -> int {
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X) != 0) {
                    *static_cast<Found*>(out) = {info->dlpi_addr + segment.p_vaddr, segment.p_offset};
                    break;
                }
            }
            return 1;
        },
        &found);
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    exe.seekg(static_cast<std::streamoff>(found.offset + (begin - found.segment)));
    std::vector<char> bytes(end - begin);
    exe.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_EQ(exe.gcount(), static_cast<std::streamsize>(bytes.size()));
    return bytes;
}

TEST(CodePages, NothingMappedAfterTheTextIsReplaced) {
    // First in the file: it needs the text as loaded, before the next test moves it all.
    // A mapping right after the text's last page: the room is not free, so
    // only the huge pages wholly inside the text move, and the mapping stays.
    const CodeSpan text = executableText();
    const std::uintptr_t mapped_end = (text.end + 4095) & ~std::uintptr_t{4095};
    if (mapped_end % kHugePageBytes == 0) GTEST_SKIP() << "the text ends on a huge page";
    void* neighbour = ::mmap(reinterpret_cast<void*>(mapped_end), 4096, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (neighbour != reinterpret_cast<void*>(mapped_end)) GTEST_SKIP() << "the room was already taken";
    std::memcpy(neighbour, "still here", 11);
    const std::string said = backCodeWithHugePages();
    EXPECT_STREQ(static_cast<const char*>(neighbour), "still here");
    EXPECT_NE(mappingOf(mapped_end).find(" rw-p "), std::string::npos) << mappingOf(mapped_end);
    const CodeSpan inside = wholeHugePagesWithin(text.begin, mapped_end);
    if (inside.begin == inside.end)
        EXPECT_NE(said.find("spans no whole 2 MiB page"), std::string::npos) << said;
    else
        EXPECT_EQ(said.rfind("code: " + std::to_string((inside.end - inside.begin) >> 20) + " MiB of text", 0), 0u)
            << said;
    ::munmap(neighbour, 4096);
}

TEST(CodePages, MovesTheTextIntoHugePagesAndKeepsRunningIt) {
    const std::string mode = thpMode();
    const CodeSpan text = executableText();
    const std::string said = backCodeWithHugePages();
    if (mode.empty() || mode == "never") {
        EXPECT_EQ(said, "code: 4 KiB pages (the kernel's transparent huge pages are " +
                            (mode.empty() ? std::string("absent") : mode) + ")");
        GTEST_SKIP() << "no transparent huge pages on this kernel";
    }
    // Linked as dpgate is (tests/unit/gateway/CMakeLists.txt): the text starts
    // on a huge page, and the next segment starts on the huge page after it.
    ASSERT_EQ(text.begin % kHugePageBytes, 0u);
    const std::uintptr_t mapped_end = (text.end + 4095) & ~std::uintptr_t{4095};
    const CodeSpan moved{text.begin, (text.end + kHugePageBytes - 1) & ~(kHugePageBytes - 1)};
    ASSERT_EQ(said, "code: " + std::to_string((moved.end - moved.begin) >> 20) + " MiB of text (" +
                        std::to_string((text.end - text.begin) >> 10) +
                        " KiB) in 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")");
    // The range is now one anonymous mapping (no file named on its line) that executes.
    const std::string line = mappingOf(moved.begin);
    EXPECT_EQ(line.rfind(formatHex(moved.begin) + "-" + formatHex(moved.end) + " r-xp ", 0), 0u) << line;
    EXPECT_EQ(line.find('/'), std::string::npos) << line;
    // Byte for byte what the file holds there, and zeros past the text.
    std::vector<char> file = fileBytesOfText(moved.begin, mapped_end);
    EXPECT_EQ(std::memcmp(file.data(), reinterpret_cast<const void*>(moved.begin), file.size()), 0);
    std::vector<char> zeros(moved.end - mapped_end, 0);
    EXPECT_EQ(std::memcmp(zeros.data(), reinterpret_cast<const void*>(mapped_end), zeros.size()), 0);
    // And in huge pages: the copy was advised before it was first touched.
    EXPECT_GE(anonHugeKiB(moved.begin), 2048) << line;
    // This test, gtest and the gateway library run on from the moved code.
    EXPECT_EQ(wholeHugePagesWithin(kMiB, 5 * kMiB), (CodeSpan{2 * kMiB, 4 * kMiB}));
}

}  // namespace
}  // namespace dpgate::gateway
