#include "runtime/hidden_args.h"

#include <cstring>

#include "support/error.h"

namespace metile {

namespace {

struct Hidden {
  std::shared_ptr<const Program> lowered;
  TileHiddenArgs args;
  std::shared_ptr<Device> device;

  // The user's arguments followed by the hidden ones; `flag` is the error-flag buffer.
  std::vector<LaunchArg> complete(std::vector<LaunchArg> user, Buffer* flag) const {
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
    if (site <= 0) return;
    const size_t k = static_cast<size_t>(site - 1);
    fail(METILE_ERROR_DEVICE, "launch", "kernel ", lowered->name, ": ",
         k < args.sites.size() ? args.sites[k] : std::string("an access outside its buffer"));
  }
};

class HiddenLaunch final : public PreparedLaunch {
 public:
  HiddenLaunch(std::shared_ptr<const Hidden> h, Kernel& inner, const Grid& g,
               std::vector<LaunchArg> user)
      : h_(std::move(h)), flag_(h_->new_flag()) {
    grid = g;
    args = user;
    inner_ = inner.prepare(g, h_->complete(std::move(user), flag_.get()));
  }
  void run() override {
    h_->reset(flag_.get());
    inner_->run();
    h_->check(flag_.get());
  }
  void update() override {
    inner_->grid = grid;
    inner_->args = h_->complete(args, flag_.get());
    inner_->update();
  }

 private:
  std::shared_ptr<const Hidden> h_;
  std::shared_ptr<Buffer> flag_;
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
    auto flag = h_->new_flag();
    inner_->launch(grid, h_->complete(std::move(args), flag.get()));
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
  auto h =
      std::make_shared<Hidden>(Hidden{std::move(lowered), std::move(hidden), std::move(device)});
  return std::make_shared<HiddenKernel>(std::move(inner), std::move(h));
}

}  // namespace metile
