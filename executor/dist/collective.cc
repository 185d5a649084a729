#include "executor/dist/collective.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

// Debian's LibTorch is built with Gloo; its header declares the group only
// with this macro (the headers come from libgloo-dev).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace harmony::executor {
namespace {

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

absl::Status ParseStoreAddress(const std::string& host_port, CollectiveOptions& options) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the store \"", host_port, "\" is not HOST:PORT"));
  }
  options.store_host = host_port.substr(0, colon);
  options.store_port = port;
  return absl::OkStatus();
}

struct Collective::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  // Heartbeats: a connection of its own to the store, and the thread that
  // counts "alive/<rank>" up every interval until `stop` and reads every
  // rank's count, noting when each last moved (guarded by `mu`): so a rank
  // can tell who stopped first even after the store has gone too.
  c10::intrusive_ptr<c10d::TCPStore> beat_store;
  std::thread beat;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  absl::Duration interval;
  std::vector<int64_t> counts;
  std::vector<absl::Time> moved;
  std::vector<std::string> who;  // Each rank's name, once read.
  absl::Time store_lost = absl::InfiniteFuture();

  ~Group() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (beat.joinable()) beat.join();
  }
};

namespace {

std::string AliveKey(int rank) { return absl::StrCat("harmony/alive/", rank); }
std::string WhoKey(int rank) { return absl::StrCat("harmony/who/", rank); }

// "host pid N" of this process.
std::string Who() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return absl::StrCat(host, " pid ", getpid());
}

std::vector<uint8_t> ToBytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> Collective::Join(const CollectiveOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " is not in a world of ",
                                                   options.world_size));
  }
  if (options.store_port < 1 || options.store_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("store port ", options.store_port,
                                                   " is not in [1, 65535]"));
  }
  const std::string store = absl::StrCat(options.store_host, ":", options.store_port);
  auto group = std::make_unique<Group>();
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options.store_port);
    so.isServer = options.rank == 0;
    so.numWorkers = options.world_size;
    so.waitWorkers = false;
    so.timeout = Millis(options.timeout);
    group->store = c10::make_intrusive<c10d::TCPStore>(options.store_host, so);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", options.rank, ": cannot ", options.rank == 0 ? "host" : "reach",
        " the job's store at ", store, " within ", absl::FormatDuration(options.timeout), ": ",
        std::string(e.what()).substr(0, 300)));
  }
  try {
    auto o = c10d::ProcessGroupGloo::Options::create();
    o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.store_host));
    o->timeout = Millis(options.timeout);
    group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, options.rank,
                                                            options.world_size, o);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", options.rank, ": the world of ", options.world_size, " at ", store,
        " did not form within ", absl::FormatDuration(options.timeout), ": ",
        std::string(e.what()).substr(0, 300)));
  }
  // Heartbeats, so that a failed exchange can name the rank that is gone.
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options.store_port);
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = Millis(options.timeout);
    group->beat_store = c10::make_intrusive<c10d::TCPStore>(options.store_host, so);
    group->beat_store->set(WhoKey(options.rank),
                           ToBytes(options.who.empty() ? Who() : options.who));
    group->beat_store->add(AliveKey(options.rank), 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", options.rank, ": the store at ", store,
                                               " went away: ", std::string(e.what()).substr(0, 300)));
  }
  group->interval = std::min(absl::Milliseconds(500), options.timeout / 4);
  group->counts.assign(options.world_size, -1);
  group->moved.assign(options.world_size, absl::Now());
  group->who.assign(options.world_size, "");
  Group* g = group.get();
  const int rank = options.rank;
  group->beat = std::thread([g, rank] {
    std::unique_lock<std::mutex> lock(g->mu);
    while (!g->cv.wait_for(lock, absl::ToChronoMilliseconds(g->interval), [g] { return g->stop; })) {
      try {
        g->beat_store->add(AliveKey(rank), 1);
        for (size_t r = 0; r < g->counts.size(); ++r) {
          const int64_t count = g->beat_store->add(AliveKey(static_cast<int>(r)), 0);
          if (count != g->counts[r]) {
            g->counts[r] = count;
            g->moved[r] = absl::Now();
          }
          if (g->who[r].empty() && count > 0) {
            std::vector<uint8_t> who = g->beat_store->get(WhoKey(static_cast<int>(r)));
            g->who[r] = std::string(who.begin(), who.end());
          }
        }
      } catch (const std::exception&) {
        g->store_lost = absl::Now();  // Rank 0 with it; WhoIsGone tells.
        return;
      }
    }
  });
  return std::unique_ptr<Collective>(new Collective(options, std::move(group)));
}

