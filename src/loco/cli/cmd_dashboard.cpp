// loco dashboard RUN_DIR [RUN_DIR…] [--host H] [--port P]: the live dashboard of any run, static or elastic,
// or of several overlaid (a sweep's), from their directories' metrics.jsonl files as they grow
// (docs/dashboard.md). It only reads. Serves until SIGINT or SIGTERM.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loco/cli/commands.h"
#include "loco/cli/stop_on_signal.h"
#include "loco/cli/usage.h"
#include "loco/http/http_server.h"
#include "loco/monitor/dashboard_routes.h"
#include "loco/monitor/metrics_history.h"
#include "loco/monitor/run_files.h"
#include "loco/util/error.h"
#include "loco/util/host_port.h"

namespace loco::cli {

namespace {

struct DashboardArgs {
  std::vector<std::string> run_dirs;
  std::string host = "127.0.0.1";
  int port = 8080;
};

// The files and what was read of them; read again when the page asks, at most every half second.
class FilesDashboard {
 public:
  explicit FilesDashboard(const std::vector<std::string>& dirs)
      : files_(std::vector<std::filesystem::path>(dirs.begin(), dirs.end())) {}

  nlohmann::json status() {
    std::lock_guard<std::mutex> lock(mutex_);
    read_files();
    return files_.status(history_);
  }
  nlohmann::json history(std::uint64_t after) {
    std::lock_guard<std::mutex> lock(mutex_);
    read_files();
    return history_.since(after);
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }
  void read_files() {
    if (read_at_ >= 0 && now() - read_at_ < 0.5) return;
    files_.poll(history_);
    read_at_ = now();
  }

  using Clock = std::chrono::steady_clock;
  std::mutex mutex_;
  monitor::RunFiles files_;
  monitor::MetricsHistory history_;
  const Clock::time_point started_ = Clock::now();
  double read_at_ = -1;
};

void run_dashboard(const DashboardArgs& args) {
  const auto dashboard = std::make_shared<FilesDashboard>(args.run_dirs);
  http::HttpServer server(http::HttpServerLimits{});
  monitor::add_dashboard_routes(server, {[dashboard](const http::HttpRequest&) { return dashboard->status(); },
                                         [](const http::HttpRequest&) { return true; },
                                         [dashboard](std::uint64_t after) { return dashboard->history(after); },
                                         [](const nlohmann::json&) { return std::string(); }});
  if (!server.bind(args.host, args.port)) {
    throw IoError(fmt::format("loco dashboard cannot listen on {}:{}: the port is in use or the address is not this "
                              "host's; choose another with --port (0: any free port) or --host",
                              args.host, args.port));
  }
  const StopOnSignal stop_on_signal([&server](int) { server.stop(); });
  fmt::print("loco dashboard: {} run director{} at http://{}/ (Ctrl-C stops)\n", args.run_dirs.size(),
             args.run_dirs.size() == 1 ? "y" : "ies", reachable_host_port(args.host, server.port()));
  if (args.host != "127.0.0.1" && args.host != "localhost" && args.host != "::1") {
    fmt::print("loco dashboard: anyone who reaches {} reads these runs' metrics (it asks no token)\n",
               host_port(args.host, server.port()));
  }
  std::fflush(stdout);
  server.serve();
}

}  // namespace

void add_dashboard_command(CLI::App& app) {
  auto args = std::make_shared<DashboardArgs>();
  CLI::App* cmd = app.add_subcommand(
      "dashboard", "Serve live charts of runs from their directories' metrics.jsonl, as they train (read-only; docs/dashboard.md)");
  set_example(cmd, "loco dashboard runs/diloco runs/ddp --port 8080");
  cmd->add_option("run_dirs", args->run_dirs,
                  "run directories (train.out_dir); their replica/member subdirectories too")
      ->required()
      ->check(path_given());
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port; 0 picks a free one (printed)")->check(tcp_port())->capture_default_str();
  cmd->callback([args] { run_dashboard(*args); });
}

}  // namespace loco::cli
