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

// The message of a LibTorch error without its C++ backtrace.
inline std::string TorchErrorMessage(const c10::Error& error) {
  return error.what_without_backtrace();
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
    return Out(absl::Status(code, absl::StrCat(context, ": ",
                                               TorchErrorMessage(e))));
  } catch (const std::exception& e) {
    return Out(absl::Status(code, absl::StrCat(context, ": ", e.what())));
  }
}

}  // namespace harmony::common

#endif  // HARMONY_COMMON_TORCH_STATUS_H_
