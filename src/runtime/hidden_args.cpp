#include "runtime/hidden_args.h"

#include <cstring>
#include <mutex>

#include "support/error.h"

namespace metile {

namespace {

// The split_k workspace's bound: a split_k whose workspace does not fit is refused.
constexpr uint64_t kSplitKWorkspaceBytes = uint64_t{256} << 20;
constexpr uint32_t kMaxGridZ = 65535;  // CUDA's gridDim.z limit, the strictest device's

// One launch's split-K state: n, and the workspace its arguments point into.
struct SplitLaunch {
  int64_t parts = 1;
  std::shared_ptr<Buffer> memory;
  uint64_t workspace_offset = 0;
};

struct Hidden {
  std::shared_ptr<const Program> lowered;
  TileHiddenArgs args;
  std::shared_ptr<Device> device;
  // The split_k workspace, shared by the kernel's launches (ordered on the device's queue; each
  // last part leaves its counter 0 for the next): grown, never shrunk.
  mutable std::mutex workspace_mutex;
  mutable std::shared_ptr<Buffer> workspace;

  // The bytes of counters and partial tiles for `tiles` output tiles of `parts` parts each.
  uint64_t counter_bytes(uint64_t tiles) const { return (tiles * sizeof(int32_t) + 255) / 256 * 256; }
  uint64_t workspace_bytes(uint64_t tiles, int64_t parts) const {
    return counter_bytes(tiles) + tiles * static_cast<uint64_t>(parts) *
                                      static_cast<uint64_t>(args.split_k_tile) * sizeof(float);
  }

  // The workspace for a launch of `g` in the option's n parts, within the workspace bound and
  // the grid's axis-2 limit.
  SplitLaunch split(const Grid& g) const {
    SplitLaunch s;
    if (!args.split_k_on) return s;
    const uint64_t tiles = g.count();
    const int64_t n = args.split_k;  // > 1: the split_k pass splits only then
    const uint64_t bytes = workspace_bytes(tiles, n);
    if (bytes > kSplitKWorkspaceBytes)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "kernel ", lowered->name, ": split_k ", n, " over ",
           tiles, " programs needs ", bytes, " bytes of workspace, over the bound of ",
           kSplitKWorkspaceBytes, ": use a smaller split_k");
    if (static_cast<uint64_t>(g.dims[2]) * static_cast<uint64_t>(n) > kMaxGridZ)
      fail(METILE_ERROR_INVALID_ARGUMENT, "launch", "kernel ", lowered->name, ": split_k ", n,
           " times the grid's axis 2 (", g.dims[2], ") is over ", kMaxGridZ);
    s.parts = n;
    std::lock_guard<std::mutex> lock(workspace_mutex);
    if (workspace == nullptr || workspace->size() < bytes) {
      device->synchronize();  // launches still using the old workspace finish first
      workspace = device->alloc(bytes);
      std::memset(workspace->contents(), 0, static_cast<size_t>(counter_bytes(tiles)));
    }
    s.memory = workspace;
    s.workspace_offset = counter_bytes(tiles);
    return s;
  }
  Grid launched(Grid g, const SplitLaunch& s) const {
    g.dims[2] = static_cast<uint32_t>(g.dims[2] * s.parts);
    return g;
  }

  // The user's arguments followed by the hidden ones; `flag` is the error-flag buffer.
  std::vector<LaunchArg> complete(std::vector<LaunchArg> user, Buffer* flag,
                                  const SplitLaunch& s) const {
    if (args.split_k_on) {
      LaunchArg counters, ws, n;
      counters.buffer = ws.buffer = s.memory.get();
      ws.offset = s.workspace_offset;
      n.bits = static_cast<uint64_t>(s.parts);
      user.insert(user.end(), {counters, ws, n});
    }
    for (size_t i : args.extent_of) {
      const LaunchArg& a = user.at(i);
      const size_t elem = dtype_size(lowered->type(lowered->params[i].value).dtype);
      LaunchArg e;
      if (a.buffer != nullptr && a.offset <= a.buffer->size())
        e.bits = (a.buffer->size() - a.offset) / elem;
      user.push_back(e);
    }
    if (args.error_flag) {
      LaunchArg f;
      f.buffer = flag;
      user.push_back(f);
    }
    return user;
  }

