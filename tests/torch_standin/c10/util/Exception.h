// Stand-in for PyTorch's c10/util/Exception.h: c10::Error and c10::OutOfMemoryError, made from a
// source location and a message, and the C10_THROW_ERROR that throws them, as PyTorch defines
// them; tests/check_torch_graph_hooks.cpp catches them.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace c10 {
struct SourceLocation {
    const char *function;
    const char *file;
    uint32_t line;
};
class Error : public std::exception {
  public:
    Error(SourceLocation, std::string msg) : msg_(std::move(msg)) {}
    const char *what() const noexcept override { return msg_.c_str(); }
    const std::string &msg() const { return msg_; }

  private:
    std::string msg_;
};
class OutOfMemoryError : public Error {
    using Error::Error;
};
} // namespace c10

#define C10_THROW_ERROR(err_type, msg) throw ::c10::err_type({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg)
