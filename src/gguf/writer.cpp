// GGUF writer: header serialization, data layout with alignment, streaming tensor data.
#include "gguf/writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gguf {

using util::Result;
using util::Status;

namespace {

template <class T>
std::vector<uint8_t> to_bytes(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

template <class T>
MetaValue scalar(ValueType type, T v) {
  MetaValue m;
  m.type = type;
  m.raw = to_bytes(v);
  return m;
}

template <class T>
MetaValue numeric_array(ValueType elem, std::span<const T> v) {
  MetaValue m;
  m.type = ValueType::kArray;
  m.array_type = elem;
  m.count = v.size();
  m.raw.resize(v.size_bytes());
  if (!v.empty()) std::memcpy(m.raw.data(), v.data(), v.size_bytes());
  return m;
}

class Buffer {
 public:
  void u32(uint32_t v) { append(&v, 4); }
  void u64(uint64_t v) { append(&v, 8); }
  void str(std::string_view s) {
    u64(s.size());
    append(s.data(), s.size());
  }
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void value_body(const MetaValue& v) {
    switch (v.type) {
      case ValueType::kString:
        str(v.str);
        break;
      case ValueType::kArray:
        u32(static_cast<uint32_t>(v.array_type));
        u64(v.count);
        if (v.array_type == ValueType::kString) {
          for (const auto& s : v.strings) str(s);
        } else if (v.array_type == ValueType::kArray) {
          for (const auto& n : v.nested) value_body(n);
        } else {
          append(v.raw.data(), v.raw.size());
        }
        break;
      default:
        append(v.raw.data(), v.raw.size());
        break;
    }
  }
  std::vector<uint8_t> bytes;
};

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

MetaValue MetaValue::u8(uint8_t v) {
  return scalar(ValueType::kU8, v);
}
MetaValue MetaValue::i32(int32_t v) {
  return scalar(ValueType::kI32, v);
}
MetaValue MetaValue::u32(uint32_t v) {
  return scalar(ValueType::kU32, v);
}
MetaValue MetaValue::u64(uint64_t v) {
  return scalar(ValueType::kU64, v);
}
MetaValue MetaValue::f32(float v) {
  return scalar(ValueType::kF32, v);
}
MetaValue MetaValue::f64(double v) {
  return scalar(ValueType::kF64, v);
}
MetaValue MetaValue::boolean(bool v) {
  return scalar(ValueType::kBool, static_cast<uint8_t>(v));
}
MetaValue MetaValue::string(std::string v) {
  MetaValue m;
  m.type = ValueType::kString;
  m.str = std::move(v);
  return m;
}
MetaValue MetaValue::array_i32(std::span<const int32_t> v) {
  return numeric_array(ValueType::kI32, v);
}
MetaValue MetaValue::array_u32(std::span<const uint32_t> v) {
  return numeric_array(ValueType::kU32, v);
}
MetaValue MetaValue::array_f32(std::span<const float> v) {
  return numeric_array(ValueType::kF32, v);
}
MetaValue MetaValue::array_bool(const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  return numeric_array(ValueType::kBool, std::span<const uint8_t>(bytes));
}
MetaValue MetaValue::array_strings(std::vector<std::string> v) {
  MetaValue m;
  m.type = ValueType::kArray;
  m.array_type = ValueType::kString;
  m.count = v.size();
  m.strings = std::move(v);
  return m;
}

MetaValue MetaValue::from(const Value& value) {
  MetaValue m;
  m.type = value.type();
  if (value.type() == ValueType::kString) {
    m.str = std::string(*value.as_string());
  } else if (value.type() == ValueType::kArray) {
    m.array_type = value.array_type();
    m.count = value.array_size();
    if (m.array_type == ValueType::kString) {
      m.strings.assign(value.array_strings().begin(), value.array_strings().end());
    } else if (m.array_type == ValueType::kArray) {
      for (uint64_t i = 0; i < m.count; ++i) m.nested.push_back(from(value.array_nested(i)));
    } else {
      m.raw.assign(value.array_raw().begin(), value.array_raw().end());
    }
  } else {
    m.raw.assign(value.scalar_raw().begin(), value.scalar_raw().end());
  }
  return m;
}

void Writer::set(const std::string& key, MetaValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                        std::span<const uint8_t> data) {
  PendingTensor t{.name = name, .type = type, .ne = std::move(ne), .data = data};
  tensors_.push_back(std::move(t));
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                        TensorFill fill) {
  PendingTensor t{.name = name, .type = type, .ne = std::move(ne), .fill = std::move(fill)};
  tensors_.push_back(std::move(t));
}

Writer Writer::copy_of(const File& file) {
  Writer w(file.version());
  for (const auto& kv : file.metadata()) w.set(std::string(kv.key), MetaValue::from(kv.value));
  for (const auto& t : file.tensors()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    w.add_tensor(std::string(t.name), t.type, std::move(ne), t.data);
    w.tensors_.back().fixed_offset = t.offset;
  }
  return w;
}

uint64_t Writer::alignment() const {
  for (const auto& [k, v] : metadata_) {
    if (k == "general.alignment" && v.raw.size() >= 4) {
      uint32_t a;
      std::memcpy(&a, v.raw.data(), 4);
      return a;
    }
  }
  return kDefaultAlignment;
}

Result<Writer::Layout> Writer::layout() const {
  const uint64_t align = alignment();
  if (align == 0 || (align & (align - 1)) != 0) {
    return util::errorf("gguf writer: general.alignment {} is not a power of two", align);
  }
  Buffer b;
  b.u32(kMagic);
  b.u32(version_);
  b.u64(tensors_.size());
  b.u64(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    b.str(key);
    b.u32(static_cast<uint32_t>(value.type));
    b.value_body(value);
  }
  Layout out;
  uint64_t next = 0;
  for (const auto& t : tensors_) {
    if (t.name.size() > kMaxTensorName) {
      return util::errorf(
          "gguf writer: tensor name '{}' is longer than {} bytes, which other GGUF "
          "tools refuse",
          t.name, kMaxTensorName);
    }
    if (t.ne.empty() || t.ne.size() > static_cast<size_t>(kMaxDims)) {
      return util::errorf("gguf writer: tensor '{}' has {} dimensions (1 to {} allowed)", t.name,
                          t.ne.size(), kMaxDims);
    }
    const auto& info = tensor_type_info(t.type);
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    if (t.ne[0] % info.block_size != 0) {
      return util::errorf(
          "gguf writer: tensor '{}' row length {} is not a multiple of the {} block "
          "size {}",
          t.name, t.ne[0], info.name, info.block_size);
    }
    const uint64_t n_bytes = n / info.block_size * info.block_bytes;
    if (!t.fill && t.data.size() != n_bytes) {
      return util::errorf("gguf writer: tensor '{}' has {} bytes of data but its shape needs {}",
                          t.name, t.data.size(), n_bytes);
    }
    const uint64_t offset = t.fixed_offset ? *t.fixed_offset : align_up(next, align);
    out.offsets.push_back(offset);
    next = std::max(next, offset + n_bytes);
    b.str(t.name);
    b.u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) b.u64(d);
    b.u32(static_cast<uint32_t>(t.type));
    b.u64(offset);
  }
  if (!tensors_.empty()) {
    b.bytes.resize(align_up(b.bytes.size(), align), 0);
    out.total_bytes = b.bytes.size() + align_up(next, align);
  } else {
    out.total_bytes = b.bytes.size();  // conforming writers add no padding after an empty table
  }
  out.header = std::move(b.bytes);
  return out;
}

uint64_t Writer::tensor_bytes(const PendingTensor& t) {
  const auto& info = tensor_type_info(t.type);
  uint64_t n = 1;
  for (uint64_t d : t.ne) n *= d;
  return n / info.block_size * info.block_bytes;
}

Status Writer::fill_tensors(const Layout& layout, uint8_t* base) const {
  uint8_t* data = base + layout.header.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    std::span<uint8_t> out(data + layout.offsets[i], tensor_bytes(t));
    if (t.fill) {
      Status s = t.fill(out);
      if (!s)
        return std::move(s).error().with_context(fmt::format("gguf writer: tensor '{}'", t.name));
    } else if (!out.empty()) {
      std::memcpy(out.data(), t.data.data(), out.size());
    }
  }
  return {};
}

