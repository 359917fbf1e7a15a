// Stand-in for the QNN SDK's GPU/QnnGpuCommon.h, written by udo-build for syntax checks only:
// the GPU backend's API version, which a package reports in GetInfo (sdkApiVersion).
#pragma once

#include "QnnTypes.h"

#define QNN_GPU_API_VERSION_MAJOR 1
#define QNN_GPU_API_VERSION_MINOR 0
#define QNN_GPU_API_VERSION_PATCH 0

#define QNN_GPU_API_VERSION_INIT                                                  \
  {                                                                              \
    {QNN_API_VERSION_MAJOR, QNN_API_VERSION_MINOR, QNN_API_VERSION_PATCH},       \
    {QNN_GPU_API_VERSION_MAJOR, QNN_GPU_API_VERSION_MINOR, QNN_GPU_API_VERSION_PATCH} \
  }
