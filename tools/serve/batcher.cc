#include "batcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace strider::serve {
namespace {

// Rows of a request: every input's dim 0, the same for all; -1 when they disagree or an
// input is a scalar (such a request runs alone and the session names what is wrong).
int64_t request_rows(const std::map<std::string, Tensor>& inputs) {
  int64_t rows = -1;
  for (const auto& [name, t] : inputs) {
    if (t.rank() == 0 || (rows >= 0 && t.shape()[0] != rows)) return -1;
    rows = t.shape()[0];
  }
  return rows;
}

// Same inputs, dtypes and sizes after dim 0.
bool mergeable(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    const Tensor &x = i->second, &y = j->second;
    if (i->first != j->first || x.dtype() != y.dtype() || x.rank() != y.rank() ||
        !std::equal(x.shape().begin() + 1, x.shape().end(), y.shape().begin() + 1))
      return false;
  }
  return true;
}

// The parts one after another, in `into` where it is large enough (a view of it: the
// caller keeps it alive and unused until the run is over), else in a new tensor.
Result<Tensor> concatenate_rows(const std::vector<const Tensor*>& parts, int64_t rows, const HostBuffer& into) {
  Shape shape = parts.front()->shape();
  shape[0] = rows;
  size_t total = 0;  // checked before any copy: parts that do not fill it exactly are a bug
  for (const Tensor* p : parts) total += p->byte_size();
  Tensor merged;
  if (into.size() >= total) {
    STRIDER_ASSIGN_OR_RETURN(merged, Tensor::borrow(parts.front()->dtype(), shape, into.data(), total));
  } else {
    merged = Tensor::for_overwrite(parts.front()->dtype(), shape);  // every byte copied below
  }
  if (total != merged.byte_size()) return internal_error("merged batch sizes disagree");
  size_t at = 0;
  for (const Tensor* p : parts) {
    std::memcpy(merged.bytes() + at, p->bytes(), p->byte_size());
    at += p->byte_size();
  }
  return merged;
}

// Rows [first, first + rows) of a batch output of `total` rows.
Result<Tensor> slice_rows(const Tensor& output, const std::string& name, int64_t first, int64_t rows, int64_t total) {
  if (output.rank() == 0 || output.shape()[0] != total || output.byte_size() % size_t(total) != 0)
    return internal_error(fmt::format("output '{}' of shape {} does not have the batch's {} rows", name,
                                      shape_to_string(output.shape()), total));
  const size_t row_bytes = output.byte_size() / size_t(total);
  Shape shape = output.shape();
  shape[0] = rows;
  return Tensor::from_bytes(output.dtype(), shape, std::span(output.bytes() + size_t(first) * row_bytes, size_t(rows) * row_bytes));
}

// Rounds over the batch sizes at load: the first plans each size, the others time it.
constexpr int kTimedRuns = 6;

// The smallest batch whose time per row is within Batcher::kMergeMargin of the best size's.
int64_t best_batch(const std::vector<int64_t>& sizes, const std::vector<double>& row_seconds) {
  const double best = *std::min_element(row_seconds.begin(), row_seconds.end());
  for (size_t i = 0; i < sizes.size(); ++i)
    if (row_seconds[i] <= best * (1.0 + Batcher::kMergeMargin)) return sizes[i];
  return sizes.back();
}

int size_bucket(int64_t rows) {
  int bucket = 0;
  while (bucket < 7 && (int64_t(1) << bucket) < rows) ++bucket;
  return bucket;
}

}  // namespace

Batcher::Batcher(std::vector<DynamicSession*> sessions, int max_batch, std::chrono::microseconds max_delay,
                 bool measured, RunFn run, KeepFn keep)
    : sessions_(std::move(sessions)), max_batch_(max_batch), max_delay_(max_delay), measured_(measured), free_(sessions_),
      run_(run ? std::move(run) : RunFn([](DynamicSession& s, const std::map<std::string, Tensor>& in) { return s.run(in); })),
      keep_(std::move(keep)), in_rotation_(int(sessions_.size())) {
  for (DynamicSession* session : sessions_) {
    merge_buffers_[session];
    executions_[session];
  }
}

std::string Batcher::batchable(const DynamicSession& session) {
  for (const auto* list : {&session.inputs(), &session.outputs()})
    for (const ValueInfo& v : *list)
      if (v.shape.empty() || v.shape[0] >= 0)
        return fmt::format("'{}' has no open dim 0 (shape {})", v.name, shape_to_string(v.shape));
  return "";
}

