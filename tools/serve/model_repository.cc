#include "model_repository.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "http_server.h"
#include "strider/devices.h"

namespace strider::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Zeros of every input with its open dims 1: token ids and masks of zeros are valid inputs.
Result<std::map<std::string, Tensor>> warm_up_inputs(const std::vector<ValueInfo>& inputs) {
  std::map<std::string, Tensor> feed;
  for (const ValueInfo& v : inputs) {
    Shape shape = v.shape;
    for (int64_t& d : shape)
      if (d < 0) d = 1;
    STRIDER_ASSIGN_OR_RETURN(feed[v.name], Tensor::create(v.dtype, shape));
  }
  return feed;
}

// DIR/NAME/config.json over the defaults.
Result<ModelDefaults> model_options(const fs::path& folder, ModelDefaults options) {
  const fs::path config = folder / "config.json";
  if (!fs::exists(config)) return options;
  std::ifstream in(config);
  std::stringstream text;
  text << in.rdbuf();
  json c = json::parse(text.str(), nullptr, false);
  if (c.is_discarded() || !c.is_object()) return invalid_argument(config.string() + " is not a JSON object");
  for (const auto& [key, value] : c.items()) {
    if (key == "device" && value.is_string()) options.device = value.get<std::string>();
    else if (key == "dtype" && value.is_string() && parse_dtype(value.get<std::string>()))
      options.dtype = *parse_dtype(value.get<std::string>());
    else if (key == "threads" && value.is_number_integer() && value.get<int>() >= 0) options.threads = value.get<int>();
    else if (key == "instances" && value.is_number_integer() && value.get<int>() >= 1) options.instances = value.get<int>();
    else return invalid_argument(fmt::format("{}: '{}': {} is not a valid setting", config.string(), key, value.dump()));
  }
  return options;
}

// The highest numbered VERSION folder with a model.onnx.
std::optional<fs::path> latest_version(const fs::path& folder, std::string* version) {
  std::optional<fs::path> best;
  long best_number = -1;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit) || name.size() > 9) continue;
    if (!fs::exists(e.path() / "model.onnx") || std::stol(name) <= best_number) continue;
    best_number = std::stol(name);
    best = e.path() / "model.onnx";
    *version = name;
  }
  return best;
}

}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ServedModel::load(const ModelDefaults& options) {
  options_ = options;
  Result<std::vector<std::string>> devices = expand_device_list(options.device);
  if (!devices.is_ok()) {
    error = devices.status().to_string();
    return;
  }
  SessionOptions session;
  session.dtype = options.dtype;
  session.threads = options.threads;
  DynamicSessionOptions dynamic;
  // Each batch size is a plan: keep every size up to max_batch (the memory budget still
  // drops the least recently used when they do not fit).
  dynamic.max_cached_shapes = std::max(8, options.max_batch + 2);
  std::vector<std::vector<std::unique_ptr<Instance>>> by_device;
  for (const std::string& device : *devices) {
    Result<std::vector<std::unique_ptr<Instance>>> loaded = load_on(device, session, dynamic);
    if (!loaded.is_ok()) {
      error = loaded.status().to_string();
      return;
    }
    by_device.push_back(std::move(*loaded));
  }
  // Instance i on every device before instance i + 1 on any: a request takes the first free
  // instance in this order, so two requests at once run on two GPUs, not both on the first.
  for (int i = 0; i < options.instances; ++i)
    for (auto& on_device : by_device) instances_.push_back(std::move(on_device[size_t(i)]));
  in_rotation_ = int(instances_.size());
  if (options.max_batch > 1) start_batching();
}

std::string ServedModel::why_not_ready() const {
  if (!error.empty()) return error;
  std::lock_guard lock(failure_mutex_);
  return "every instance is out of rotation; the last failed with " + last_failure_;
}

Result<std::vector<Tensor>> ServedModel::run_on(Instance& instance, const std::map<std::string, Tensor>& inputs) {
  if (fault_for_testing)
    if (Status fault = fault_for_testing(instance.device, inputs); !fault.is_ok()) return fault;
  return instance.session->run(inputs);
}

