// Stand-in for the QNN SDK's GPU/QnnGpuOpPackage.h, written by udo-build for syntax checks only:
// a node as the GPU backend hands it over (QnnGpuOpPackage_Node_t), a kernel (QnnGpu_Kernel_t)
// and an operation (QnnGpu_Operation_t, what createOpImpl returns). Names, struct tags and field
// order follow the SDK header; the kernel argument, output claim and memory object types the
// sources do not use are declared incomplete.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "GPU/QnnGpuCommon.h"
#include "QnnOpPackage.h"
#include "QnnTypes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct QnnGpu_TensorStorageType QnnGpu_TensorStorageType_t;
typedef struct QnnGpu_KernelArg QnnGpu_KernelArg_t;
typedef struct QnnGpu_KernelTuningConfig QnnGpu_KernelTuningConfig_t;
typedef struct QnnGpu_OutputClaim QnnGpu_OutputClaim_t;
typedef struct QnnGpu_MemoryObject QnnGpu_MemoryObject_t;

typedef struct _QnnOpPackage_Node_t {
  uint32_t optimization;
  const Qnn_OpConfig_t** configs;  // null-terminated; one config when nothing was fused
  const QnnGpu_TensorStorageType_t** storageTypes;
  int32_t kernelVariant;
} QnnGpuOpPackage_Node_t;

typedef enum {
  QNN_GPU_KERNEL_SOURCE_TYPE_TEXT = 0,
  QNN_GPU_KERNEL_SOURCE_TYPE_BINARY = 1
} QnnGpu_KernelSourceType_t;

typedef struct {
  const void* kernelSource;
  size_t sourceLength;
  QnnGpu_KernelSourceType_t sourceType;
  const char* buildOptions;
  size_t globalWorkDim;
  size_t globalWorkSizes[3];
  size_t localWorkDim;
  size_t localWorkSizes[3];
  QnnGpu_KernelArg_t** args;  // null-terminated
  const char* name;
  uint32_t isDynamic;
  QnnGpu_KernelTuningConfig_t** tuningConfigs;
  void* reserved;
} QnnGpu_Kernel_t;

#define QNN_GPU_KERNEL_INIT \
  {NULL, 0u, QNN_GPU_KERNEL_SOURCE_TYPE_TEXT, NULL, 0u, {0u}, 0u, {0u}, NULL, NULL, 0u, NULL, NULL}

// the operation of a node (QnnOpPackage_OpImpl_t points to one); each array null-terminated
typedef struct _QnnOpPackage_OpImpl_t {
  QnnGpu_OutputClaim_t** outputClaims;
  QnnGpu_MemoryObject_t** memoryObjects;
  QnnGpu_Kernel_t** kernels;
} QnnGpu_Operation_t;

#define QNN_GPU_OPERATION_INIT {NULL, NULL, NULL}

#ifdef __cplusplus
}  // extern "C"
#endif
