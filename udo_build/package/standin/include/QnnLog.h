// Stand-in for the QNN SDK's QnnLog.h, written by udo-build for syntax checks only: log levels,
// the callback type and the log error the package log hooks return.
#pragma once

#include <stdarg.h>
#include <stdint.h>

#include "QnnCommon.h"

typedef enum {
  QNN_LOG_LEVEL_ERROR = 1,
  QNN_LOG_LEVEL_WARN = 2,
  QNN_LOG_LEVEL_INFO = 3,
  QNN_LOG_LEVEL_VERBOSE = 4,
  QNN_LOG_LEVEL_DEBUG = 5
} QnnLog_Level_t;

typedef enum {
  QNN_LOG_NO_ERROR = QNN_SUCCESS,
  QNN_LOG_ERROR_INVALID_ARGUMENT = QNN_COMMON_ERROR_INVALID_ARGUMENT
} QnnLog_Error_t;

typedef void (*QnnLog_Callback_t)(const char* fmt, QnnLog_Level_t level, uint64_t timestamp,
                                  va_list args);
