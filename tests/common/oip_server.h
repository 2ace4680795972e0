// A real Open Inference Protocol server for the remote engine's tests:
// scripts/servers/oip_server.py (KServe's model server running our ONNX files with ONNX Runtime)
// or scripts/servers/triton_server.py (Triton Inference Server, the same), as $SPEAKERSEG_OIP_SERVER names it with the Python of
// $SPEAKERSEG_TOOLS_PYTHON, started on loopback with free ports, stopped with SIGTERM. Where it
// listens comes from the line it prints when both models are ready: "ready grpc=HOST:PORT
// http=HOST:PORT".
#pragma once

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/test_env.h"

extern char** environ;

namespace speakerseg::test {

// Which server the tests run against: "kserve" (scripts/servers/oip_server.py, the default) or "triton"
// (scripts/servers/triton_server.py, NVIDIA Triton Inference Server), from SPEAKERSEG_OIP_SERVER_KIND.
inline std::string oip_server_kind() {
  const char* kind = std::getenv("SPEAKERSEG_OIP_SERVER_KIND");
  return kind && *kind ? kind : "kserve";
}

class OipServer {
 public:
  // Starts the server on the models beside the test's model, with `extra` arguments
  // (e.g. --delay-ms 500). started() says whether it came up; why() why not.
  explicit OipServer(const std::vector<std::string>& extra = {}) {
    const std::string model = model_path();
    std::vector<std::string> args = {env_path("SPEAKERSEG_TOOLS_PYTHON"),
                                     env_path("SPEAKERSEG_OIP_SERVER"),
                                     "--grpc-port",
                                     "0",
                                     "--http-port",
                                     "0",
                                     "--models",
                                     model.substr(0, model.find_last_of('/')),
                                     "--threads",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    int out[2];
    if (pipe(out) != 0) {
      why_ = "pipe failed";
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc != 0) {
      why_ = "cannot start " + args[0] + " " + args[1];
      pid_ = 0;
      close(out[0]);
      return;
    }
    // Its output until the ready line, or until it exits; two minutes covers a cold start of
    // Python, KServe and ONNX Runtime on a loaded machine.
    std::string seen;
    pollfd p{out[0], POLLIN, 0};
    while (poll(&p, 1, 120000) > 0) {
      char buffer[4096];
      const ssize_t n = read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      seen.append(buffer, n);
      const size_t at = seen.find("ready grpc=");
      if (at != std::string::npos && seen.find('\n', at) != std::string::npos) {
        const size_t begin = at + 11;
        address_ = seen.substr(begin, seen.find_first_of(" \n", begin) - begin);
        break;
      }
    }
    if (address_.empty()) why_ = "the server did not say it was ready; it printed:\n" + seen;
    // Whatever it prints later must not fill the pipe and stop it.
    drain_ = std::thread([fd = out[0]] {
      char buffer[4096];
      while (read(fd, buffer, sizeof buffer) > 0) {
      }
      close(fd);
    });
  }

  ~OipServer() { stop(); }

  // Another server on `port` (one that was running there and stopped): a server coming back.
  static std::unique_ptr<OipServer> on_port(const std::string& port) {
    return std::make_unique<OipServer>(std::vector<std::string>{"--grpc-port", port});
  }

  bool started() const { return !address_.empty(); }
  std::string port() const { return address_.substr(address_.rfind(':') + 1); }
  const std::string& why() const { return why_; }
  const std::string& address() const { return address_; }

  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = 0;
    }
    if (drain_.joinable()) drain_.join();
  }

 private:
  pid_t pid_ = 0;
  std::thread drain_;
  std::string address_, why_;
};

}  // namespace speakerseg::test