Status Batcher::prepare() {
  const std::vector<ValueInfo>& inputs = sessions_.front()->inputs();
  for (const ValueInfo& v : inputs)
    if (std::any_of(v.shape.begin() + 1, v.shape.end(), [](int64_t d) { return d < 0; }))
      return Status::ok();  // other open dims: each shape is planned when it first comes
  std::vector<int64_t> sizes;  // every size up to 64 (one planned on demand cost 0.1-0.3 s
                               // of a request's latency), powers of two beyond
  for (int64_t n = 1; n < max_batch_; n = n < 64 ? n + 1 : n * 2) sizes.push_back(n);
  sizes.push_back(max_batch_);
  std::vector<std::map<std::string, Tensor>> feeds;
  for (int64_t n : sizes) {
    std::map<std::string, Tensor>& feed = feeds.emplace_back();
    for (const ValueInfo& v : inputs) {
      Shape shape = v.shape;
      shape[0] = n;
      STRIDER_ASSIGN_OR_RETURN(feed[v.name], Tensor::create(v.dtype, shape));
    }
  }
  // Round after round over every size, the best of each size's timed runs: a burst of
  // other work (another model loading beside this one) then slows one run of each size,
  // not every run of the first sizes (C2f's single rows timed 0.419 ms beside a loading
  // server, 0.242 alone, and the cap came out at 6 rather than 1). Each timed run follows
  // an untimed one of its size: served, a size runs after itself, its memory in cache,
  // not after a larger batch that evicted it.
  std::vector<double> best(sizes.size(), 1e30);
  for (int round = 0; round < kTimedRuns; ++round)  // the first plans each size
    for (size_t i = 0; i < sizes.size(); ++i)
      for (DynamicSession* session : sessions_)
        for (int warm = 0; warm < 2; ++warm) {
          const Clock::time_point start = Clock::now();
          STRIDER_RETURN_IF_ERROR(session->run(feeds[i]).status().with_context(fmt::format("batch size {}", sizes[i])));
          if (round > 0 && warm == 1) best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - start).count());
        }
  std::vector<double> row_seconds;
  for (size_t i = 0; i < sizes.size(); ++i) row_seconds.push_back(best[i] / double(sizes[i]));
  if (measured_) max_batch_ = int(best_batch(sizes, row_seconds));
  row_seconds_ = std::move(row_seconds);
  return Status::ok();
}

Batcher::Outcome Batcher::submit(std::map<std::string, Tensor> inputs, const RequestLimits& limits) {
  Pending pending;
  pending.rows = request_rows(inputs);
  pending.inputs = std::move(inputs);
  pending.enqueued = Clock::now();
  pending.limits = &limits;
  std::unique_lock lock(mutex_);
  queue_.push_back(&pending);
  forming_.notify_all();  // a leader waiting out the oldest request's delay counts the rows again
  while (!pending.done) {
    if (in_rotation_ == 0) {
      answer_all_queued(last_failure_);  // this request's too, unless a batch holds it
      if (!pending.done) pending.wake.wait(lock);
      continue;
    }
    if (free_.empty() || queue_.empty()) {
      pending.wake.wait(lock);  // answered, or asked to lead
      continue;
    }
    DynamicSession* session = free_.back();  // reserved while the batch forms and runs
    free_.pop_back();
    std::vector<Pending*> batch = take_batch(lock);
    bool keep = true;
    if (!batch.empty()) {
      lock.unlock();
      const Status ran = run_batch(session, batch);
      keep = ran.is_ok() || !keep_ || keep_(*session, ran);
      lock.lock();
      if (keep) {
        answer(batch);
      } else {
        in_rotation_ -= 1;
        last_failure_ = ran;
        requeue(batch);
      }
    }
    if (keep) free_.push_back(session);
    // The caller of the oldest request left leads next (this one does if still waiting).
    if (!queue_.empty() && queue_.front() != &pending) queue_.front()->wake.notify_one();
  }
  lock.unlock();
  take_rows(pending);
  return std::move(pending.outcome);
}

void Batcher::answer(const std::vector<Pending*>& batch) {
  for (Pending* p : batch) {
    p->done = true;
    p->wake.notify_one();
  }
}

void Batcher::requeue(const std::vector<Pending*>& batch) {
  for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
    (*it)->outcome = Outcome{};
    (*it)->share = {};
    queue_.push_front(*it);
  }
}

void Batcher::answer_all_queued(const Status& why) {
  const Clock::time_point now = Clock::now();
  std::vector<Pending*> all(queue_.begin(), queue_.end());
  queue_.clear();
  for (Pending* p : all) {
    p->outcome.outputs = why.with_context("every instance of the model is out of rotation; the last failed with");
    p->outcome.queued = now - p->enqueued;
  }
  answer(all);
}