bool ServedModel::keep_after(Instance& instance, const Status& failure) {
  if (failure.code() != StatusCode::kDeviceError) return true;  // the request's own
  if (instance.out_of_rotation) return false;
  // The caller holds the instance: the probe runs alone on it.
  auto feed = warm_up_inputs(instance.session->inputs());
  if (feed.is_ok() && run_on(instance, *feed).is_ok()) {
    log_json("warning", "a run failed on a device that still runs: the request's own failure",
             {{"model", name}, {"device", instance.device}, {"instance", instance.index}, {"error", failure.to_string()}});
    return true;
  }
  if (!instance.out_of_rotation.exchange(true)) {
    {
      std::lock_guard lock(failure_mutex_);
      last_failure_ = failure.to_string();
    }
    in_rotation_ -= 1;
    log_json("error", "instance out of rotation: its device failed",
             {{"model", name}, {"device", instance.device}, {"instance", instance.index}, {"error", failure.to_string()},
              {"instances_left", in_rotation_.load()}});
  }
  return false;
}

// Every session the batcher has is one of the instances'.
ServedModel::Instance& ServedModel::instance_of(const DynamicSession& session) {
  return **std::find_if(instances_.begin(), instances_.end(),
                        [&](const auto& instance) { return instance->session.get() == &session; });
}

// The model's instances on `device`: one model read, its weights held once on the device
// (DynamicSession::load_instances), each instance warmed by a run.
Result<std::vector<std::unique_ptr<ServedModel::Instance>>> ServedModel::load_on(const std::string& device,
                                                                                 const SessionOptions& session,
                                                                                 const DynamicSessionOptions& dynamic) {
  SessionOptions on_device = session;
  on_device.device = device;
  auto sessions = DynamicSession::load_instances(path, on_device, options_.instances, dynamic);
  if (!sessions.is_ok()) return sessions.status().with_context("on " + device);
  std::vector<std::unique_ptr<Instance>> instances;
  for (size_t i = 0; i < sessions->size(); ++i) {
    auto instance = std::make_unique<Instance>();
    instance->session = std::move((*sessions)[i]);
    instance->device = device;
    instance->index = int(i);
    auto feed = warm_up_inputs(instance->session->inputs());
    Status warmed = feed.is_ok() ? instance->session->run(*feed).status() : feed.status();
    if (!warmed.is_ok()) return warmed.with_context(fmt::format("instance {} on {}: warm-up run", i, device));
    instances.push_back(std::move(instance));
  }
  return instances;
}

std::vector<ServedModel::InstanceState> ServedModel::instance_states() const {
  std::vector<InstanceState> states;
  for (const auto& instance : instances_) {
    InstanceState s{instance->device, instance->index, instance->executions.load(), !instance->out_of_rotation.load()};
    if (batcher_) s.executions = batcher_->executions_of(instance->session.get());
    states.push_back(std::move(s));
  }
  return states;
}

void ServedModel::start_batching() {
  batching_note = Batcher::batchable(*instances_.front()->session);
  if (!batching_note.empty()) return;
  std::vector<DynamicSession*> sessions;
  for (auto& instance : instances_) sessions.push_back(instance->session.get());
  auto run = [this](DynamicSession& s, const std::map<std::string, Tensor>& inputs) { return run_on(instance_of(s), inputs); };
  auto keep = [this](DynamicSession& s, const Status& failure) { return keep_after(instance_of(s), failure); };
  auto batcher = std::make_unique<Batcher>(sessions, options_.max_batch, options_.max_queue_delay, options_.measure_batch,
                                           run, keep);
  if (Status prepared = batcher->prepare(); !prepared.is_ok()) {
    batching_note = "planning its batch sizes failed: " + prepared.to_string();
    return;
  }
  batcher_ = std::move(batcher);
}

Result<std::vector<Tensor>> ServedModel::infer(std::map<std::string, Tensor> inputs, const RequestLimits& limits) {
  if (!ready()) return internal_error(fmt::format("model '{}' is not ready: {}", name, why_not_ready()));
  if (in_flight_.fetch_add(1) >= options_.max_queue) {
    in_flight_.fetch_sub(1);
    return resource_exhausted(fmt::format("model '{}': {} requests are queued already", name, options_.max_queue));
  }
  Result<std::vector<Tensor>> outputs = internal_error("not run");
  if (batcher_) {
    Batcher::Outcome outcome = batcher_->submit(std::move(inputs), limits);
    stats_.queue_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(outcome.queued).count();
    stats_.compute_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(outcome.computed).count();
    outputs = std::move(outcome.outputs);
  } else {
    outputs = infer_unbatched(inputs, limits);
  }
  in_flight_.fetch_sub(1);
  stats_.last_inference_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return outputs;
}

