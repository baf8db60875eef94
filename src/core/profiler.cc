#include "core/profiler.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>

#include "ortlite/status.h"

namespace ortlite {

namespace {

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

int thread_number() {
  return static_cast<int>(std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0x7fffffff);
}

}  // namespace

Profiler::Profiler(std::string prefix)
    : prefix_(std::move(prefix)),
      start_(Clock::now()),
      start_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count()) {}

void Profiler::add(const std::vector<Event>& events) {
  const int tid = thread_number();
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return;
  events_.insert(events_.end(), events.begin(), events.end());
  tids_.insert(tids_.end(), events.size(), tid);
}

std::string Profiler::end() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_) return "";
  active_ = false;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d_%H-%M-%S", &tm);
  const std::string file = prefix_ + "_" + stamp + ".json";

  auto us = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - start_).count();
  };
  const long pid = static_cast<long>(getpid());
  std::string out = "[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    char head[160];
    std::snprintf(head, sizeof head,
                  "{\"cat\" : \"%s\",\"pid\" :%ld,\"tid\" :%d,\"dur\" :%lld,\"ts\" :%lld,\"ph\" : "
                  "\"X\",\"name\" :",
                  e.node ? "Node" : "Session", pid, tids_[i],
                  static_cast<long long>(us(e.end) - us(e.start)),
                  static_cast<long long>(us(e.start)));
    out += head;
    if (e.node) {
      append_json_string(out,
                         (e.node->name.empty() ? e.node->label() : e.node->name) + "_kernel_time");
      out += ",\"args\" : {\"op_name\" : ";
      append_json_string(out, e.node->op_type);
      out += ",\"provider\" : ";
      append_json_string(out, e.provider ? e.provider : "");
      out += "}}";
    } else {
      append_json_string(out, e.name);
      out += ",\"args\" : {}}";
    }
    out += i + 1 < events_.size() ? ",\n" : "\n";
  }
  out += "]\n";
  events_.clear();
  tids_.clear();
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) ORTLITE_THROW(kFail, "cannot write the profile to '", file, "'");
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok) ORTLITE_THROW(kFail, "cannot write the profile to '", file, "'");
  return file;
}

}  // namespace ortlite