std::string Collective::WhoIsGone() {
  // The heartbeats go on a few intervals more, so a rank that just died
  // shows as stopped; then the ranks whose counts stopped moving are gone.
  // If the store (rank 0's) went away too, only the ranks that stopped well
  // before it are; none: rank 0 is.
  // A count is seen to move up to an interval after it did, and an alive
  // rank's is seen to move at least every two intervals.
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(group_->interval * 5));
  std::lock_guard<std::mutex> lock(group_->mu);
  const absl::Time now = absl::Now();
  const absl::Duration i = group_->interval;
  std::vector<std::string> gone;
  for (int r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    const absl::Time moved = group_->moved[r];
    const bool stopped = group_->store_lost == absl::InfiniteFuture()
                             ? moved < now - i * 2.5
                             : moved < group_->store_lost - i * 2.5;
    if (!stopped) continue;
    const std::string& who = group_->who[r];
    gone.push_back(who.empty() ? absl::StrCat("rank ", r)
                               : absl::StrCat("rank ", r, " (", who, ")"));
  }
  if (gone.empty() && group_->store_lost != absl::InfiniteFuture() && options_.rank != 0) {
    return "rank 0 (the store's host)";
  }
  return absl::StrJoin(gone, ", ");
}

Collective::Collective(CollectiveOptions options, std::unique_ptr<Group> group)
    : options_(std::move(options)), group_(std::move(group)) {}

Collective::~Collective() {
  // After a failed exchange, rank 0 keeps the store (and its heartbeats) up
  // a while longer, so that the other survivors can still tell which rank
  // is gone instead of blaming rank 0 for leaving.
  if (failed_ && options_.rank == 0 && options_.world_size > 2) {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(group_->interval * 8));
  }
}

absl::Status Collective::Run(const char* what, uint64_t bytes, const std::function<void()>& op) {
  try {
    op();
  } catch (const std::exception& e) {
    failed_ = true;
    const std::string gone = WhoIsGone();
    const std::string detail = std::string(e.what()).substr(0, 300);
    if (!gone.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "rank ", options_.rank, ": ", what, " across ", options_.world_size,
          " ranks failed: lost ", gone, ", which stopped answering (", detail, ")"));
    }
    return absl::UnavailableError(absl::StrCat(
        "rank ", options_.rank, ": ", what, " across ", options_.world_size,
        " ranks failed (a peer slower than ", absl::FormatDuration(options_.timeout),
        "?): ", detail));
  }
  bytes_ += bytes;
  return absl::OkStatus();
}

namespace {

uint64_t Bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t out = 0;
  for (const at::Tensor& t : tensors) out += t.nbytes();
  return out;
}

// c10d takes a vector of tensors as one tensor's copies on several devices
// of this rank; several different tensors go as one flat buffer, copied back
// after the operation.
void OnFlat(std::vector<at::Tensor>& tensors,
            const std::function<void(std::vector<at::Tensor>&)>& op) {
  if (tensors.size() == 1 && tensors[0].is_contiguous()) {
    op(tensors);
    return;
  }
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : tensors) parts.push_back(t.reshape({-1}));
  std::vector<at::Tensor> flat = {at::cat(parts)};
  op(flat);
  int64_t at = 0;
  for (at::Tensor& t : tensors) {
    t.copy_(flat[0].narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

}  // namespace

absl::Status Collective::AllReduceSum(std::vector<at::Tensor>& tensors) {
  return Run("allreduce", Bytes(tensors), [&] {
    OnFlat(tensors, [&](std::vector<at::Tensor>& t) { group_->pg->allreduce(t)->wait(); });
  });
}

absl::StatusOr<double> Collective::AllReduceMean(double value) {
  std::vector<at::Tensor> t = {at::full({1}, value, at::kDouble)};
  absl::Status s = Run("allreduce", sizeof(double), [&] { group_->pg->allreduce(t)->wait(); });
  if (!s.ok()) return s;
  return t[0].item<double>() / options_.world_size;
}

absl::Status Collective::ReduceSumTo(std::vector<at::Tensor>& tensors, int root) {
  return Run("reduce", Bytes(tensors), [&] {
    c10d::ReduceOptions o;
    o.rootRank = root;
    OnFlat(tensors, [&](std::vector<at::Tensor>& t) { group_->pg->reduce(t, o)->wait(); });
  });
}

absl::Status Collective::Broadcast(std::vector<at::Tensor>& tensors, int root) {
  return Run("broadcast", Bytes(tensors), [&] {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    OnFlat(tensors, [&](std::vector<at::Tensor>& t) { group_->pg->broadcast(t, o)->wait(); });
  });
}

absl::Status Collective::AllGather(const at::Tensor& mine, std::vector<at::Tensor>& all) {
  all.clear();
  for (int r = 0; r < options_.world_size; ++r) all.push_back(at::empty_like(mine));
  std::vector<std::vector<at::Tensor>> out = {all};
  std::vector<at::Tensor> in = {mine};
  absl::Status s = Run("allgather", mine.nbytes(), [&] { group_->pg->allgather(out, in)->wait(); });
  if (s.ok()) all = out[0];
  return s;
}

absl::Status Collective::Barrier() {
  return Run("barrier", 0, [&] { group_->pg->barrier()->wait(); });
}

}  // namespace harmony::executor
