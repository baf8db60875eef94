// The file side of model loading: memory-mapped model files and external tensor data
// confined to the model's directory. The protobuf side is onnx/reader.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "onnx/reader.h"
#include "ortlite/model.h"
#include "ortlite/model_io.h"
#include "ortlite/status.h"

namespace ortlite {
namespace {

std::string errno_text(int e) {
  return std::generic_category().message(e);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Maps `size` (> 0) bytes of an open file read-only; the buffer unmaps when released.
BufferPtr map_fd(int fd, size_t size, const std::string& what) {
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    int e = errno;
    ORTLITE_THROW(kFail, "cannot map ", what, ": ", errno_text(e));
  }
  try {
    return BufferPtr::adopt(
        Buffer::wrap(addr, size, BufferKind::kConstant, [addr, size]() { ::munmap(addr, size); }));
  } catch (...) {
    ::munmap(addr, size);
    throw;
  }
}

std::string dirname_of(const std::string& path) {
  size_t pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string real_path(const std::string& p, int* err) {
  char* r = ::realpath(p.c_str(), nullptr);
  if (!r) {
    *err = errno;
    return {};
  }
  std::string s(r);
  std::free(r);
  *err = 0;
  return s;
}

// External data for a model loaded from a file, checked as onnxruntime checks it: the
// location as written must be relative and have no '..' component, and the file it resolves
// to (symbolic links followed) must lie under the model's directory or under the directory
// of the file the model path resolves to. The second root is what makes the Hugging Face
// cache layout load: snapshots/<rev>/model.onnx and snapshots/<rev>/model.onnx_data are both
// links into blobs/, so the data resolves next to the model's real file. A link that leads
// anywhere else is refused. Each file is mapped once per load and shared by its tensors.
class FileExternalData : public onnx_reader::ExternalDataSource {
 public:
  // `model_real_dir`: the directory of the model file's resolved path, or empty.
  FileExternalData(std::string base_dir, std::string model_real_dir)
      : base_dir_(std::move(base_dir)), model_real_dir_(std::move(model_real_dir)) {}

  BufferPtr load(const onnx_reader::ExternalDataRef& ref) override {
    const std::string& loc = ref.location;
    const std::string& who = ref.tensor;
    check_location(loc, who);
    if (real_base_.empty()) {
      int err = 0;
      real_base_ = real_path(base_dir_, &err);
      if (real_base_.empty())
        ORTLITE_THROW(kFail, who, ": cannot resolve the model directory '", base_dir_,
                      "': ", errno_text(err));
    }
    std::string full = base_dir_ + "/" + loc;
    int err = 0;
    std::string real = real_path(full, &err);
    if (real.empty()) {
      if (err == ENOENT || err == ENOTDIR)
        ORTLITE_THROW(kNoSuchFile, who, ": external data file '", loc, "' does not exist in '",
                      base_dir_, "'");
      ORTLITE_THROW(kFail, who, ": cannot resolve external data file '", loc,
                    "': ", errno_text(err));
    }
    if (real == real_base_)
      ORTLITE_THROW(kInvalidGraph, who, ": external data location '", loc,
                    "' names the model directory itself, not a file");
    if (!strictly_under(real, real_base_) &&
        (model_real_dir_.empty() || !strictly_under(real, model_real_dir_))) {
      std::string allowed = "'" + real_base_ + "'";
      if (!model_real_dir_.empty() && model_real_dir_ != real_base_)
        allowed += " or, where the model file is a symbolic link, '" + model_real_dir_ + "'";
      ORTLITE_THROW(kInvalidGraph, "External data path validation failed for ", who,
                    ": external data location '", loc, "' resolves to '", real,
                    "', outside the model directory (allowed: ", allowed,
                    "; through a symbolic link?)");
    }

    File& file = open_file(real, loc, who);
    uint64_t size = file.size;
    if (ref.offset > size)
      ORTLITE_THROW(kInvalidGraph, who, ": external data offset ", ref.offset,
                    " is past the end of '", loc, "' (", size, " bytes)");
    uint64_t length = ref.has_length ? ref.length : size - ref.offset;
    if (length > size - ref.offset)
      ORTLITE_THROW(kInvalidGraph, who, ": external data offset ", ref.offset, " + length ", length,
                    " runs past the end of '", loc, "' (", size, " bytes)");
    if (length != ref.nbytes)
      ORTLITE_THROW(kInvalidGraph, who, ": external data in '", loc, "' holds ", length,
                    " bytes but the tensor needs ", ref.nbytes);
    if (ref.nbytes == 0) return constant_copy(nullptr, 0);
    const uint8_t* p = static_cast<const uint8_t*>(file.mapping->data()) + ref.offset;
    if (reinterpret_cast<uintptr_t>(p) % ref.alignment != 0) return constant_copy(p, ref.nbytes);
    BufferPtr keep = file.mapping;
    return BufferPtr::adopt(
        Buffer::wrap(const_cast<uint8_t*>(p), ref.nbytes, BufferKind::kConstant, [keep]() {}));
  }

 private:
  struct File {
    BufferPtr mapping;  // null for an empty file
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t ino = 0;
  };

  // Whether `path` is below `root` (both resolved), not `root` itself.
  static bool strictly_under(const std::string& path, const std::string& root) {
    const std::string prefix = root == "/" ? root : root + "/";
    return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0;
  }

  static void check_location(const std::string& loc, const std::string& who) {
    if (loc.find('\0') != std::string::npos)
      ORTLITE_THROW(kInvalidGraph, who, ": external data location contains a NUL byte");
    bool absolute = loc[0] == '/' || loc[0] == '\\' ||
                    (loc.size() >= 2 && loc[1] == ':' &&
                     ((loc[0] >= 'a' && loc[0] <= 'z') || (loc[0] >= 'A' && loc[0] <= 'Z')));
    if (absolute)
      ORTLITE_THROW(kInvalidGraph, who, ": external data location '", loc,
                    "' is an absolute path; it must be relative to the model's directory");
    size_t start = 0;
    while (start <= loc.size()) {
      size_t end = loc.find_first_of("/\\", start);
      if (end == std::string::npos) end = loc.size();
      if (loc.compare(start, end - start, "..") == 0)
        ORTLITE_THROW(kInvalidGraph, who, ": external data location '", loc,
                      "' has a '..' component; it must stay inside the model's directory");
      start = end + 1;
    }
  }

 public:
  static BufferPtr copy(const void* src, size_t n) { return constant_copy(src, n); }

 private:
  static BufferPtr constant_copy(const void* src, size_t n) {
    Buffer* inner = Buffer::allocate(n);
    if (n) std::memcpy(inner->data(), src, n);
    try {
      return BufferPtr::adopt(Buffer::wrap(inner->data(), n, BufferKind::kConstant,
                                           [inner]() { inner->release_ref(); }));
    } catch (...) {
      inner->release_ref();
      throw;
    }
  }

  File& open_file(const std::string& real, const std::string& loc, const std::string& who) {
    auto it = files_.find(real);
    if (it != files_.end()) return it->second;
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      int e = errno;
      ORTLITE_THROW(kFail, who, ": cannot open external data file '", loc, "': ", errno_text(e));
    }
    Fd guard(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ORTLITE_THROW(kFail, who, ": cannot stat external data file '", loc, "': ", errno_text(e));
    }
    if (!S_ISREG(st.st_mode))
      ORTLITE_THROW(kInvalidGraph, who, ": external data location '", loc,
                    "' is not a regular file");
    File f;
    f.size = static_cast<uint64_t>(st.st_size);
    f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL +
                 static_cast<int64_t>(st.st_mtim.tv_nsec);
    f.ino = static_cast<uint64_t>(st.st_ino);
    if (f.size > 0) f.mapping = map_fd(fd, static_cast<size_t>(f.size), "'" + loc + "'");
    return files_.emplace(real, std::move(f)).first->second;
  }

  std::string base_dir_;
  std::string model_real_dir_;
  std::string real_base_;
  std::map<std::string, File> files_;

 public:
  // The files opened so far, by resolved path (sorted).
  std::vector<Model::ExternalFile> opened() const {
    std::vector<Model::ExternalFile> v;
    for (const auto& [path, f] : files_)
      v.push_back({path, static_cast<int64_t>(f.size), f.mtime_ns, f.ino});
    return v;
  }
};

// LoadOptions in front of the files (or of nothing, for a model from bytes): initializers
// the session replaces get an unread placeholder; in-memory files are read from memory.
class SessionExternalData : public onnx_reader::ExternalDataSource {
 public:
  SessionExternalData(const LoadOptions& options, onnx_reader::ExternalDataSource* files)
      : options_(options), files_(files) {}

