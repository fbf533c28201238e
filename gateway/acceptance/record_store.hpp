// The acceptance records in acceptance.dir, as the gateway sees them: read
// again whenever refresh() is called (new and changed files only), so a
// record `dpgate accept` just wrote counts at the next flip or status.
// Thread-safe.
#pragma once

#include "gateway/acceptance/acceptance_record.hpp"

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dpgate::acceptance {

class RecordStore {
public:
    explicit RecordStore(std::string dir) : dir_(std::move(dir)) {}

    const std::string& dir() const { return dir_; }
    void setDir(std::string dir);

    // Rescans the folder. Files that are not records are skipped and listed
    // in unreadable() (a half-written file is never seen: records are
    // written to a temporary name and renamed).
    void refresh();

    struct Found {
        AcceptanceRecord record;
        std::string file;  // its path
    };

    // The newest record of this backend (name and url), passing or not.
    std::optional<Found> latest(std::string_view backend, std::string_view url) const;

    // The newest passing record of this backend whose identity equals `now`.
    // Without one, `why_not` says what the nearest candidate differs in
    // ("no passing record", or the identity differences of the newest
    // passing one).
    std::optional<Found> matching(std::string_view backend, std::string_view url, const BackendIdentity& now,
                                  std::string& why_not) const;

    // The largest max_model_len among this backend's passing records for
    // `model_id`; 0 when it has none.
    uint64_t acceptedWindow(std::string_view backend, std::string_view url, std::string_view model_id) const;

    std::vector<std::string> unreadable() const;

    // Records other replicas published (gateway/control/), by their etcd
    // key: they count as the folder's do, with the key as their "file".
    void setShared(std::map<std::string, AcceptanceRecord> records);
    // This replica's passing records, by the sha256 of their JSON: what it
    // publishes.
    std::map<std::string, AcceptanceRecord> localPassing() const;

private:
    struct Entry {
        std::filesystem::file_time_type mtime;
        uintmax_t size = 0;
        std::optional<AcceptanceRecord> record;  // nullopt: not a record
        std::string error;
    };

    std::string dir_;
    mutable std::mutex mutex_;
    std::map<std::string, Entry> files_;   // by path
    std::map<std::string, Entry> shared_;  // by etcd key

    // `visit(file, record)` for every readable record, the folder's and the shared.
    template <class Visit>
    void forEachLocked(Visit visit) const {
        for (const auto* files : {&files_, &shared_})
            for (const auto& [file, entry] : *files)
                if (entry.record) visit(file, *entry.record);
    }
};

}  // namespace dpgate::acceptance
