/** \file cuda_api.h
 * The parts of the CUDA driver API and NVRTC that metile uses, declared here and resolved with
 * dlopen/dlsym at run time: the library has no link-time CUDA dependency, builds without the
 * toolkit, and a machine without a driver gets a clear "unavailable" reason instead of a loader
 * error.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace metile::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

struct CUmemLocation {
  int type;  // 1 = device
  int id;
};

inline constexpr int kAttrMaxThreadsPerBlock = 1;
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrComputeMajor = 75;
inline constexpr int kAttrComputeMinor = 76;
inline constexpr int kAttrManagedMemory = 83;
inline constexpr int kAttrPageableMemoryAccess = 88;
inline constexpr int kAttrConcurrentManagedAccess = 89;
inline constexpr int kAttrMaxSharedPerBlockOptin = 97;
inline constexpr int kFuncAttrMaxDynamicShared = 8;
inline constexpr int kFuncAttrNumRegs = 4;  // CU_FUNC_ATTRIBUTE_NUM_REGS
inline constexpr unsigned kMemAttachGlobal = 1;
inline constexpr unsigned kEventDisableTiming = 2;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr unsigned kHostRegisterDeviceMap = 2;  // CU_MEMHOSTREGISTER_DEVICEMAP
inline constexpr CUresult kErrorHostMemoryAlreadyRegistered = 712;
inline constexpr CUresult kErrorNotReady = 600;  // CUDA_ERROR_NOT_READY: queued work still runs

/** Driver entry points; every pointer is non-null once load_driver() succeeded. */
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void**, void**);
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  // One of the two prefetch signatures (CUDA >= 12.2 takes a location).
  CUresult (*cuMemPrefetchAsync_v2)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
  CUresult (*cuMemPrefetchAsync)(CUdeviceptr, size_t, CUdevice, CUstream);
  // Ordering with other libraries' streams (DLPack).
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  // Streams and events of the user's, and the watchdog of launches with a time limit.
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  // TMA tensor maps (CUDA >= 12.0; null on older drivers: kernels then run without TMA).
  // (map, data type, rank, base, dims, strides of dims 1.., box, element strides, interleave,
  // swizzle, L2 promotion, out-of-range fill): runtime/cuda/tma_map.h fills them in.
  CUresult (*cuTensorMapEncodeTiled)(void*, int, unsigned, void*, const uint64_t*, const uint64_t*,
                                     const uint32_t*, const uint32_t*, int, int, int, int);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // The stop words kernels check (runtime/host/cancel_words.h): host memory mapped into the GPU.
  CUresult (*cuMemHostRegister)(void*, size_t, unsigned);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned);
  // Their copy in GPU memory, which kernels read instead (cuda_device.cpp, map_words).
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  // The context a stream belongs to, so a stream of another GPU is refused by name (null on a
  // driver without it: the launch then fails in the driver).
  CUresult (*cuStreamGetCtx)(CUstream, CUcontext*);
  // Where a caller hands in a raw device address (metile_launch_set_arg_device_memory): the
  // allocation around it and its GPU (null on a driver without them: such addresses are refused).
  CUresult (*cuMemGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr);
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
};

struct Nvrtc {
  nvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(nvrtcResult);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*);
};

/** The driver, loaded and initialized once; nullptr with *why set when unavailable. */
const Driver* load_driver(std::string* why);
/** NVRTC, loaded once; nullptr with *why set when unavailable. */
const Nvrtc* load_nvrtc(std::string* why);

/** Throws METILE_ERROR_DEVICE "[cuda] <what>: CUDA_ERROR_X (message)" when `r` is not success. */
void check(CUresult r, const char* what);

/**
 * Compiles CUDA C++ to a cubin for `arch` (e.g. "sm_90") with NVRTC. Throws METILE_ERROR_COMPILE
 * with NVRTC's log, or METILE_ERROR_DEVICE_UNAVAILABLE when NVRTC cannot be loaded.
 */
std::string nvrtc_compile(const std::string& source, const std::string& name,
                          const std::string& arch, std::string* log_out = nullptr);
/** "nvrtc 13.0" (part of cache keys). */
std::string nvrtc_version();

}  // namespace metile::cuda
