// Stand-in for the QNN SDK's CPU/QnnCpuOpPackage.h, written by udo-build for syntax checks only:
// how the CPU backend hands a node to an op package (tensors, parameters, implementation).
#pragma once

#include "QnnOpPackage.h"

typedef struct {
  Qnn_DataType_t dataType;
  uint32_t rank;
  uint32_t* currentDimensions;
  uint32_t* maxDimensions;
  void* data;
} QnnCpuOpPackage_Tensor_t;

typedef enum {
  QNN_CPU_PARAMTYPE_SCALAR,
  QNN_CPU_PARAMTYPE_TENSOR,
  QNN_CPU_PARAMTYPE_STRING
} QnnCpuOpPackage_ParamType_t;

typedef struct {
  QnnCpuOpPackage_ParamType_t type;
  const char* name;
  union {
    double scalarParam;
    QnnCpuOpPackage_Tensor_t* tensorParam;
    const char* stringParam;
  };
} QnnCpuOpPackage_Param_t;

typedef struct {
  const char* name;
  const char* typeName;
  uint32_t numOfParams;
  QnnCpuOpPackage_Param_t** params;
  uint32_t numOfInputs;
  QnnCpuOpPackage_Tensor_t** inputs;
  uint32_t numOfOutputs;
  QnnCpuOpPackage_Tensor_t** outputs;
} QnnCpuOpPackage_Node_t;

typedef Qnn_ErrorHandle_t (*QnnCpuOpPackage_OpImplFn_t)(void* opPkgNodeData);

typedef struct {
  QnnCpuOpPackage_OpImplFn_t opImplFn;
  void* userData;
} QnnCpuOpPackage_OpImpl_t;