// Waits until the oldest request has waited max_delay or max_batch mergeable rows are
// queued, then takes the oldest and the mergeable ones behind it (empty if another caller
// took them meanwhile). Requests past their deadline or whose client left are answered here.
std::vector<Batcher::Pending*> Batcher::take_batch(std::unique_lock<std::mutex>& lock) {
  while (!queue_.empty()) {
    const Pending& head = *queue_.front();
    int64_t rows = 0;
    for (const auto& p : queue_)
      if (head.rows > 0 && p->rows > 0 && mergeable(head.inputs, p->inputs)) rows += p->rows;
    const Clock::time_point until = head.enqueued + max_delay_;
    if (head.rows <= 0 || rows >= max_batch_ || Clock::now() >= until) break;
    forming_.wait_until(lock, until);
  }
  std::vector<Pending*> batch, expired;
  int64_t rows = 0;
  const Clock::time_point now = Clock::now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    Pending& p = **it;
    const std::string why = p.limits->expired(now);
    const bool fits = batch.empty() || (p.rows > 0 && batch.front()->rows > 0 && rows + p.rows <= max_batch_ &&
                                        mergeable(batch.front()->inputs, p.inputs));
    if (!why.empty()) {
      p.outcome.outputs = resource_exhausted(why);
      p.outcome.queued = now - p.enqueued;
      expired.push_back(&p);
      it = queue_.erase(it);
    } else if (fits) {
      rows += std::max<int64_t>(p.rows, 0);
      batch.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  answer(expired);
  return batch;
}

Status Batcher::run_batch(DynamicSession* session, std::vector<Pending*>& batch) {
  const Clock::time_point start = Clock::now();
  int64_t total = 0;
  for (const auto& p : batch) total += std::max<int64_t>(p->rows, 0);
  Result<std::vector<Tensor>> outputs = internal_error("not run");
  if (batch.size() == 1) {
    outputs = run_(*session, batch.front()->inputs);
  } else {
    std::map<std::string, Tensor> merged;
    Status status = Status::ok();
    for (const auto& [name, first] : batch.front()->inputs) {
      std::vector<const Tensor*> parts;
      for (const auto& p : batch) parts.push_back(&p->inputs.at(name));
      Result<Tensor> m = concatenate_rows(parts, total, merge_buffer(session, name, first, total));
      if (!m.is_ok()) status = m.status();
      else merged[name] = std::move(*m);
    }
    outputs = status.is_ok() ? run_(*session, merged) : Result<std::vector<Tensor>>(status);
  }
  const Status ran = outputs.status();
  const Clock::duration computed = Clock::now() - start;
  executions_.at(session) += 1;
  stats_.batches += 1;
  stats_.rows += total;
  stats_.by_size[size_bucket(total)] += 1;
  // Each caller cuts its own rows out of the shared outputs once answered (take_rows), on
  // its own thread: cut here, the copies held the instance (on a GPU a batch of 32 C2f
  // requests has 6 MiB of outputs, copied at 5-10 GB/s by one thread).
  std::shared_ptr<const std::vector<Tensor>> shared;
  if (batch.size() > 1 && outputs.is_ok()) shared = std::make_shared<const std::vector<Tensor>>(std::move(*outputs));
  int64_t first = 0;
  for (Pending* p : batch) {
    Outcome& outcome = p->outcome;
    outcome.queued = start - p->enqueued;
    outcome.computed = computed;
    if (batch.size() == 1) outcome.outputs = std::move(outputs);
    else if (!shared) outcome.outputs = outputs.status();
    else p->share = {shared, first, total};
    first += std::max<int64_t>(p->rows, 0);
  }
  return ran;
}

// The instance's buffer for input `name`, grown for max_batch rows when a batch outgrows it.
// Only the caller holding the instance uses it. Where the device cannot give one, the
// buffer stays as it was and the batch merges into a new tensor.
const HostBuffer& Batcher::merge_buffer(DynamicSession* session, const std::string& name, const Tensor& row_of,
                                        int64_t rows) {
  HostBuffer& buffer = merge_buffers_.at(session)[name];
  const size_t row_bytes = row_of.shape()[0] > 0 ? row_of.byte_size() / size_t(row_of.shape()[0]) : 0;
  const size_t wanted = row_bytes * size_t(std::max<int64_t>(rows, max_batch_));
  if (buffer.size() < row_bytes * size_t(rows))
    if (Result<HostBuffer> made = session->allocate_host_buffer(wanted); made.is_ok()) buffer = std::move(*made);
  return buffer;
}

void Batcher::take_rows(Pending& p) const {
  if (!p.share.outputs) return;
  const std::vector<Tensor>& outputs = *p.share.outputs;
  std::vector<Tensor> mine;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Result<Tensor> rows = slice_rows(outputs[k], sessions_.front()->outputs()[k].name, p.share.first, p.rows, p.share.total);
    if (!rows.is_ok()) {
      p.outcome.outputs = rows.status();
      return;
    }
    mine.push_back(std::move(*rows));
  }
  p.outcome.outputs = std::move(mine);
  p.share = {};
}

}  // namespace strider::serve
