// A fake libnvidia-ml for tests: two GPUs with fixed, known readings (GPU 1 held back by a thermal
// slowdown). Built three ways: full; FAKE_NVML_PARTIAL (some entry points absent, some calls
// unsupported or failing); FAKE_NVML_NO_INIT (no nvmlInit_v2, like a driver too old).
// $FAKE_NVML_INIT_ERROR makes nvmlInit_v2 fail with that code; $FAKE_NVML_COUNT sets the count;
// $FAKE_NVML_TEMPERATURE overrides every GPU's temperature.
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct FakeDevice* nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;

enum { kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3, kGpuIsLost = 15 };

struct FakeDevice {
  const char* name;
  unsigned long long total, free, used;
  unsigned util_gpu, util_memory;
  unsigned sm_clock, max_sm_clock, mem_clock, max_mem_clock, bus_width;
  unsigned temperature, power_mw, power_limit_mw;
  unsigned long long reasons;
  unsigned pcie_tx_kb, pcie_rx_kb, pcie_gen, pcie_width;
};

#define GIB (1024ull * 1024ull * 1024ull)
static struct FakeDevice devices[2] = {
    {"NVIDIA Fake A100", 40 * GIB, 30 * GIB, 10 * GIB, 87, 45, 1410, 1410, 1215, 1215, 5120, 65,
     250000, 400000, 0x0, 1000, 2000, 4, 16},
    // Thermal slowdown: SW thermal (0x20) and HW thermal (0x40) reasons, clocks well below max.
    {"NVIDIA Fake RTX 4090", 24 * GIB, 20 * GIB, 4 * GIB, 99, 70, 1200, 2520, 10501, 10501, 384, 89,
     300000, 450000, 0x60, 500, 700, 4, 16},
};

static int live_inits = 0;

// For tests: nvmlInit_v2 calls not yet matched by nvmlShutdown.
int fake_nvml_live_inits(void) {
  return live_inits;
}

static struct FakeDevice* device(nvmlDevice_t d) {
  return (struct FakeDevice*)d;
}

#ifndef FAKE_NVML_NO_INIT
nvmlReturn_t nvmlInit_v2(void) {
  const char* e = getenv("FAKE_NVML_INIT_ERROR");
  if (e && *e) return atoi(e);
  ++live_inits;
  return kSuccess;
}
#endif

nvmlReturn_t nvmlShutdown(void) {
  if (live_inits == 0) return kUninitialized;
  --live_inits;
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kNotSupported:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (live_inits == 0) return kUninitialized;
  const char* e = getenv("FAKE_NVML_COUNT");
  *count = e && *e ? (unsigned)atoi(e) : 2;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* d) {
  if (live_inits == 0) return kUninitialized;
  if (index >= 2) return kInvalidArgument;
  *d = (nvmlDevice_t)&devices[index];
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned length) {
  if (!d || !name || length == 0) return kInvalidArgument;
  strncpy(name, device(d)->name, length - 1);
  name[length - 1] = '\0';
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  m->total = device(d)->total;
  m->free = device(d)->free;
  m->used = device(d)->used;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t* u) {
#ifdef FAKE_NVML_PARTIAL
  (void)d;
  (void)u;
  return kGpuIsLost;  // an error other than "not supported": the field is absent and said why
#else
  u->gpu = device(d)->util_gpu;
  u->memory = device(d)->util_memory;
  return kSuccess;
#endif
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* clock) {
  if (type == 1)
    *clock = device(d)->sm_clock;
  else if (type == 2)
    *clock = device(d)->mem_clock;
  else
    return kInvalidArgument;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned* clock) {
  if (type == 1)
    *clock = device(d)->max_sm_clock;
  else if (type == 2)
    *clock = device(d)->max_mem_clock;
  else
    return kInvalidArgument;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned* temp) {
#ifdef FAKE_NVML_PARTIAL
  (void)d;
  (void)sensor;
  (void)temp;
  return kNotSupported;
#else
  if (sensor != 0) return kInvalidArgument;
  // Read at every call, so a test can show that a reader reads now, not once.
  const char* e = getenv("FAKE_NVML_TEMPERATURE");
  *temp = e && *e ? (unsigned)atoi(e) : device(d)->temperature;
  return kSuccess;
#endif
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
#ifdef FAKE_NVML_PARTIAL
  (void)d;
  (void)mw;
  return kNotSupported;
#else
  *mw = device(d)->power_mw;
  return kSuccess;
#endif
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned* mw) {
  *mw = device(d)->power_limit_mw;
  return kSuccess;
}

// The partial library is an older driver: only the deprecated throttle-reasons name, and no
// PCIe throughput or memory bus width.
#ifdef FAKE_NVML_PARTIAL
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* r) {
  *r = device(d)->reasons;
  return kSuccess;
}
#else
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* r) {
  *r = device(d)->reasons;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned* kb) {
  if (counter == 0)
    *kb = device(d)->pcie_tx_kb;
  else if (counter == 1)
    *kb = device(d)->pcie_rx_kb;
  else
    return kInvalidArgument;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t d, unsigned* bits) {
  *bits = device(d)->bus_width;
  return kSuccess;
}
#endif

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned* gen) {
  *gen = device(d)->pcie_gen;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned* width) {
  *width = device(d)->pcie_width;
  return kSuccess;
}
