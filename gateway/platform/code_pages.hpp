// dpgate's own machine code, and the constant tables beside it, in 2 MiB
// pages.
//
// A request runs through a few hundred kilobytes of code spread over
// several megabytes of text: the parsers, admission, routing, the relay,
// Asio's reactor; and it reads switch tables and constant tables in the
// read-only data. On 4 KiB pages that is a few hundred TLB entries, more
// than the first-level TLBs hold, and each miss in a virtual machine walks
// two sets of page tables. The kernel gives transparent huge pages to
// anonymous memory only (this kernel has no huge pages for read-only
// files), so each segment is copied into an anonymous region backed by huge
// pages and moved over the original, at the same addresses.
//
// What it costs: these pages are the process's own (not shared with other
// dpgate processes through the page cache), and `perf` no longer finds the
// symbols of the moved range (it sees anonymous memory). Profile with
// `huge_pages: false`.
#pragma once

#include <cstdint>
#include <string>

namespace dpgate::gateway {

// The whole 2 MiB pages inside [begin, end): the first boundary at or after
// begin to the last at or before end; begin == end when there is none.
struct CodeSpan {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;

    bool operator==(const CodeSpan&) const = default;
};
CodeSpan wholeHugePagesWithin(std::uintptr_t begin, std::uintptr_t end);

// `value` rounded up to a multiple of `page` (a power of two).
constexpr std::uintptr_t roundUpTo(std::uintptr_t value, std::uintptr_t page) {
    return (value + page - 1) & ~(page - 1);
}

// The executable's text: its PT_LOAD segment that executes, as mapped.
CodeSpan executableText();
// Its read-only data after the text (.rodata: constant tables, switch jump
// tables, string literals; and the unwind tables), as mapped.
CodeSpan executableReadOnlyData();

// Moves the whole huge pages of the text, then of the read-only data, into
// anonymous memory advised MADV_HUGEPAGE (config `huge_pages`). dpgate is
// linked with its segments aligned to 2 MiB (gateway/CMakeLists.txt), so
// each starts on a huge page; its last one reaches past the segment's end
// into address space that nothing maps (checked: reserved with
// MAP_FIXED_NOREPLACE), and is zeros there. Call it once, before any other thread starts: a thread running
// code in the range while it moves must not find it gone. Returns what it
// did, for the start-up log; on any refusal the text stays as it was.
std::string backCodeWithHugePages();

}  // namespace dpgate::gateway
