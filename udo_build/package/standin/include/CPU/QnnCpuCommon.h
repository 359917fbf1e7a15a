// Stand-in for the QNN SDK's CPU/QnnCpuCommon.h, written by udo-build for syntax checks only:
// the CPU backend's API version, which a package reports in GetInfo (sdkApiVersion).
#pragma once

#include "QnnTypes.h"

#define QNN_CPU_API_VERSION_MAJOR 1
#define QNN_CPU_API_VERSION_MINOR 0
#define QNN_CPU_API_VERSION_PATCH 0

#define QNN_CPU_API_VERSION_INIT                                                  \
  {                                                                              \
    {QNN_API_VERSION_MAJOR, QNN_API_VERSION_MINOR, QNN_API_VERSION_PATCH},       \
    {QNN_CPU_API_VERSION_MAJOR, QNN_CPU_API_VERSION_MINOR, QNN_CPU_API_VERSION_PATCH} \
  }
