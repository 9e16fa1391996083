// The Chrome trace event format (the JSON that chrome://tracing and ui.perfetto.dev open)
// of a traced run: process 0 is the session, thread q is queue q. Each command is a
// complete event ("X", microseconds); each cross-queue wait is a flow ("s" at the end of
// the command waited for, "f" binding to the enclosing slice at the waiter's start).
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "strider/tools.h"

namespace strider {

std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& title) {
  nlohmann::json trace = nlohmann::json::array();
  std::set<int> queues;
  for (const TraceEvent& e : events) queues.insert(e.queue);
  trace.push_back({{"ph", "M"}, {"pid", 0}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", title}}}});
  for (int q : queues)
    trace.push_back({{"ph", "M"}, {"pid", 0}, {"tid", q}, {"name", "thread_name"},
                     {"args", {{"name", q == 0 ? std::string("host queue") : "queue " + std::to_string(q)}}}});
  auto us = [](double ms) { return std::isfinite(ms) ? ms * 1000.0 : 0.0; };
  int flow = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    trace.push_back({{"ph", "X"}, {"pid", 0}, {"tid", e.queue}, {"name", e.label}, {"cat", "command"},
                     {"ts", us(e.start_ms)}, {"dur", std::max(0.0, us(e.end_ms) - us(e.start_ms))},
                     {"args", {{"index", i}}}});
    for (size_t from : e.waited_for) {
      if (from >= events.size()) continue;
      const TraceEvent& waited = events[from];
      ++flow;
      trace.push_back({{"ph", "s"}, {"pid", 0}, {"tid", waited.queue}, {"name", "wait"}, {"cat", "wait"},
                       {"id", flow}, {"ts", us(waited.end_ms)}});
      trace.push_back({{"ph", "f"}, {"bp", "e"}, {"pid", 0}, {"tid", e.queue}, {"name", "wait"}, {"cat", "wait"},
                       {"id", flow}, {"ts", us(e.start_ms)}});
    }
  }
  return nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump(1);
}

}  // namespace strider
