// Stand-in for the QNN SDK's QnnOpPackage.h, written by udo-build for syntax checks only: the
// op package interface (version 1.4) as the generated skeletons use it.
#pragma once

#include "QnnLog.h"
#include "QnnTypes.h"

// (the values are placeholders of this stand-in)
#define QNN_OP_PACKAGE_NO_ERROR 0
#define QNN_OP_PACKAGE_ERROR_LIBRARY_ALREADY_INITIALIZED 30000
#define QNN_OP_PACKAGE_ERROR_LIBRARY_NOT_INITIALIZED 30001
#define QNN_OP_PACKAGE_ERROR_INVALID_HANDLE 30002
#define QNN_OP_PACKAGE_ERROR_INVALID_INFO 30003
#define QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT 30004
#define QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE 30005
#define QNN_OP_PACKAGE_ERROR_UNSUPPORTED_FEATURE 30006
#define QNN_OP_PACKAGE_ERROR_GENERAL 30007

typedef struct _QnnOpPackage_GlobalInfrastructure_t* QnnOpPackage_GlobalInfrastructure_t;
typedef struct _QnnOpPackage_GraphInfrastructure_t* QnnOpPackage_GraphInfrastructure_t;
typedef struct _QnnOpPackage_Node_t* QnnOpPackage_Node_t;
typedef struct _QnnOpPackage_OpImpl_t* QnnOpPackage_OpImpl_t;

typedef struct {
  const char* packageName;
  const char** operationNames;
  uint32_t numOperations;
} QnnOpPackage_Info_t;

#define QNN_OP_PACKAGE_INFO_INIT {NULL, NULL, 0}

typedef Qnn_ErrorHandle_t (*QnnOpPackage_InitFn_t)(QnnOpPackage_GlobalInfrastructure_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_TerminateFn_t)(void);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_GetInfoFn_t)(const QnnOpPackage_Info_t**);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_ValidateOpConfigFn_t)(Qnn_OpConfig_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_CreateOpImplFn_t)(QnnOpPackage_GraphInfrastructure_t,
                                                           QnnOpPackage_Node_t,
                                                           QnnOpPackage_OpImpl_t*);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_FreeOpImplFn_t)(QnnOpPackage_OpImpl_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogInitializeFn_t)(QnnLog_Callback_t, QnnLog_Level_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogSetLevelFn_t)(QnnLog_Level_t);
typedef Qnn_ErrorHandle_t (*QnnOpPackage_LogTerminateFn_t)(void);

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