// A request whose instance fails with its device runs again on another, until none is left.
Result<std::vector<Tensor>> ServedModel::infer_unbatched(const std::map<std::string, Tensor>& inputs,
                                                         const RequestLimits& limits) {
  const int64_t start = steady_now_ns();
  while (true) {
    Instance* chosen = nullptr;
    std::unique_lock<std::mutex> lock;
    for (auto& instance : instances_) {
      if (instance->out_of_rotation) continue;
      lock = std::unique_lock(instance->busy, std::try_to_lock);
      if (lock.owns_lock()) {
        chosen = instance.get();
        chosen->load += 1;
        break;
      }
    }
    if (!chosen) {
      chosen = least_loaded();  // counted in its load from here
      if (!chosen) return internal_error(fmt::format("model '{}' is not ready: {}", name, why_not_ready()));
      lock = std::unique_lock(chosen->busy);
    }
    struct Unload {
      Instance* instance;
      ~Unload() { instance->load -= 1; }
    } unload{chosen};
    if (chosen->out_of_rotation) continue;  // it failed while this request waited for it
    const int64_t started = steady_now_ns();
    stats_.queue_ns += started - start;
    if (std::string expired = limits.expired(Clock::now()); !expired.empty()) return resource_exhausted(expired);
    Result<std::vector<Tensor>> outputs = run_on(*chosen, inputs);
    stats_.compute_ns += steady_now_ns() - started;
    stats_.executions += 1;
    chosen->executions += 1;
    if (outputs.is_ok() || keep_after(*chosen, outputs.status())) return outputs;
  }
}

// The instance in rotation with the fewest requests waiting on it or running, counted as
// one more; null when none is in rotation. Two callers may pick the same one at once; each
// still waits its turn on its lock.
ServedModel::Instance* ServedModel::least_loaded() {
  Instance* best = nullptr;
  for (auto& instance : instances_)
    if (!instance->out_of_rotation && (!best || instance->load.load() < best->load.load())) best = instance.get();
  if (best) best->load += 1;
  return best;
}

void ServedModel::record(bool ok, int64_t start_ns) {
  const int64_t ns = steady_now_ns() - start_ns;
  if (ok) {
    stats_.success += 1;
    stats_.inferences += 1;
    stats_.success_ns += ns;
  } else {
    stats_.failure += 1;
    stats_.failure_ns += ns;
  }
}

Status ModelRepository::load_directory(const std::string& dir, const ModelDefaults& defaults) {
  if (!fs::is_directory(dir)) return invalid_argument("model repository '" + dir + "' is not a folder");
  std::vector<fs::path> folders;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_directory()) folders.push_back(e.path());
  std::sort(folders.begin(), folders.end());
  for (const fs::path& folder : folders) {
    auto model = std::make_unique<ServedModel>();
    model->name = folder.filename().string();
    std::optional<fs::path> onnx = latest_version(folder, &model->version);
    auto options = model_options(folder, defaults);
    if (!options.is_ok()) model->error = options.status().to_string();
    else if (!onnx) model->error = "no VERSION/model.onnx under " + folder.string();
    else {
      model->path = onnx->string();
      model->load(*options);
    }
    models_.push_back(std::move(model));
  }
  return Status::ok();
}

Status ModelRepository::load_model(const std::string& name, const std::string& path, const ModelDefaults& defaults) {
  if (find(name)) return invalid_argument("model '" + name + "' is given twice");
  auto model = std::make_unique<ServedModel>();
  model->name = name;
  model->path = path;
  model->load(defaults);
  models_.push_back(std::move(model));
  return Status::ok();
}

ServedModel* ModelRepository::find(const std::string& name) {
  for (auto& m : models_)
    if (m->name == name) return m.get();
  return nullptr;
}

bool ModelRepository::ready() const {
  return std::any_of(models_.begin(), models_.end(), [](const auto& m) { return m->ready(); });
}

}  // namespace strider::serve
