#include "gateway/acceptance/record_store.hpp"

#include "conf/sha256_hex.hpp"

#include <fstream>
#include <sstream>

namespace dpgate::acceptance {

void RecordStore::setDir(std::string dir) {
    std::lock_guard lock(mutex_);
    if (dir == dir_) return;
    dir_ = std::move(dir);
    files_.clear();
}

void RecordStore::refresh() {
    std::string dir;
    std::map<std::string, Entry> known;
    {
        std::lock_guard lock(mutex_);
        dir = dir_;
        known = files_;
    }
    std::map<std::string, Entry> next;
    std::error_code ec;
    if (!dir.empty())
        for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
            const std::string name = item.path().filename().string();
            if (!name.starts_with("accept-") || !name.ends_with(".json")) continue;
            std::error_code fec;
            if (!item.is_regular_file(fec)) continue;
            Entry entry;
            entry.mtime = item.last_write_time(fec);
            entry.size = item.file_size(fec);
            if (fec || entry.size > 16 * 1024 * 1024) continue;  // a record is a few KB
            const std::string path = item.path().string();
            auto old = known.find(path);
            if (old != known.end() && old->second.mtime == entry.mtime && old->second.size == entry.size) {
                next.emplace(path, std::move(old->second));
                continue;
            }
            std::ifstream in(path, std::ios::binary);
            std::stringstream text;
            text << in.rdbuf();
            entry.record = parseRecord(text.str(), entry.error);
            next.emplace(path, std::move(entry));
        }
    std::lock_guard lock(mutex_);
    if (dir == dir_) files_ = std::move(next);
}

namespace {

// Newest first by the record's time, then by file name (two records of one
// second are told apart by the suffix `dpgate accept` adds).
bool newer(const AcceptanceRecord& a, const std::string& a_file, const AcceptanceRecord& b, const std::string& b_file) {
    if (a.time != b.time) return a.time > b.time;
    return a_file > b_file;
}

}  // namespace

std::optional<RecordStore::Found> RecordStore::latest(std::string_view backend, std::string_view url) const {
    std::lock_guard lock(mutex_);
    std::optional<Found> best;
    forEachLocked([&](const std::string& path, const AcceptanceRecord& r) {
        if (r.backend != backend || r.url != url) return;
        if (!best || newer(r, path, best->record, best->file)) best = Found{r, path};
    });
    return best;
}

std::optional<RecordStore::Found> RecordStore::matching(std::string_view backend, std::string_view url,
                                                        const BackendIdentity& now, std::string& why_not) const {
    std::lock_guard lock(mutex_);
    std::optional<Found> best;
    std::optional<Found> newest_passing;
    forEachLocked([&](const std::string& path, const AcceptanceRecord& r) {
        if (!r.passed || r.backend != backend || r.url != url) return;
        if (!newest_passing || newer(r, path, newest_passing->record, newest_passing->file))
            newest_passing = Found{r, path};
        if (r.identity == now && (!best || newer(r, path, best->record, best->file))) best = Found{r, path};
    });
    if (best) return best;
    if (dir_.empty() && shared_.empty()) {
        why_not = "acceptance.dir is not set, so there are no acceptance records";
    } else if (!newest_passing) {
        why_not = "it has no passing acceptance record in " + (dir_.empty() ? "etcd" : dir_) +
                  (shared_.empty() || dir_.empty() ? "" : " or etcd");
    } else {
        why_not = "its newest passing acceptance record (" + newest_passing->record.time +
                  ") does not match what it reports now:";
        const char* separator = " ";
        for (const std::string& d : identityDifferences(newest_passing->record.identity, now)) {
            why_not += separator + d;
            separator = "; ";
        }
    }
    return std::nullopt;
}

uint64_t RecordStore::acceptedWindow(std::string_view backend, std::string_view url, std::string_view model_id) const {
    std::lock_guard lock(mutex_);
    uint64_t window = 0;
    forEachLocked([&](const std::string&, const AcceptanceRecord& r) {
        if (r.passed && r.backend == backend && r.url == url && r.identity.model_id == model_id)
            window = std::max(window, r.identity.max_model_len);
    });
    return window;
}

std::vector<std::string> RecordStore::unreadable() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [path, entry] : files_)
        if (!entry.record) out.push_back(path + ": " + entry.error);
    return out;
}

void RecordStore::setShared(std::map<std::string, AcceptanceRecord> records) {
    std::map<std::string, Entry> shared;
    for (auto& [key, record] : records) shared[key].record = std::move(record);
    std::lock_guard lock(mutex_);
    shared_ = std::move(shared);
}

std::map<std::string, AcceptanceRecord> RecordStore::localPassing() const {
    std::lock_guard lock(mutex_);
    std::map<std::string, AcceptanceRecord> out;
    for (const auto& [path, entry] : files_)
        if (entry.record && entry.record->passed)
            out.emplace(conf::sha256Hex(recordJson(*entry.record)), *entry.record);
    return out;
}

}  // namespace dpgate::acceptance
