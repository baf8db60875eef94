// The CPU provider and the list of providers compiled in (ortlite/provider.h).
#include "ortlite/provider.h"

#include <cstring>

namespace ortlite {

namespace {

class CpuProvider final : public ExecutionProvider {
 public:
  const char* name() const override { return kCpuProvider; }
  Device device() const override { return {}; }
  Tensor allocate(DataType dtype, const Shape& shape, ProviderStream*) const override {
    return Tensor::empty(dtype, shape);
  }
  Tensor to_device(const Tensor& host, ProviderStream*) const override { return host; }
  Tensor to_host(const Tensor& t, ProviderStream*) const override { return t; }
  Tensor copy(const Tensor& t) const override { return t.clone(); }
  void write_from_host(const Tensor& dst, const void* src, size_t bytes) const override {
    if (bytes > dst.nbytes()) ORTLITE_THROW(kFail, "write_from_host: bad destination");
    if (bytes) std::memcpy(dst.raw_data(), src, bytes);
  }
  void zero(const Tensor& dst) const override {
    if (dst.nbytes()) std::memset(dst.raw_data(), 0, dst.nbytes());
  }
};

const std::shared_ptr<const ExecutionProvider>& cpu_shared() {
  static const std::shared_ptr<const ExecutionProvider> cpu = std::make_shared<CpuProvider>();
  return cpu;
}

// The device providers compiled in, in order of preference.
const ProviderEntry* const* device_entries(size_t* n) {
  static const ProviderEntry* const entries[] = {&cuda_provider_entry()};
  *n = sizeof(entries) / sizeof(entries[0]);
  return entries;
}

const ProviderEntry* find_entry(const std::string& name) {
  size_t n = 0;
  const ProviderEntry* const* e = device_entries(&n);
  for (size_t i = 0; i < n; ++i)
    if (name == e[i]->name) return e[i];
  return nullptr;
}

const ProviderEntry* entry_for(DeviceType type) {
  size_t n = 0;
  const ProviderEntry* const* e = device_entries(&n);
  for (size_t i = 0; i < n; ++i)
    if (e[i]->device_type == type) return e[i];
  return nullptr;
}

}  // namespace

const ExecutionProvider& cpu_provider() {
  return *cpu_shared();
}

bool provider_available(const std::string& name, std::string* why) {
  if (name == kCpuProvider) return true;
  // Asking for the CPU alone never loads a device library.
  if (const ProviderEntry* e = find_entry(name)) return e->available(why);
  if (why) *why = "this build of ortlite does not include it";
  return false;
}

std::vector<std::string> available_provider_names() {
  std::vector<std::string> names;
  size_t n = 0;
  const ProviderEntry* const* e = device_entries(&n);
  for (size_t i = 0; i < n; ++i)
    if (e[i]->available(nullptr)) names.push_back(e[i]->name);
  names.push_back(kCpuProvider);
  return names;
}

std::shared_ptr<const ExecutionProvider> make_provider(const std::string& name,
                                                       const ProviderOptions& options) {
  if (name == kCpuProvider) return cpu_shared();
  const ProviderEntry* e = find_entry(name);
  if (!e) ORTLITE_THROW(kEPFail, "execution provider '", name, "' is not in this build");
  return e->make(options);
}

std::shared_ptr<const ExecutionProvider> provider_of(const Tensor& t) {
  const Buffer* b = t.buffer().get();
  const Device d = b ? b->device() : Device{};
  if (d.type == DeviceType::kCPU) return cpu_shared();
  const ProviderEntry* e = entry_for(d.type);
  if (!e) ORTLITE_THROW(kEPFail, "no provider in this build holds the tensor's device");
  return e->for_device(d.id);
}

std::shared_ptr<const ExecutionProvider> provider_for_device(const std::string& device_type,
                                                             int64_t device_id) {
  if (device_type == "cpu") return cpu_shared();
  if (device_type != "cuda" && device_type != "gpu")
    ORTLITE_THROW(kInvalidArgument, "unsupported device type '", device_type,
                  "' (expected 'cpu' or 'cuda')");
  if (device_id < 0 || device_id > (1 << 20))
    ORTLITE_THROW(kInvalidArgument, "device id ", device_id, " is out of range");
  return entry_for(DeviceType::kCUDA)->for_device(static_cast<int>(device_id));
}

ProviderReport provider_report(const std::string& name) {
  const ProviderEntry* e = find_entry(name);
  if (!e) ORTLITE_THROW(kEPFail, "execution provider '", name, "' has no report");
  return e->report();
}

void set_provider_option(const std::string& name, const std::string& key,
                         const std::string& value) {
  const ProviderEntry* e = find_entry(name);
  if (!e) ORTLITE_THROW(kEPFail, "execution provider '", name, "' is not in this build");
  e->set_option(key, value);
}

}  // namespace ortlite
