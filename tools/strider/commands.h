// The subcommands of the `strider` tool: each adds itself to the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_common.h"

namespace strider::cli {

struct RunOptions {
  ModelOptions model;
  std::string output_dir;
  bool selected = false;
};
void add_run_command(CLI::App& app, RunOptions& options);
int run_command(const RunOptions& options);

struct CheckOptions {
  ModelOptions model;
  std::string expected_dir;
  std::optional<double> rtol, atol;
  std::string json_file;
  bool selected = false;
};
void add_check_command(CLI::App& app, CheckOptions& options);
int check_command(const CheckOptions& options);
// What `check --json` writes (the figures per data set and output, options, version, model
// hash), printing the CLI's lines too when `print`; for the CLI and the Python package.
Result<nlohmann::json> check_report(const CheckOptions& options, bool print);

struct InspectOptions {
  ModelOptions model;
  std::string json_file, svg_file;
  bool selected = false;
};
void add_inspect_command(CLI::App& app, InspectOptions& options);
int inspect_command(const InspectOptions& options);
// What `inspect --json` writes: the plan's figures and steps.
Result<std::string> inspect_report(const InspectOptions& options);

struct BenchOptions {
  ModelOptions model;
  int warmup = 20;
  int iterations = 200;
  bool profile = false;  // per-step device times, the slowest first
  // The device's ceilings for the profile's "% of ceiling": memory GB/s and TFLOP/s of the
  // compute dtype ("4300:790"); empty: achieved figures only.
  std::string ceilings;
  int sessions = 1;  // > 1: also that many sessions run at once, each from its own thread
  double link_gbps = 0;  // > 0: the host link's speed, for run()'s floor
  std::string json_file;
  std::string trace_file;  // non-empty: a Chrome trace of one more run is written here
  bool selected = false;
};
void add_bench_command(CLI::App& app, BenchOptions& options);
int bench_command(const BenchOptions& options);

struct ServeOptions {
  std::string repository;
  std::vector<std::string> models;  // NAME=PATH
  std::string host = "0.0.0.0";
  int http_port = 8080;
  int grpc_port = 8081;
  std::string port_file;
  std::string device = "cpu";
  std::string dtype = "f32";
  int threads = 0;
  int instances = 1;
  int max_queue = 64;
  int max_batch = 0;
  int max_queue_delay_us = 0;
  std::string batch_cap = "measured";
  int http_threads = 0;
  int max_body_mb = 256;
  bool log_requests = false;
  bool selected = false;
};
void add_serve_command(CLI::App& app, ServeOptions& options);
int serve_command(const ServeOptions& options);

}  // namespace strider::cli
