// Stand-in for the QNN SDK's CPU/QnnCpuOpPackage.h, written by udo-build for syntax checks only:
// how the CPU backend hands a node to an op package (tensors, parameters, implementation). Names,
// field order and struct tags follow the SDK header; the tensor's quantizeParams field (unused by
// the sources) is left out.
#pragma once

#include "CPU/QnnCpuCommon.h"
#include "QnnOpPackage.h"
#include "QnnTypes.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t QnnCpuOpPackage_TensorDataFormat_t;

typedef enum {
  QNN_CPU_PARAMTYPE_SCALAR = 0,
  QNN_CPU_PARAMTYPE_TENSOR = 1,
  QNN_CPU_PARAMTYPE_STRING = 2,
  QNN_CPU_PARAMTYPE_UNDEFINED = 0xFFFFFFFF
} QnnCpuOpPackage_ParamType_t;

typedef enum {
  QNN_CPU_DATATYPE_BOOL_8 = 0x0508,
  QNN_CPU_DATATYPE_INT_8 = 0x0008,
  QNN_CPU_DATATYPE_INT_32 = 0x0032,
  QNN_CPU_DATATYPE_UINT_8 = 0x0108,
  QNN_CPU_DATATYPE_UINT_32 = 0x0132,
  QNN_CPU_DATATYPE_FLOAT_32 = 0x0232,
  QNN_CPU_DATATYPE_UNDEFINED = 0x7FFFFFFF
} QnnCpuOpPackage_DataType_t;

typedef Qnn_ErrorHandle_t (*QnnCpuOpPackage_OpImplFn_t)(void* opPkgNodeData);

// the op package's implementation of a node (QnnOpPackage_OpImpl_t points to one)
typedef struct _QnnOpPackage_OpImpl_t {
  QnnCpuOpPackage_OpImplFn_t opImplFn;
  void* userData;
} QnnCpuOpPackage_OpImpl_t;

typedef struct {
  QnnCpuOpPackage_TensorDataFormat_t dataFormat;
  QnnCpuOpPackage_DataType_t dataType;
  uint32_t rank;
  uint32_t* maxDimensions;
  uint32_t* currentDimensions;
  void* data;
} QnnCpuOpPackage_Tensor_t;

typedef struct {
  QnnCpuOpPackage_ParamType_t type;
  const char* name;
  union {
    double scalarParam;
    const char* string;
    QnnCpuOpPackage_Tensor_t* tensorParam;
  };
} QnnCpuOpPackage_Param_t;

// the node the backend hands to createOpImpl (QnnOpPackage_Node_t points to one)
typedef struct _QnnOpPackage_Node_t {
  const char* name;
  const char* packageName;
  const char* typeName;
  uint32_t numOfParams;
  QnnCpuOpPackage_Param_t** params;
  uint32_t numOfInputs;
  QnnCpuOpPackage_Tensor_t** inputs;
  uint32_t numOfOutputs;
  QnnCpuOpPackage_Tensor_t** outputs;
} QnnCpuOpPackage_Node_t;

#ifdef __cplusplus
}  // extern "C"
#endif
