#include "executor/runtime/tensorboard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "proto/tensorboard.pb.h"

namespace harmony::executor {
namespace {

// The table of the reflected Castagnoli polynomial 0x82f63b78.
const std::array<uint32_t, 256>& Table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  const std::array<uint32_t, 256>& t = Table();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = t[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create the TensorBoard directory ", dir, ": ", ec.message()));
  }
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  const std::string path =
      absl::StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(WallTime()), ".", host, ".",
                   ::getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<EventWriter> w(new EventWriter(path, f));
  tensorboard::Event first;
  first.set_wall_time(WallTime());
  first.set_file_version("brain.Event:2");
  absl::Status s = w->WriteRecord(first.SerializeAsString());
  if (!s.ok()) return s;
  return w;
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status EventWriter::WriteRecord(const std::string& payload) {
  const uint64_t length = payload.size();
  char header[12];
  std::memcpy(header, &length, 8);  // x86-64: little endian.
  const uint32_t length_crc = MaskedCrc32c(absl::string_view(header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t payload_crc = MaskedCrc32c(payload);
  const bool ok = std::fwrite(header, 1, 12, file_) == 12 &&
                  std::fwrite(payload.data(), 1, payload.size(), file_) == payload.size() &&
                  std::fwrite(&payload_crc, 1, 4, file_) == 4 && std::fflush(file_) == 0;
  if (!ok) {
    return absl::InternalError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventWriter::AddScalars(int64_t step,
                                     const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event e;
  e.set_wall_time(WallTime());
  e.set_step(step);
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  return WriteRecord(e.SerializeAsString());
}

absl::Status EventWriter::AddIteration(const IterationMetrics& m) {
  uint64_t peak = 0;
  for (uint64_t p : m.device_peak_bytes) peak = std::max(peak, p);
  std::vector<std::pair<std::string, double>> values = {
      {"train/loss", m.loss},
      {"train/lr", m.learning_rate},
      {"train/samples_per_s", m.samples_per_s},
      {"swap/host_link_bytes", static_cast<double>(m.bytes.to_device() + m.bytes.to_host())},
      {"device/peak_bytes", static_cast<double>(peak)},
      {"swap/wait_s", m.swap_wait_s},
      {"swap/peer_wait_s", m.peer_wait_s},
  };
  if (m.clipping) values.push_back({"train/grad_norm", m.grad_norm});
  if (m.evaluated) values.push_back({"eval/loss", m.eval.loss});
  return AddScalars(m.iteration + 1, values);
}

}  // namespace harmony::executor
