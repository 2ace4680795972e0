// Threads that help whoever calls run() do n independent items: a lane's worker stitching the
// channels of its batch (SharedScheduler), so that the host's work after a forward pass, which
// with identity by voice is most of it, is not one thread's for every channel. Several callers
// (one per lane) may run at once; each call's items are taken one at a time by the caller and by
// any idle helper, and the call returns when all of its items are done. With no helpers run() is
// a plain loop on the caller's thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace speakerseg {

class HelperTeam {
 public:
  explicit HelperTeam(int helpers);
  ~HelperTeam();
  HelperTeam(const HelperTeam&) = delete;
  HelperTeam& operator=(const HelperTeam&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // Calls item(0) ... item(n - 1), each once, on this thread and on idle helpers, and returns
  // when every call has returned. An item's failure should be its own result; should one throw
  // nonetheless, the others still run and run() rethrows the first exception once all are done.
  void run(int n, const std::function<void(int)>& item);

 private:
  struct Job {
    const std::function<void(int)>* item = nullptr;
    int n = 0, next = 0, done = 0;  // guarded by mutex_
    std::exception_ptr failure;     // the first item's exception (guarded by mutex_)
  };
  // Calls item(i); an exception it throws becomes `failure` unless that holds one already.
  static void run_item(const std::function<void(int)>& item, int i, std::exception_ptr& failure);
  // Takes and runs the job's items until none is left to take; `lock` is held between items.
  void work_on(Job& job, std::unique_lock<std::mutex>& lock);
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_helpers_, job_done_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with items left to take
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace speakerseg
