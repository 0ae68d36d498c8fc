// Events on devices without streams: a launch there is done when the device is synchronized, so
// an event is the host's clock read after that, and the time between two is the host's.
#include <chrono>
#include <optional>

#include "runtime/device.h"
#include "support/error.h"

namespace metile {

namespace {

class HostEvent : public Event {
 public:
  explicit HostEvent(Device& device) : device_(device) {}

  void record(uint64_t) override {
    device_.synchronize();  // metal queues launches without streams: their time counts
    at_ = std::chrono::steady_clock::now();
  }
  void synchronize() override {}
  double elapsed_ms_since(Event& start) override {
    auto* s = dynamic_cast<HostEvent*>(&start);
    if (s == nullptr || &s->device_ != &device_)
      fail(METILE_ERROR_INVALID_ARGUMENT, "event", "the two events belong to different devices");
    if (!s->at_ || !at_)
      fail(METILE_ERROR_INVALID_ARGUMENT, "event",
           "elapsed time needs both events recorded (metile_event_record)");
    return std::chrono::duration<double, std::milli>(*at_ - *s->at_).count();
  }

 private:
  Device& device_;
  std::optional<std::chrono::steady_clock::time_point> at_;
};

}  // namespace

std::unique_ptr<Event> make_host_event(Device& device) { return std::make_unique<HostEvent>(device); }

}  // namespace metile
