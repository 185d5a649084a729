#include "executor/runtime/mailbox.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace harmony::executor {

void Mailbox::Post(int to, int from, int kind, Piece piece) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    boxes_[{to, from, kind}].push_back(std::move(piece));
  }
  cv_.notify_all();
}

void Mailbox::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

void Mailbox::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  boxes_.clear();
  stopped_ = false;
}

absl::StatusOr<std::map<Ref, c10::IValue>> Mailbox::Receive(int to, int from, int kind,
                                                             int offset, int size) {
  std::vector<Piece> pieces;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto& box = boxes_[{to, from, kind}];
    auto covered = [&] {
      int got = 0;
      for (const Piece& p : box) {
        const int lo = std::max(p.offset, offset);
        const int hi = std::min(p.offset + p.size, offset + size);
        if (hi > lo) got += hi - lo;
      }
      return got >= size;
    };
    cv_.wait(lock, [&] { return stopped_ || covered(); });
    if (stopped_) return absl::CancelledError("stopped: another task failed");
    std::vector<Piece> keep;
    for (Piece& p : box) {
      const bool overlaps = p.offset < offset + size && p.offset + p.size > offset;
      if (!overlaps) {
        keep.push_back(std::move(p));
      } else if (p.offset + p.size <= offset + size) {
        pieces.push_back(std::move(p));  // Wholly consumed.
      } else {
        pieces.push_back(p);  // Also needed by the next microbatch.
        keep.push_back(std::move(p));
      }
    }
    box = std::move(keep);
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  if (pieces.size() == 1 && pieces[0].offset == offset && pieces[0].size == size) {
    return std::move(pieces[0].values);
  }
  // Assemble rows [offset, offset + size) from the pieces.
  std::map<Ref, c10::IValue> out;
  for (const auto& [ref, first] : pieces.front().values) {
    if (!is_batched_(ref, first, pieces.front().size)) {
      out[ref] = first;
      continue;
    }
    std::vector<at::Tensor> parts;
    for (const Piece& p : pieces) {
      const int lo = std::max(p.offset, offset);
      const int hi = std::min(p.offset + p.size, offset + size);
      const auto value = p.values.find(ref);
      if (value == p.values.end() || !value->second.isTensor()) {
        return absl::InternalError(absl::StrCat(
            "task ", to, " receives output ", ref.second, " of vLayer ", ref.first, " from task ",
            from, " in pieces, and the piece of samples ", p.offset, "-", p.offset + p.size - 1,
            value == p.values.end() ? " lacks it" : " holds no tensor for it"));
      }
      parts.push_back(value->second.toTensor().narrow(0, lo - p.offset, hi - lo));
    }
    out[ref] = parts.size() == 1 ? parts[0].clone() : at::cat(parts, 0);
  }
  return out;
}

}  // namespace harmony::executor
