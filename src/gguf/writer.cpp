// GGUF writer: header serialization, data layout with alignment, streaming tensor data.
#include "gguf/writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
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
      case ValueType::kString: str(v.str); break;
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
      default: append(v.raw.data(), v.raw.size()); break;
    }
  }
  std::vector<uint8_t> bytes;
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

MetaValue MetaValue::u8(uint8_t v) { return scalar(ValueType::kU8, v); }
MetaValue MetaValue::i32(int32_t v) { return scalar(ValueType::kI32, v); }
MetaValue MetaValue::u32(uint32_t v) { return scalar(ValueType::kU32, v); }
MetaValue MetaValue::u64(uint64_t v) { return scalar(ValueType::kU64, v); }
MetaValue MetaValue::f32(float v) { return scalar(ValueType::kF32, v); }
MetaValue MetaValue::f64(double v) { return scalar(ValueType::kF64, v); }
MetaValue MetaValue::boolean(bool v) { return scalar(ValueType::kBool, static_cast<uint8_t>(v)); }
MetaValue MetaValue::string(std::string v) {
  MetaValue m;
  m.type = ValueType::kString;
  m.str = std::move(v);
  return m;
}
MetaValue MetaValue::array_i32(std::span<const int32_t> v) { return numeric_array(ValueType::kI32, v); }
MetaValue MetaValue::array_u32(std::span<const uint32_t> v) { return numeric_array(ValueType::kU32, v); }
MetaValue MetaValue::array_f32(std::span<const float> v) { return numeric_array(ValueType::kF32, v); }
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
      return util::errorf("gguf writer: tensor name '{}' is longer than {} bytes, which other GGUF "
                          "tools refuse", t.name, kMaxTensorName);
    }
    if (t.ne.empty() || t.ne.size() > static_cast<size_t>(kMaxDims)) {
      return util::errorf("gguf writer: tensor '{}' has {} dimensions (1 to {} allowed)", t.name,
                          t.ne.size(), kMaxDims);
    }
    const auto& info = tensor_type_info(t.type);
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    if (t.ne[0] % info.block_size != 0) {
      return util::errorf("gguf writer: tensor '{}' row length {} is not a multiple of the {} block "
                          "size {}", t.name, t.ne[0], info.name, info.block_size);
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

Status Writer::fill_tensors(const Layout& layout, uint8_t* base) const {
  uint8_t* data = base + layout.header.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    const auto& info = tensor_type_info(t.type);
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    std::span<uint8_t> out(data + layout.offsets[i], n / info.block_size * info.block_bytes);
    if (t.fill) {
      Status s = t.fill(out);
      if (!s) return std::move(s).error().with_context(fmt::format("gguf writer: tensor '{}'", t.name));
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

Status Writer::write(const std::string& path) const {
  HR_ASSIGN_OR_RETURN(Layout l, layout());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return util::errorf("cannot create {}: {}", path, std::strerror(errno));
  auto fail = [&](std::string_view what) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return util::errorf("cannot write {} ({} bytes): {}: {}", path, l.total_bytes, what, std::strerror(err));
  };
  if (::ftruncate(fd, static_cast<off_t>(l.total_bytes)) != 0) return fail("ftruncate");
  // The output is mapped so that tensor fills write straight into the page cache: a 4 GB
  // model is written without holding a 4 GB buffer.
  void* p = ::mmap(nullptr, l.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail("mmap");
  auto* base = static_cast<uint8_t*>(p);
  std::memcpy(base, l.header.data(), l.header.size());
  Status s = fill_tensors(l, base);
  ::munmap(p, l.total_bytes);
  if (::close(fd) != 0 && s) return util::errorf("cannot close {}: {}", path, std::strerror(errno));
  if (!s) ::unlink(path.c_str());
  return s;
}

}  // namespace gguf
