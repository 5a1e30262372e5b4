// Exception types. The Python layer maps them to ValueError, IndexError,
// RuntimeError, pf.IntegerOverflowError and pf.OutOfMemoryError; messages start with "[function]".
#pragma once
#include <stdexcept>
#include <string>

namespace pyflame {

// Bad argument: shape, dtype, axis, device string, value. Python: ValueError.
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A Python integer outside the range of the integer dtype it must take
// (int32_tensor + 2**40). Python: pf.IntegerOverflowError, both an
// OverflowError (what NumPy 2 raises) and a ValueError (as other bad values).
struct OverflowError : ValueError {
  using ValueError::ValueError;
};

// Index out of range. Python: IndexError.
struct IndexError : std::out_of_range {
  using std::out_of_range::out_of_range;
};

// Device or backend failure at run time. Python: RuntimeError.
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A device allocation failed after the cache was released. Python:
// pf.OutOfMemoryError (a RuntimeError).
struct OutOfMemoryError : RuntimeError {
  using RuntimeError::RuntimeError;
};

// Builds "[fn] msg".
inline std::string errmsg(const char* fn, const std::string& msg) {
  return std::string("[") + fn + "] " + msg;
}

}  // namespace pyflame
