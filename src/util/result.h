// Error and Result<T>: how every fallible call under src/ reports a one-line, actionable error.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace util {

// One line saying what is wrong, where, and what to do about it. Never multi-line.
class Error {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }

  // Prefixes context ("while loading X: ") while keeping the error one line.
  Error with_context(std::string_view context) const {
    return Error(fmt::format("{}: {}", context, message_));
  }

 private:
  std::string message_;
};

template <class... Args>
Error errorf(fmt::format_string<Args...> format, Args&&... args) {
  return Error(fmt::format(format, std::forward<Args>(args)...));
}

// A value or an Error. Construct from either; test with ok() or operator bool.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { assert(!ok()); return std::get<1>(v_); }
  Error&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { assert(!ok_); return error_; }
  Error&& error() && { assert(!ok_); return std::move(error_); }

 private:
  Error error_{""};
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace util

// Returns the error of a failed Result from the enclosing function.
#define HR_TRY(expr)                                      \
  do {                                                    \
    auto hr_try_result_ = (expr);                         \
    if (!hr_try_result_) return std::move(hr_try_result_).error(); \
  } while (0)

#define HR_CONCAT_INNER_(a, b) a##b
#define HR_CONCAT_(a, b) HR_CONCAT_INNER_(a, b)
// Declares `lhs` from the value of a successful Result, or returns its error.
#define HR_ASSIGN_OR_RETURN(lhs, expr) \
  HR_ASSIGN_OR_RETURN_IMPL_(HR_CONCAT_(hr_result_, __LINE__), lhs, expr)
#define HR_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp) return std::move(tmp).error();        \
  lhs = std::move(tmp).value()