  BufferPtr load(const onnx_reader::ExternalDataRef& ref) override {
    if (!ref.name.empty() && options_.provided_initializers.count(ref.name))
      return BufferPtr::adopt(Buffer::allocate(ref.nbytes));
    const std::string& loc = ref.location;
    auto it = options_.in_memory_files.find(loc);
    if (it == options_.in_memory_files.end() && loc.compare(0, 2, "./") == 0)
      it = options_.in_memory_files.find(loc.substr(2));
    if (it != options_.in_memory_files.end()) {
      const uint64_t size = it->second ? it->second->size() : 0;
      if (ref.offset > size)
        ORTLITE_THROW(kInvalidGraph, ref.tensor, ": external data offset ", ref.offset,
                      " is past the end of the in-memory file '", loc, "' (", size, " bytes)");
      const uint64_t length = ref.has_length ? ref.length : size - ref.offset;
      if (length > size - ref.offset)
        ORTLITE_THROW(kInvalidGraph, ref.tensor, ": external data offset ", ref.offset,
                      " + length ", length, " runs past the end of the in-memory file '", loc,
                      "' (", size, " bytes)");
      if (length != ref.nbytes)
        ORTLITE_THROW(kInvalidGraph, ref.tensor, ": external data in the in-memory file '", loc,
                      "' holds ", length, " bytes but the tensor needs ", ref.nbytes);
      const uint8_t* base = size ? static_cast<const uint8_t*>(it->second->data()) : nullptr;
      return FileExternalData::copy(base ? base + ref.offset : nullptr, ref.nbytes);
    }
    if (!files_)
      ORTLITE_THROW(kFail, ref.tensor, ": uses external data (location '", loc,
                    "'), which a model from bytes can only take from "
                    "SessionOptions.add_external_initializers_from_files_in_memory");
    return files_->load(ref);
  }

