// Admission that may take long runs here, off the workers' event loops: a
// cold count of a large body takes tens of milliseconds, and a worker's
// other connections (streams mid-answer) must not wait for it.
//
// A fixed set of threads, each with an Admitter of its own (the count caches
// it keeps make a conversation's next turn cheap). Work waits in one queue
// per client key; threads take it round robin between keys, and no key holds
// more than `per_key_threads` threads at once. So one client sending a
// stream of huge requests delays its own requests, not everyone's.
#pragma once

#include "admission/admit.hpp"
#include "gateway/net/net.hpp"

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dpgate::gateway {

class AdmissionPool {
public:
    using MakeAdmitter = std::function<std::unique_ptr<admission::Admitter>(std::size_t thread_index)>;
    using Work = std::function<admission::Verdict(admission::Admitter&)>;

    // `threads` >= 1; `per_key_threads` is clamped to [1, threads].
    AdmissionPool(std::size_t threads, std::size_t per_key_threads, const MakeAdmitter& make_admitter);
    // stop(), then joins the threads.
    ~AdmissionPool();
    AdmissionPool(const AdmissionPool&) = delete;
    AdmissionPool& operator=(const AdmissionPool&) = delete;

    // Runs `work` on a pool thread with that thread's Admitter and resumes
    // the caller on its own executor with the verdict. Whatever `work`
    // reads must stay alive until then (the awaiting coroutine holds it).
    // After stop(), and for work still queued when it is called, the
    // verdict is a 503 refusal.
    awaitable<admission::Verdict> judge(std::string_view key, Work work);

    // Work already running finishes; queued work is answered with a 503
    // on its caller's executor; no new work is run.
    void stop();

    std::size_t threads() const { return threads_.size(); }
    std::size_t perKeyThreads() const { return per_key_threads_; }
    // Requests waiting for a thread, all keys together.
    std::size_t queued() const;

    // One queued judgement; run(nullptr) means it will never be judged.
    struct Job {
        virtual ~Job() = default;
        virtual void run(admission::Admitter* admitter) = 0;
    };
    void submit(std::string_view key, std::unique_ptr<Job> job);

private:
    struct KeyQueue {
        std::deque<std::unique_ptr<Job>> jobs;
        std::size_t running = 0;
    };
    void runThread(std::size_t index, const MakeAdmitter& make_admitter);
    // The next job a free thread takes, round robin over the keys whose
    // queue is not empty and who hold fewer than per_key_threads_ threads;
    // null if none. Called with mutex_ held.
    std::unique_ptr<Job> takeLocked(std::string& key);

    const std::size_t per_key_threads_;
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::unordered_map<std::string, KeyQueue> keys_;
    std::deque<std::string> turn_;  // keys with queued work, the next to be served first
    std::size_t queued_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace dpgate::gateway
