/** \file dlpack_abi.h
 * The DLPack structs (their layout is the ABI every producer and consumer shares): the legacy
 * v0.8 DLManagedTensor and the v1.x DLManagedTensorVersioned, declared here so metile needs no
 * dlpack.h: capi/dlpack.cpp exports and imports them, tests build them.
 */
#pragma once

#include <cstdint>

namespace metile::dlpack {

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

inline constexpr uint32_t kDLPackMajor = 1, kDLPackMinor = 0;  // what metile writes and reads
inline constexpr uint32_t kDLPackMinorFloat8 = 1;                // the version of the FP8 codes
inline constexpr uint64_t kDLFlagReadOnly = 1, kDLFlagIsCopied = 2;
inline constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;
inline constexpr uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6;
inline constexpr uint8_t kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12;

}  // namespace metile::dlpack