 private:
  const LoadOptions& options_;
  onnx_reader::ExternalDataSource* files_;
};

}  // namespace

void drop_file_pages(const void* data, size_t size) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(data) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + size) & ~(page - 1);
  // Advice only: a failure leaves the pages in memory, which is harmless.
  if (hi > lo) (void)::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

Model load_model_from_file(const std::string& path, const LoadOptions& options) {
  if (path.empty()) ORTLITE_THROW(kNoSuchFile, "Load model failed: the path is empty");
  if (path.find('\0') != std::string::npos)
    ORTLITE_THROW(kNoSuchFile, "Load model failed: the path contains a NUL byte");
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR)
      ORTLITE_THROW(kNoSuchFile, "Load model from ", path, " failed: file does not exist");
    ORTLITE_THROW(kFail, "Load model from ", path, " failed: ", errno_text(e));
  }
  Fd guard(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ORTLITE_THROW(kFail, "Load model from ", path, " failed: ", errno_text(e));
  }
  if (S_ISDIR(st.st_mode))
    ORTLITE_THROW(kNoSuchFile, "Load model from ", path, " failed: it is a directory");
  if (!S_ISREG(st.st_mode))
    ORTLITE_THROW(kFail, "Load model from ", path, " failed: not a regular file");
  if (st.st_size == 0)
    ORTLITE_THROW(kInvalidProtobuf, "Load model from ", path, " failed: the file is empty");
  size_t size = static_cast<size_t>(st.st_size);
  BufferPtr backing = map_fd(fd, size, path);
  // The model file may be a symbolic link (a Hugging Face cache snapshot): its data may sit
  // next to the file it resolves to.
  int real_err = 0;
  const std::string real_model = real_path(path, &real_err);
  FileExternalData files(dirname_of(path), real_model.empty() ? "" : dirname_of(real_model));
  SessionExternalData session_data(options, &files);
  onnx_reader::ExternalDataSource* external = &files;
  if (!options.empty()) external = &session_data;
  try {
    Model m = onnx_reader::parse_model(static_cast<const uint8_t*>(backing->data()), size, backing,
                                       external, true);
    m.external_files = files.opened();
    return m;
  } catch (const Error& e) {
    throw Error(e.code(), "Load model from " + path + " failed: " + e.what());
  }
}

Model load_model_from_buffer(BufferPtr bytes, const std::string& base_dir,
                             const LoadOptions& options) {
  if (!bytes || bytes->size() == 0)
    ORTLITE_THROW(kInvalidProtobuf, "Load model from bytes failed: the model is empty (0 bytes)");
  const uint8_t* data = static_cast<const uint8_t*>(bytes->data());
  size_t size = bytes->size();
  std::unique_ptr<FileExternalData> files;
  if (!base_dir.empty()) files = std::make_unique<FileExternalData>(base_dir, "");
  SessionExternalData session_data(options, files.get());
  onnx_reader::ExternalDataSource* external = files.get();
  if (!options.empty()) external = &session_data;
  return onnx_reader::parse_model(data, size, std::move(bytes), external);
}

Model load_model_from_file(const std::string& path) {
  return load_model_from_file(path, LoadOptions());
}

Model load_model_from_buffer(BufferPtr bytes, const std::string& base_dir) {
  return load_model_from_buffer(std::move(bytes), base_dir, LoadOptions());
}

Tensor parse_tensor_proto(const void* data, size_t size) {
  if (!data && size) ORTLITE_THROW(kInvalidArgument, "parse_tensor_proto: null data");
  return onnx_reader::parse_tensor(static_cast<const uint8_t*>(data), size);
}

}  // namespace ortlite
