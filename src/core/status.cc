#include "ortlite/status.h"

namespace ortlite {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kFail:
      return "Fail";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNoSuchFile:
      return "NoSuchFile";
    case StatusCode::kNoModel:
      return "NoModel";
    case StatusCode::kEngineError:
      return "EngineError";
    case StatusCode::kRuntimeException:
      return "RuntimeException";
    case StatusCode::kInvalidProtobuf:
      return "InvalidProtobuf";
    case StatusCode::kModelLoaded:
      return "ModelLoaded";
    case StatusCode::kNotImplemented:
      return "NotImplemented";
    case StatusCode::kInvalidGraph:
      return "InvalidGraph";
    case StatusCode::kEPFail:
      return "EPFail";
  }
  return "Unknown";
}

std::string join_strings(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

namespace {
std::string missing_message(const std::vector<std::string>& missing,
                            const std::vector<std::string>& fed) {
  auto list = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
    return s + "]";
  };
  return "Required inputs (" + list(missing) + ") are missing from input feed (" + list(fed) + ").";
}
}  // namespace

MissingInputsError::MissingInputsError(std::vector<std::string> missing,
                                       std::vector<std::string> fed)
    : Error(StatusCode::kInvalidArgument, missing_message(missing, fed)),
      missing_(std::move(missing)),
      fed_(std::move(fed)) {}

}  // namespace ortlite
