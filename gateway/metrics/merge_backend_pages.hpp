// The backends' own /metrics pages (vLLM's, Prometheus text format 0.0.4)
// as one page, for the client port's GET /metrics (path/metrics_tunnel.hpp):
// every sample gets the label backend="<name>" first, and the families of
// all pages are merged, so that each family's HELP and TYPE come once and
// its samples (a histogram's _bucket, _sum and _count included) stay
// together, as the format requires of one page.
//
// The pages come from backends over the network, so they are untrusted
// bytes: merging never throws, takes time linear in the input, and keeps
// only lines it can vouch for. A line it cannot read, or one over a limit
// below, is skipped and counted; what it writes parses back as it was read
// (tests/fuzz/merge_backend_pages checks that).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dpgate::metrics {

struct BackendPage {
    // A backend's configured name: conf allows 1-64 of [A-Za-z0-9._-], so
    // it is written into label values as it is, with nothing to escape.
    std::string_view backend;
    // Its /metrics body; nullopt when it could not be fetched.
    std::optional<std::string_view> text;
};

// The bounds on what one hostile page can cost. The format nests nothing:
// its depth is the number of labels on a line.
struct MergeLimits {
    size_t max_line_bytes = 64 * 1024;      // a longer line is skipped
    size_t max_labels = 64;                 // per sample (vLLM's carry 2-4); more and it is skipped
    size_t max_samples_per_page = 200'000;  // the rest of a page is skipped (8 engines of vLLM: ~10,000)
    size_t max_families = 20'000;           // across pages; lines of further families are skipped
};

struct MergedPages {
    std::string text;
    struct PageCount {
        size_t samples = 0;  // sample lines written
        size_t skipped = 0;  // HELP, TYPE and sample lines that were not
    };
    std::vector<PageCount> pages;  // one per page, in order
};

// Rules, beyond the format's:
//   - Families are written in the order they first appear; within a family,
//     page after page, each page's samples in its own order.
//   - The first page to declare a family's HELP, or its TYPE, decides it. A
//     page whose TYPE for a family differs from the one decided has its
//     samples of that family skipped (mixed types cannot share a family).
//     A page that declares no TYPE for a name takes the decided one.
//   - A family named as a histogram's _bucket, _sum or _count (or a
//     summary's _sum or _count) is dropped: Prometheus would read its lines
//     as that histogram's (or summary's) and refuse the page.
//   - A sample's own `backend` label becomes `exported_backend` (as
//     Prometheus renames a target's label that clashes with its own).
//   - Families named dpgate_* are dpgate's own (they follow this page in
//     the answer): a backend's are skipped.
//   - Values and timestamps are kept as written; HELP texts and label
//     values too (escapes checked, UTF-8 required). Other comments are
//     dropped.
// After the families comes one gauge family of dpgate's, one sample per
// page (none without pages): dpgate_backend_metrics_up{backend} 1 when the
// page was fetched, 0 when not.
MergedPages mergeBackendPages(std::span<const BackendPage> pages, const MergeLimits& limits = {});

}  // namespace dpgate::metrics
