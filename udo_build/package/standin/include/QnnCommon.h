// Stand-in for the QNN SDK's QnnCommon.h, written by udo-build for syntax checks only: the API
// visibility macro, the core API version, the error handle and the error code ranges.
#pragma once

#include <stdint.h>

// the vendor's Makefiles define it (-DQNN_API=...) to export the interface provider
#ifndef QNN_API
#define QNN_API
#endif

#define QNN_API_VERSION_MAJOR 2
#define QNN_API_VERSION_MINOR 0
#define QNN_API_VERSION_PATCH 0

#define QNN_SUCCESS 0
#define QNN_MIN_ERROR_COMMON 1000
#define QNN_MIN_ERROR_OP_PACKAGE 3000
#define QNN_MAX_ERROR_OP_PACKAGE 3999
#define QNN_MIN_ERROR_LOG 11000

typedef uint64_t Qnn_ErrorHandle_t;
typedef void* Qnn_Handle_t;

typedef enum {
  QNN_COMMON_ERROR_NOT_SUPPORTED = QNN_MIN_ERROR_COMMON + 0,
  QNN_COMMON_ERROR_INVALID_ARGUMENT = QNN_MIN_ERROR_COMMON + 4,
  QNN_COMMON_ERROR_GENERAL = QNN_MIN_ERROR_COMMON + 100
} QnnCommon_Error_t;
