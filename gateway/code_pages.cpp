#include "gateway/code_pages.hpp"

#include "gateway/heap_pages.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <link.h>
#include <sys/mman.h>

namespace dpgate::gateway {

namespace {

constexpr std::uintptr_t kSmallPageBytes = 4096;

std::string refused(const char* call) {
    return std::string("code: 4 KiB pages (") + call + ": " + std::strerror(errno) + ")";
}

}  // namespace

CodeSpan wholeHugePagesWithin(std::uintptr_t begin, std::uintptr_t end) {
    const std::uintptr_t mask = kHugePageBytes - 1;
    if (begin > end || begin > UINTPTR_MAX - mask) return {};
    std::uintptr_t first = (begin + mask) & ~mask;
    std::uintptr_t last = end & ~mask;
    if (last <= first) return {};
    return {first, last};
}

CodeSpan executableText() {
    CodeSpan text;
    // The first object dl_iterate_phdr reports is the executable itself.
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) -> int {
            auto* span = static_cast<CodeSpan*>(out);
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& segment = info->dlpi_phdr[i];
                if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
                span->begin = info->dlpi_addr + segment.p_vaddr;
                span->end = span->begin + segment.p_memsz;
                break;
            }
            return 1;
        },
        &text);
    return text;
}

std::string backCodeWithHugePages() {
    std::string mode = thpMode();
    if (mode.empty() || mode == "never")
        return "code: 4 KiB pages (the kernel's transparent huge pages are " +
               (mode.empty() ? std::string("absent") : mode) + ")";
    const CodeSpan text = executableText();
    const std::uintptr_t text_kib = (text.end - text.begin) >> 10;

    // The room after the text, up to the next huge page: reserved, so that
    // the move below replaces nothing that something else maps there.
    const std::uintptr_t mapped_end = (text.end + kSmallPageBytes - 1) & ~(kSmallPageBytes - 1);
    const std::uintptr_t huge_end = (text.end + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
    std::uintptr_t room = mapped_end;
    if (huge_end > mapped_end &&
        ::mmap(reinterpret_cast<void*>(mapped_end), huge_end - mapped_end, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == reinterpret_cast<void*>(mapped_end))
        room = huge_end;
    auto release_room = [&] {
        if (room > mapped_end) ::munmap(reinterpret_cast<void*>(mapped_end), room - mapped_end);
    };

    const CodeSpan moved = wholeHugePagesWithin(text.begin, room);
    if (moved.begin == moved.end) {
        release_room();
        return "code: 4 KiB pages (the text, " + std::to_string(text_kib) + " KiB, spans no whole 2 MiB page)";
    }
    const std::size_t bytes = moved.end - moved.begin;
    const std::size_t text_bytes = std::min(moved.end, mapped_end) - moved.begin;

    // An aligned anonymous region: one huge page more than needed, trimmed.
    void* raw = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::string why = refused("mmap");
        release_room();
        return why;
    }
    const auto raw_begin = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t raw_end = raw_begin + bytes + kHugePageBytes;
    const std::uintptr_t region = wholeHugePagesWithin(raw_begin, raw_end).begin;
    if (region > raw_begin) ::munmap(raw, region - raw_begin);
    if (raw_end > region + bytes) ::munmap(reinterpret_cast<void*>(region + bytes), raw_end - (region + bytes));
    void* copy = reinterpret_cast<void*>(region);
    auto give_up = [&](const char* call) {
        std::string why = refused(call);
        ::munmap(copy, bytes);
        release_room();
        return why;
    };

    // Advised before the first touch, so that the copy faults in huge pages.
    if (::madvise(copy, bytes, MADV_HUGEPAGE) != 0) return give_up("madvise");
    std::memcpy(copy, reinterpret_cast<const void*>(moved.begin), text_bytes);
    if (::mprotect(copy, bytes, PROT_READ | PROT_EXEC) != 0) return give_up("mprotect");
    // One system call puts the copy's pages where the text's were, at the
    // same addresses: this function, which may be among them, returns into
    // the same bytes.
    if (::mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(moved.begin)) ==
        MAP_FAILED)
        return give_up("mremap");
    return "code: " + std::to_string(bytes >> 20) + " MiB of text (" + std::to_string(text_kib) +
           " KiB) in 2 MiB pages where the kernel has them (transparent huge pages: " + mode + ")";
}

}  // namespace dpgate::gateway
