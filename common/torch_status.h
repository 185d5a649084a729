// The adapter between LibTorch's exceptions and absl::Status: exceptions stop
// here (STYLE.md §9).
//
// Thread-safety: stateless.

#ifndef HARMONY_COMMON_TORCH_STATUS_H_
#define HARMONY_COMMON_TORCH_STATUS_H_

#include <exception>
#include <type_traits>
#include <utility>

#include <c10/util/Exception.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

// Drops the TorchScript traceback from an error raised inside the
// interpreter: its last line ("RuntimeError: ...") says what went wrong.
inline std::string TrimScriptTraceback(std::string message) {
  if (message.find("The following operation failed in the TorchScript "
                   "interpreter") == std::string::npos) {
    return message;
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  const size_t line = message.rfind('\n');
  std::string last =
      line == std::string::npos ? message : message.substr(line + 1);
  const size_t colon = last.find("Error: ");
  if (colon != std::string::npos && colon < 40) last = last.substr(colon + 7);
  return last;
}

// The message of a LibTorch error without its C++ backtrace or script
// traceback.
inline std::string TorchErrorMessage(const c10::Error& error) {
  return TrimScriptTraceback(error.what_without_backtrace());
}

// Device out-of-memory errors say this (DeviceMemory, and CUDA's "CUDA out
// of memory"); the interpreter re-throws them as plain errors.
inline bool IsOutOfMemoryMessage(const std::string& message) {
  return message.find("out of memory on device") != std::string::npos ||
         message.find("CUDA out of memory") != std::string::npos;
}

// Runs `fn`, turning a c10::Error or std::exception into `code` with
// "<context>: <message>" (an out-of-memory error is always
// ResourceExhausted). For `fn` returning void, returns absl::Status;
// otherwise absl::StatusOr of its result.
template <typename Fn>
auto CallTorch(absl::string_view context, Fn&& fn,
               absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  using Result = std::invoke_result_t<Fn>;
  using Out = std::conditional_t<std::is_void_v<Result>, absl::Status,
                                 absl::StatusOr<Result>>;
  try {
    if constexpr (std::is_void_v<Result>) {
      std::forward<Fn>(fn)();
      return Out(absl::OkStatus());
    } else {
      return Out(std::forward<Fn>(fn)());
    }
  } catch (const c10::OutOfMemoryError& e) {
    return Out(absl::ResourceExhaustedError(
        absl::StrCat(context, ": ", TorchErrorMessage(e))));
  } catch (const c10::Error& e) {
    const std::string message = TorchErrorMessage(e);
    return Out(absl::Status(IsOutOfMemoryMessage(message)
                                ? absl::StatusCode::kResourceExhausted
                                : code,
                            absl::StrCat(context, ": ", message)));
  } catch (const std::exception& e) {
    const std::string message = TrimScriptTraceback(e.what());
    return Out(absl::Status(IsOutOfMemoryMessage(message)
                                ? absl::StatusCode::kResourceExhausted
                                : code,
                            absl::StrCat(context, ": ", message)));
  }
}

}  // namespace harmony::common

#endif  // HARMONY_COMMON_TORCH_STATUS_H_
