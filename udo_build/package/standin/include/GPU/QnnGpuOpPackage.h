// Stand-in for the QNN SDK's GPU/QnnGpuOpPackage.h, written by udo-build for syntax checks only:
// a node as the GPU backend hands it over, and the kernels an operation describes.
#pragma once

#include "QnnOpPackage.h"

typedef struct {
  Qnn_OpConfig_t** configs;
} QnnGpuOpPackage_Node_t;

typedef struct {
  const char* kernelSource;
  const char* kernelName;
  const char* buildOptions;
  uint32_t globalWorkDim;
  size_t globalWorkSizes[3];
  size_t localWorkSizes[3];
} QnnGpuOpPackage_Kernel_t;

typedef struct _QnnGpuOpPackage_Operation_t QnnGpuOpPackage_Operation_t;