Result<std::vector<uint8_t>> Writer::write_to_memory() const {
  HR_ASSIGN_OR_RETURN(Layout l, layout());
  std::vector<uint8_t> out(l.total_bytes, 0);
  std::memcpy(out.data(), l.header.data(), l.header.size());
  HR_TRY(fill_tensors(l, out.data()));
  return out;
}

namespace {

// Writes all of `bytes` at `offset`, retrying short writes.
Status write_at(int fd, std::span<const uint8_t> bytes, uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return util::errorf("write failed: {}", std::strerror(errno));
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return {};
}

// Runs `fill` on a shared mapping of just [offset, offset + size) of the file, so a filled
// tensor's pages go to the page cache when it is done and memory stays bounded by one tensor.
// Bytes the fill leaves alone stay a hole of the sparse file (read as zeros).
Status fill_mapped(int fd, uint64_t offset, uint64_t size, const TensorFill& fill) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t length = offset + size - start;
  void* p =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) return util::errorf("mmap failed: {}", std::strerror(errno));
  Status s = fill(std::span<uint8_t>(static_cast<uint8_t*>(p) + (offset - start), size));
  ::munmap(p, length);
  return s;
}

}  // namespace

Status Writer::write(const std::string& path) const {
  HR_ASSIGN_OR_RETURN(Layout l, layout());
  // Written under a temporary name beside the target and renamed at the end: a failed or
  // interrupted write never leaves a half-written file under `path`.
  std::string temp = path + ".XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return util::errorf("cannot create {}: {}", temp, std::strerror(errno));
  auto fail = [&](const util::Error& why) {
    ::close(fd);
    ::unlink(temp.c_str());
    return util::errorf("cannot write {} ({} bytes): {}", path, l.total_bytes, why.message());
  };
  if (::fchmod(fd, 0644) != 0 || ::ftruncate(fd, static_cast<off_t>(l.total_bytes)) != 0) {
    return fail(util::errorf("{}", std::strerror(errno)));
  }
  if (Status s = write_at(fd, l.header, 0); !s) return fail(s.error());
  const uint64_t data_start = l.header.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    const uint64_t offset = data_start + l.offsets[i];
    const uint64_t size = tensor_bytes(t);
    Status s = t.fill ? fill_mapped(fd, offset, size, t.fill) : write_at(fd, t.data, offset);
    if (!s) return fail(std::move(s).error().with_context(fmt::format("tensor '{}'", t.name)));
  }
  if (::fsync(fd) != 0) return fail(util::errorf("fsync: {}", std::strerror(errno)));
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    return util::errorf("cannot close {}: {}", temp, std::strerror(errno));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return util::errorf("cannot rename {} to {}: {}", temp, path, std::strerror(err));
  }
  return {};
}

}  // namespace gguf
