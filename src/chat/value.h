// Template values with Python semantics: kinds, truthiness, equality, ordering, str() and repr().
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "util/result.h"

namespace chat {

class Value;
class Object;
class Interpreter;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

// What a sequence is in Python beyond "a list": it decides printing, JSON, indexing, mutation.
// Filters such as map/select/items return generators; range() returns a range.
enum class ListKind : uint8_t { List, Tuple, Generator, Range, DictKeys, DictValues, DictItems };

// Containers tear down iteratively (see value.cpp), so a list nested a million deep cannot
// overflow the stack when it is freed.
struct ListData {
  ListData() = default;
  ListData(const ListData&) = default;
  ListData& operator=(const ListData&) = default;
  ~ListData();
  std::vector<Value> items;
  ListKind kind = ListKind::List;
  bool consumed = false;   // a generator iterates once, as in Python
  std::string range_repr;  // "range(0, 3)" for ListKind::Range
};

// Dict keys are values compared with Python ==; insertion order is kept (Python 3.7+ dicts).
struct DictData {
  DictData() = default;
  DictData(const DictData&) = default;
  DictData(DictData&&) = default;
  DictData& operator=(const DictData&) = default;
  DictData& operator=(DictData&&) = default;
  ~DictData();
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
  bool erase(const Value& key);
};

// Why a value is undefined; the text of the error raised when it is used (Jinja's Undefined).
struct UndefinedData {
  std::string name;        // the variable, attribute or item that was missing (repr for items)
  std::string owner_type;  // "str object", "None" …; empty when a plain variable was missing
  std::string hint;        // overrides the generated message when set
  bool security = false;   // access blocked by the immutable sandbox
  bool name_is_item = false;
  std::string message() const;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  Value() : kind_(Kind::Undefined) {}  // a plain undefined value
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s, bool safe = false);
  static Value list(std::vector<Value> items, ListKind kind = ListKind::List);
  static Value dict(DictData data);
  static Value object(std::shared_ptr<Object> object);
  static Value undefined(UndefinedData data);
  static Value undefined_name(std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_integral() || kind_ == Kind::Float; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_object() const { return kind_ == Kind::Object; }
  // Markup (a string marked safe by |safe or |escape): concatenation escapes the other side.
  bool is_safe() const { return safe_; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;   // Int or Bool
  double as_float() const;  // any number
  const std::string& str() const { return *std::get<StringPtr>(data_); }
  ListData& list() const { return *std::get<std::shared_ptr<ListData>>(data_); }
  DictData& dict() const { return *std::get<std::shared_ptr<DictData>>(data_); }
  const std::shared_ptr<Object>& object() const { return std::get<std::shared_ptr<Object>>(data_); }
  const UndefinedData& undefined_data() const;
  ListKind list_kind() const { return list().kind; }
  // Identity for containers and objects (Python `is`); equality for scalars.
  bool same_as(const Value& other) const;

 private:
  using StringPtr = std::shared_ptr<const std::string>;
  explicit Value(Kind kind) : kind_(kind) {}
  Kind kind_;
  bool safe_ = false;
  std::variant<std::monostate, bool, int64_t, double, StringPtr, std::shared_ptr<ListData>,
               std::shared_ptr<DictData>, std::shared_ptr<Object>,
               std::shared_ptr<const UndefinedData>>
      data_;
};

// Namespaces, macros, loop contexts, bound methods and built-in functions.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  // Attribute lookup; nullopt means "no such attribute" (the caller makes an Undefined).
  virtual std::optional<Value> attribute(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual util::Result<Value> call(Interpreter& interp, CallArgs& args) const;
  virtual bool is_namespace() const { return false; }
};

// The Python type name used in messages: "str", "int", "NoneType", "list", "dict" …
std::string type_name(const Value& v);
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a < b with Python ordering rules; an error for incomparable kinds.
util::Result<bool> less_than(const Value& a, const Value& b);
// Python str() (what {{ }} prints) and repr() (how values print inside containers).
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string repr_string(std::string_view s);
std::string python_float(double d);
// Iteration as in a for loop: dicts yield keys, strings code points, undefined nothing.
util::Result<std::vector<Value>> iterate(const Value& v);
// len(); an error for values without a length (numbers, None, generators).
util::Result<int64_t> length(const Value& v);
// HTML escaping of |escape and Markup concatenation.
std::string html_escape(std::string_view s);

// Beyond this depth values print as [...] and compare unequal instead of recursing further.
inline constexpr int kMaxValueDepth = 500;

// Marks a container as being printed, so that one containing itself prints as [...] (Python).
class ReprGuard {
 public:
  explicit ReprGuard(const void* container);
  ~ReprGuard();
  ReprGuard(const ReprGuard&) = delete;
  ReprGuard& operator=(const ReprGuard&) = delete;
  bool recursive() const { return recursive_; }

 private:
  bool recursive_;
};

// JSON to values; an error for data nested deeper than kMaxValueDepth.
util::Result<Value> from_json(const nlohmann::ordered_json& j);

}  // namespace chat
