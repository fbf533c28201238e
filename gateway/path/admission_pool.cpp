#include "gateway/path/admission_pool.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <exception>
#include <utility>

namespace dpgate::gateway {

namespace {

admission::Refused notJudged() {
    return ApiError::unavailable("dpgate is shutting down: this request was not admitted. Retry it.", "shutting_down",
                                 "server_error");
}

// A judgement and the coroutine waiting for it. The verdict, or the
// exception the work threw (it becomes the usual 500 in the session), goes
// back to the waiting coroutine's own executor.
template <class Handler>
class JudgeJob final : public AdmissionPool::Job {
public:
    JudgeJob(Handler handler, AdmissionPool::Work work)
        : work_guard_(net::make_work_guard(net::get_associated_executor(handler))),
          handler_(std::move(handler)),
          work_(std::move(work)) {}

    void run(admission::Admitter* admitter) override {
        std::exception_ptr failure;
        admission::Verdict verdict;
        if (admitter) {
            try {
                verdict = work_(*admitter);
            } catch (...) {
                failure = std::current_exception();
            }
        } else {
            verdict = notJudged();
        }
        net::post(work_guard_.get_executor(),
                  [handler = std::move(handler_), failure, verdict = std::move(verdict)]() mutable {
                      std::move(handler)(failure, std::move(verdict));
                  });
        work_guard_.reset();
    }

private:
    // The caller's io_context has work while the judgement is pending (a
    // coroutine waiting on nothing else would otherwise let run() return).
    decltype(net::make_work_guard(net::get_associated_executor(std::declval<Handler&>()))) work_guard_;
    Handler handler_;
    AdmissionPool::Work work_;
};

}  // namespace

AdmissionPool::AdmissionPool(std::size_t threads, std::size_t per_key_threads, const MakeAdmitter& make_admitter)
    : per_key_threads_(std::clamp<std::size_t>(per_key_threads, 1, std::max<std::size_t>(1, threads))) {
    threads = std::max<std::size_t>(1, threads);
    threads_.reserve(threads);
    // Each thread makes its Admitter itself, before the first job: the
    // caches it allocates are then this thread's (and its arena's) memory.
    for (std::size_t i = 0; i < threads; ++i)
        threads_.emplace_back([this, i, make_admitter] { runThread(i, make_admitter); });
}

AdmissionPool::~AdmissionPool() {
    stop();
    for (std::thread& thread : threads_)
        if (thread.joinable()) thread.join();
}

void AdmissionPool::stop() {
    std::vector<std::unique_ptr<Job>> abandoned;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        for (auto& [key, queue] : keys_)
            for (auto& job : queue.jobs) abandoned.push_back(std::move(job));
        keys_.clear();
        turn_.clear();
        queued_ = 0;
    }
    ready_.notify_all();
    for (auto& job : abandoned) job->run(nullptr);
}

std::size_t AdmissionPool::queued() const {
    std::lock_guard lock(mutex_);
    return queued_;
}

void AdmissionPool::submit(std::string_view key, std::unique_ptr<Job> job) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            auto [at, inserted] = keys_.try_emplace(std::string(key));
            if (at->second.jobs.empty()) turn_.push_back(at->first);
            at->second.jobs.push_back(std::move(job));
            ++queued_;
        }
    }
    if (job) {
        job->run(nullptr);  // stopped: answered at once
        return;
    }
    ready_.notify_one();
}

std::unique_ptr<AdmissionPool::Job> AdmissionPool::takeLocked(std::string& key) {
    for (auto it = turn_.begin(); it != turn_.end(); ++it) {
        KeyQueue& queue = keys_.at(*it);
        if (queue.running >= per_key_threads_) continue;
        std::unique_ptr<Job> job = std::move(queue.jobs.front());
        queue.jobs.pop_front();
        ++queue.running;
        --queued_;
        key = *it;
        // Served: to the back of the turn while it has more, out of it when not.
        turn_.erase(it);
        if (!queue.jobs.empty()) turn_.push_back(key);
        return job;
    }
    return nullptr;
}

void AdmissionPool::runThread(std::size_t index, const MakeAdmitter& make_admitter) {
    const std::unique_ptr<admission::Admitter> admitter = make_admitter(index);
    std::unique_lock lock(mutex_);
    while (true) {
        std::string key;
        std::unique_ptr<Job> job;
        ready_.wait(lock, [&] { return stopping_ || (job = takeLocked(key)) != nullptr; });
        if (!job) return;  // stopping
        lock.unlock();
        job->run(admitter.get());
        job.reset();
        lock.lock();
        auto at = keys_.find(key);
        if (at != keys_.end() && --at->second.running == 0 && at->second.jobs.empty()) keys_.erase(at);
        // A key below its share again may have work another thread can take.
        ready_.notify_one();
    }
}

awaitable<admission::Verdict> AdmissionPool::judge(std::string_view key, Work work) {
    auto initiate = [this, key](auto handler, Work work) {
        using Handler = decltype(handler);
        submit(key, std::make_unique<JudgeJob<Handler>>(std::move(handler), std::move(work)));
    };
    co_return co_await net::async_initiate<const net::use_awaitable_t<Executor>,
                                           void(std::exception_ptr, admission::Verdict)>(
        initiate, net::use_awaitable_t<Executor>{}, std::move(work));
}

}  // namespace dpgate::gateway
