#include "gateway/platform/code_pages.hpp"

#include "gateway/platform/heap_pages.hpp"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dpgate::gateway {

CodeSpan wholeHugePagesWithin(std::uintptr_t begin, std::uintptr_t end) {
    if (begin > end || begin > UINTPTR_MAX - (kHugePageBytes - 1)) return {};
    std::uintptr_t first = roundUpTo(begin, kHugePageBytes);
    std::uintptr_t last = end & ~(kHugePageBytes - 1);
    if (last <= first) return {};
    return {first, last};
}

namespace {

constexpr std::uintptr_t kSmallPageBytes = 4096;

// "4 MiB of text (2781 KiB)"
std::string describe(CodeSpan moved, CodeSpan segment, const char* what) {
    return std::to_string((moved.end - moved.begin) >> 20) + " MiB of " + what + " (" +
           std::to_string((segment.end - segment.begin) >> 10) + " KiB)";
}

std::string refused(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// Copies `bytes` of this process's memory at `from` to `to` by reading
// /proc/self/mem: the kernel reads them, not this process. A sanitizer
// build poisons the gaps it leaves between constants in the read-only data,
// and its memcpy would report reading them.
bool copyThroughTheKernel(void* to, std::uintptr_t from, std::size_t bytes) {
    const int memory = ::open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (memory < 0) return false;
    std::size_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(memory, static_cast<char*>(to) + done, bytes - done, off_t(from + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            break;
        }
        done += std::size_t(n);
    }
    const int saved = errno;
    ::close(memory);
    errno = saved;
    return done == bytes;
}

// The executable's PT_LOAD segment whose flags are exactly `flags`, the
// first after `after`, as mapped.
CodeSpan executableSegment(ElfW(Word) flags, std::uintptr_t after) {
    struct Search {
        ElfW(Word) flags;
        std::uintptr_t after;
        CodeSpan found;
    } search{flags, after, {}};
    // The first object dl_iterate_phdr reports is the executable itself.
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) -> int {
            auto* search = static_cast<Search*>(out);
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                const std::uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
                if (segment.p_type != PT_LOAD || (segment.p_flags & (PF_R | PF_W | PF_X)) != search->flags ||
                    begin < search->after)
                    continue;
                search->found = {begin, begin + segment.p_memsz};
                break;
            }
            return 1;
        },
        &search);
    return search.found;
}

// Moves the whole huge pages of `segment` (as backCodeWithHugePages says)
// and gives them `protection`. Returns the span moved, empty when there was
// none; `refusal` says why a move was refused.
CodeSpan moveIntoHugePages(CodeSpan segment, int protection, std::string& refusal) {
    // The room after the segment, up to the next huge page: reserved, so
    // that the move below replaces nothing that something else maps there.
    const std::uintptr_t mapped_end = roundUpTo(segment.end, kSmallPageBytes);
    const std::uintptr_t huge_end = roundUpTo(segment.end, kHugePageBytes);
    std::uintptr_t room = mapped_end;
    if (huge_end > mapped_end &&
        ::mmap(reinterpret_cast<void*>(mapped_end), huge_end - mapped_end, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == reinterpret_cast<void*>(mapped_end))
        room = huge_end;
    auto release_room = [&] {
        if (room > mapped_end) ::munmap(reinterpret_cast<void*>(mapped_end), room - mapped_end);
    };

    const CodeSpan moved = wholeHugePagesWithin(segment.begin, room);
    if (moved.begin == moved.end) {
        release_room();
        return {};
    }
    const std::size_t bytes = moved.end - moved.begin;
    const std::size_t segment_bytes = std::min(moved.end, mapped_end) - moved.begin;

    // An aligned anonymous region: one huge page more than needed, trimmed.
    void* raw = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        refusal = refused("mmap");
        release_room();
        return {};
    }
    const auto raw_begin = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t raw_end = raw_begin + bytes + kHugePageBytes;
    const std::uintptr_t region = wholeHugePagesWithin(raw_begin, raw_end).begin;
    if (region > raw_begin) ::munmap(raw, region - raw_begin);
    if (raw_end > region + bytes) ::munmap(reinterpret_cast<void*>(region + bytes), raw_end - (region + bytes));
    void* copy = reinterpret_cast<void*>(region);
    auto give_up = [&](const char* call) {
        refusal = refused(call);
        ::munmap(copy, bytes);
        release_room();
        return CodeSpan{};
    };

    // Advised before the first touch, so that the copy faults in huge pages.
    if (::madvise(copy, bytes, MADV_HUGEPAGE) != 0) return give_up("madvise");
    if (!copyThroughTheKernel(copy, moved.begin, segment_bytes)) return give_up("reading /proc/self/mem");
    if (::mprotect(copy, bytes, protection) != 0) return give_up("mprotect");
    // One system call puts the copy's pages where the segment's were, at the
    // same addresses: this function, which may be among them, returns into
    // the same bytes.
    if (::mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(moved.begin)) == MAP_FAILED)
        return give_up("mremap");
    return moved;
}

}  // namespace

CodeSpan executableText() { return executableSegment(PF_R | PF_X, 0); }

CodeSpan executableReadOnlyData() { return executableSegment(PF_R, executableText().end); }

std::string backCodeWithHugePages() {
    std::string mode = thpMode();
    if (mode.empty() || mode == "never")
        return "code: 4 KiB pages (the kernel's transparent huge pages are " +
               (mode.empty() ? std::string("absent") : mode) + ")";
    const CodeSpan text = executableText();
    const CodeSpan data = executableSegment(PF_R, text.end);  // executableReadOnlyData(), text found once
    std::string refusal;
    const CodeSpan text_moved = moveIntoHugePages(text, PROT_READ | PROT_EXEC, refusal);
    if (text_moved.begin == text_moved.end)
        return "code: 4 KiB pages (" +
               (refusal.empty()
                    ? "the text, " + std::to_string((text.end - text.begin) >> 10) + " KiB, spans no whole 2 MiB page"
                    : refusal) +
               ")";
    std::string said = "code: " + describe(text_moved, text, "text");
    const CodeSpan data_moved = moveIntoHugePages(data, PROT_READ, refusal);
    if (data_moved.begin != data_moved.end) said += " and " + describe(data_moved, data, "read-only data");
    said += " in 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")";
    if (!refusal.empty()) said += "; the read-only data stays in 4 KiB pages (" + refusal + ")";
    return said;
}

}  // namespace dpgate::gateway