  std::shared_ptr<Buffer> new_flag() const {
    if (!args.error_flag) return nullptr;
    auto b = device->alloc(sizeof(int32_t));
    std::memset(b->contents(), 0, sizeof(int32_t));
    return b;
  }
  void reset(Buffer* flag) const {
    if (flag) std::memset(flag->contents(), 0, sizeof(int32_t));
  }
  void check(Buffer* flag) const {
    if (flag == nullptr) return;
    device->synchronize();
    int32_t site = 0;
    std::memcpy(&site, flag->contents(), sizeof site);
    if (site > 0) fail_at(static_cast<size_t>(site));
  }
  // The error the flag would report, found on the host before the launch (nonzero_params). A
  // launch of no programs runs no loop.
  void check_before(const Grid& g, const std::vector<LaunchArg>& user) const {
    if (g.count() == 0) return;
    for (const auto& [param, site] : args.nonzero_params) {
      const size_t bytes = dtype_size(lowered->type(lowered->params[param].value).dtype);
      const uint64_t mask = bytes >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
      if ((user.at(param).bits & mask) == 0) fail_at(site);
    }
  }
  [[noreturn]] void fail_at(size_t site) const {
    const size_t k = site - 1;
    fail(METILE_ERROR_DEVICE, "launch", "kernel ", lowered->name, ": ",
         k < args.sites.size() ? args.sites[k] : std::string("an access outside its buffer"));
  }
};

class HiddenLaunch final : public PreparedLaunch {
 public:
  HiddenLaunch(std::shared_ptr<const Hidden> h, Kernel& inner, const Grid& g,
               std::vector<LaunchArg> user)
      : h_(std::move(h)), flag_(h_->new_flag()), split_(h_->split(g)) {
    grid = g;
    args = user;
    inner_ = inner.prepare(h_->launched(g, split_), h_->complete(std::move(user), flag_.get(), split_));
  }
  void run() override {
    h_->check_before(grid, args);
    h_->reset(flag_.get());
    inner_->options = options;  // the stream and limit are the user's launch's
    inner_->run();
    h_->check(flag_.get());
  }
  void update() override {
    split_ = h_->split(grid);
    inner_->grid = h_->launched(grid, split_);
    inner_->args = h_->complete(args, flag_.get(), split_);
    inner_->update();
  }

 private:
  std::shared_ptr<const Hidden> h_;
  std::shared_ptr<Buffer> flag_;
  SplitLaunch split_;
  std::unique_ptr<PreparedLaunch> inner_;
};

class HiddenKernel final : public Kernel {
 public:
  HiddenKernel(std::shared_ptr<Kernel> inner, std::shared_ptr<const Hidden> h)
      : inner_(std::move(inner)), h_(std::move(h)) {}
  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override {
    return std::make_unique<HiddenLaunch>(h_, *inner_, grid, std::move(args));
  }
  void launch(const Grid& grid, std::vector<LaunchArg> args) override {
    h_->check_before(grid, args);
    auto flag = h_->new_flag();
    SplitLaunch s = h_->split(grid);
    inner_->launch(h_->launched(grid, s), h_->complete(std::move(args), flag.get(), s));
    h_->check(flag.get());
  }
  int registers_per_thread() const override { return inner_->registers_per_thread(); }

 private:
  std::shared_ptr<Kernel> inner_;
  std::shared_ptr<const Hidden> h_;
};

}  // namespace

std::shared_ptr<Kernel> with_hidden_args(std::shared_ptr<Kernel> inner,
                                         std::shared_ptr<const Program> lowered,
                                         TileHiddenArgs hidden, std::shared_ptr<Device> device) {
  if (hidden.empty()) return inner;
  auto h = std::make_shared<Hidden>();
  h->lowered = std::move(lowered);
  h->args = std::move(hidden);
  h->device = std::move(device);
  return std::make_shared<HiddenKernel>(std::move(inner), std::move(h));
}

}  // namespace metile
