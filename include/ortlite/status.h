// Error model of the core: every failure is an ortlite::Error carrying a StatusCode.
// The binding (src/python/errors.cc) is the single place that maps codes to Python
// exception classes; the names mirror onnxruntime's.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

namespace ortlite {

enum class StatusCode : int {
  kOk = 0,
  kFail,
  kInvalidArgument,
  kNoSuchFile,
  kNoModel,
  kEngineError,
  kRuntimeException,
  kInvalidProtobuf,
  kModelLoaded,
  kNotImplemented,
  kInvalidGraph,
  kEPFail,
};

const char* status_code_name(StatusCode code);

class Error : public std::runtime_error {
 public:
  Error(StatusCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  StatusCode code() const noexcept { return code_; }

 private:
  StatusCode code_;
};

// Required inputs absent from a run's feeds (Session::check_run). onnxruntime's Python API
// raises ValueError for it; the binding does the same, listing both name lists.
class MissingInputsError : public Error {
 public:
  MissingInputsError(std::vector<std::string> missing, std::vector<std::string> fed);
  const std::vector<std::string>& missing() const noexcept { return missing_; }
  const std::vector<std::string>& fed() const noexcept { return fed_; }

 private:
  std::vector<std::string> missing_, fed_;
};

// "a, b, c": names joined for a message.
std::string join_strings(const std::vector<std::string>& parts, const char* sep = ", ");

// Builds the message from any streamable parts: ORTLITE_THROW(kInvalidArgument, "x ", 3).
namespace detail {
std::string concat_message();
template <typename T, typename... Rest>
std::string concat_message(const T& first, const Rest&... rest);
}  // namespace detail

}  // namespace ortlite

#include <sstream>

namespace ortlite::detail {
inline std::string concat_message() {
  return {};
}
template <typename T, typename... Rest>
std::string concat_message(const T& first, const Rest&... rest) {
  std::ostringstream os;
  os << first;
  ((os << rest), ...);
  return os.str();
}
}  // namespace ortlite::detail

#define ORTLITE_THROW(code, ...)                      \
  throw ::ortlite::Error(::ortlite::StatusCode::code, \
                         ::ortlite::detail::concat_message(__VA_ARGS__))

#define ORTLITE_ENFORCE(cond, code, ...)           \
  do {                                             \
    if (!(cond)) ORTLITE_THROW(code, __VA_ARGS__); \
  } while (0)
