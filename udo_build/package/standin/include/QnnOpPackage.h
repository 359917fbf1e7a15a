// Stand-in for the QNN SDK's QnnOpPackage.h, written by udo-build for syntax checks only: the
// op package interface (version 1.4) as the generated and the vendor-generated sources use it.
// The error codes and the fields of QnnOpPackage_Info_t follow the SDK header.
#pragma once

#include "QnnCommon.h"
#include "QnnLog.h"
#include "QnnTypes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  QNN_OP_PACKAGE_NO_ERROR = QNN_SUCCESS,
  QNN_OP_PACKAGE_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED,
  QNN_OP_PACKAGE_ERROR_LIBRARY_ALREADY_INITIALIZED = QNN_MIN_ERROR_OP_PACKAGE + 0,
  QNN_OP_PACKAGE_ERROR_LIBRARY_NOT_INITIALIZED = QNN_MIN_ERROR_OP_PACKAGE + 1,
  QNN_OP_PACKAGE_ERROR_INVALID_HANDLE = QNN_MIN_ERROR_OP_PACKAGE + 2,
  QNN_OP_PACKAGE_ERROR_INVALID_INFRASTRUCTURE = QNN_MIN_ERROR_OP_PACKAGE + 100,
  QNN_OP_PACKAGE_ERROR_INVALID_INFO = QNN_MIN_ERROR_OP_PACKAGE + 101,
  QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE = QNN_MIN_ERROR_OP_PACKAGE + 110,
  QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT = QNN_MIN_ERROR_OP_PACKAGE + 200,
  QNN_OP_PACKAGE_ERROR_GENERAL = QNN_COMMON_ERROR_GENERAL
} QnnOpPackage_Error_t;

typedef struct _QnnOpPackage_GlobalInfrastructure_t* QnnOpPackage_GlobalInfrastructure_t;
typedef struct _QnnOpPackage_GraphInfrastructure_t* QnnOpPackage_GraphInfrastructure_t;
typedef struct _QnnOpPackage_OpImpl_t* QnnOpPackage_OpImpl_t;
typedef struct _QnnOpPackage_Node_t* QnnOpPackage_Node_t;
typedef struct _QnnOpPackage_Optimization_t* QnnOpPackage_Optimization_t;
typedef struct _QnnOpPackage_OperationInfo_t* QnnOpPackage_OperationInfo_t;
typedef struct _QnnOpPackage_PackageInfo_t QnnOpPackage_PackageInfo_t;

#define QNN_OP_PACKAGE_RESERVED_INFO_SIZE 12

typedef struct {
  const char* packageName;
  const char** operationNames;
  const QnnOpPackage_OperationInfo_t* operationInfo;
  uint32_t numOperations;
  const QnnOpPackage_Optimization_t* optimizations;
  uint32_t numOptimizations;
  const char* sdkBuildId;
  const Qnn_ApiVersion_t* sdkApiVersion;
  const QnnOpPackage_PackageInfo_t* packageInfo;
  const Qnn_Version_t* opsetVersion;
  size_t reserved[QNN_OP_PACKAGE_RESERVED_INFO_SIZE];
} QnnOpPackage_Info_t;

#define QNN_OP_PACKAGE_INFO_INIT {NULL, NULL, NULL, 0u, NULL, 0u, NULL, NULL, NULL, NULL, {0u}}

typedef Qnn_ErrorHandle_t (*QnnOpPackage_InitFn_t)(QnnOpPackage_GlobalInfrastructure_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_TerminateFn_t)();
typedef Qnn_ErrorHandle_t (*QnnOpPackage_GetInfoFn_t)(const QnnOpPackage_Info_t**);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_ValidateOpConfigFn_t)(Qnn_OpConfig_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_CreateOpImplFn_t)(QnnOpPackage_GraphInfrastructure_t,
                                                           QnnOpPackage_Node_t,
                                                           QnnOpPackage_OpImpl_t*);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_FreeOpImplFn_t)(QnnOpPackage_OpImpl_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogInitializeFn_t)(QnnLog_Callback_t, QnnLog_Level_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogSetLevelFn_t)(QnnLog_Level_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogTerminateFn_t)(void);

#define QNN_OP_PACKAGE_API_VERSION_1_4_0 {1u, 4u, 0u}

typedef struct {
  QnnOpPackage_InitFn_t init;
  QnnOpPackage_TerminateFn_t terminate;
  QnnOpPackage_GetInfoFn_t getInfo;
  QnnOpPackage_ValidateOpConfigFn_t validateOpConfig;
  QnnOpPackage_CreateOpImplFn_t createOpImpl;
  QnnOpPackage_FreeOpImplFn_t freeOpImpl;
  QnnOpPackage_LogInitializeFn_t logInitialize;
  QnnOpPackage_LogSetLevelFn_t logSetLevel;
  QnnOpPackage_LogTerminateFn_t logTerminate;
} QnnOpPackage_ImplementationV1_4_t;

typedef struct {
  Qnn_Version_t interfaceVersion;
  union {
    QnnOpPackage_ImplementationV1_4_t v1_4;
  };
} QnnOpPackage_Interface_t;

typedef Qnn_ErrorHandle_t (*QnnOpPackage_InterfaceProvider_t)(QnnOpPackage_Interface_t*);

#ifdef __cplusplus
}  // extern "C"
#endif
