#include "scheduling/helper_team.h"

#include <algorithm>

namespace speakerseg {

HelperTeam::HelperTeam(int helpers) {
  for (int i = 0; i < std::max(0, helpers); ++i) threads_.emplace_back([this] { loop(); });
}

HelperTeam::~HelperTeam() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_helpers_.notify_all();
  for (auto& t : threads_) t.join();
}

void HelperTeam::run_item(const std::function<void(int)>& item, int i,
                          std::exception_ptr& failure) {
  try {
    item(i);
  } catch (...) {
    // Not let out here: on a helper it would end the process, on the caller it would unwind
    // run() while helpers still call `item`.
    if (!failure) failure = std::current_exception();
  }
}

void HelperTeam::work_on(Job& job, std::unique_lock<std::mutex>& lock) {
  while (job.next < job.n) {
    const int i = job.next++;
    if (job.next == job.n)
      jobs_.erase(std::find_if(jobs_.begin(), jobs_.end(),
                               [&](const std::shared_ptr<Job>& j) { return j.get() == &job; }));
    lock.unlock();
    std::exception_ptr failure;
    run_item(*job.item, i, failure);
    lock.lock();
    if (failure && !job.failure) job.failure = failure;
    if (++job.done == job.n) job_done_.notify_all();
  }
}

void HelperTeam::run(int n, const std::function<void(int)>& item) {
  if (n <= 0) return;
  if (threads_.empty() || n == 1) {
    std::exception_ptr failure;
    for (int i = 0; i < n; ++i) run_item(item, i, failure);
    if (failure) std::rethrow_exception(failure);
    return;
  }
  auto job = std::make_shared<Job>();
  job->item = &item;
  job->n = n;
  std::unique_lock<std::mutex> lock(mutex_);
  jobs_.push_back(job);
  wake_helpers_.notify_all();
  work_on(*job, lock);
  // Items helpers took may still run: `item` lives on this frame, so wait for them.
  job_done_.wait(lock, [&] { return job->done == job->n; });
  if (job->failure) std::rethrow_exception(job->failure);
}

void HelperTeam::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_helpers_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    // Held by the deque and by its caller until every item is done.
    std::shared_ptr<Job> job = jobs_.front();
    work_on(*job, lock);
  }
}

}  // namespace speakerseg
