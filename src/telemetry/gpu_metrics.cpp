// The GPU gauges: names, units (bytes, hertz, ratios, watts, °C) and one series per throttle
// reason.
#include "telemetry/gpu_metrics.h"

#include <cmath>
#include <limits>

namespace telemetry {

void GpuMetrics::update(const std::vector<GpuReading>& readings) {
  std::lock_guard lock(mutex_);
  for (auto& [gauge, fresh] : series_) fresh = false;
  for (const GpuReading& g : readings) {
    const Labels gpu = {{"gpu", std::to_string(g.index)}};
    auto set = [&](const char* name, const char* help, auto value, double scale = 1.0,
                   const Labels& labels = {}) {
      if (!value) return;
      Gauge& gauge = registry_.gauge(name, help, labels.empty() ? gpu : labels);
      gauge.set(static_cast<double>(*value) * scale);
      series_[&gauge] = true;
    };
    set("headroom_gpu_info", "A GPU NVML reports, with its name; the value is always 1.",
        std::optional<int>(1), 1.0, {{"gpu", std::to_string(g.index)}, {"name", g.name}});
    set("headroom_gpu_memory_total_bytes", "GPU memory, total.", g.memory_total);
    set("headroom_gpu_memory_used_bytes",
        "GPU memory in use (all processes, driver reserve included).", g.memory_used);
    set("headroom_gpu_utilization_ratio",
        "Share of the driver's last sample period in which a kernel ran on the GPU.",
        g.utilization_gpu);
    set("headroom_gpu_memory_utilization_ratio",
        "Share of the driver's last sample period in which GPU memory was read or written.",
        g.utilization_memory);
    set("headroom_gpu_sm_clock_hertz", "SM clock now.", g.sm_clock_mhz, 1e6);
    set("headroom_gpu_sm_clock_max_hertz", "Highest SM clock this GPU supports.",
        g.max_sm_clock_mhz, 1e6);
    set("headroom_gpu_memory_clock_hertz", "Memory clock now.", g.memory_clock_mhz, 1e6);
    set("headroom_gpu_temperature_celsius", "GPU die temperature.", g.temperature_c);
    set("headroom_gpu_power_watts", "Power draw of the GPU board.", g.power_w);
    set("headroom_gpu_power_limit_watts", "Power limit the driver enforces.", g.power_limit_w);
    set("headroom_gpu_throttle_reasons",
        "NVML's clock event (throttle) reasons bitmask; 0 when nothing holds the clocks.",
        g.throttle_reasons);
    if (g.throttle_reasons) {
      for (const auto& [bit, reason] : throttle_reason_names()) {
        set("headroom_gpu_throttle_reason_active",
            "1 while NVML reports this reason for the clocks not being at their maximum.",
            std::optional<int>((*g.throttle_reasons & bit) ? 1 : 0), 1.0,
            {{"gpu", std::to_string(g.index)}, {"reason", std::string(reason)}});
      }
    }
    set("headroom_gpu_pcie_tx_bytes_per_second",
        "PCIe bytes sent by the GPU per second (NVML's 20 ms window).", g.pcie_tx_bytes_per_s);
    set("headroom_gpu_pcie_rx_bytes_per_second",
        "PCIe bytes received by the GPU per second (NVML's 20 ms window).", g.pcie_rx_bytes_per_s);
  }
  for (auto& [gauge, fresh] : series_) {
    if (!fresh) gauge->set(std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace telemetry
