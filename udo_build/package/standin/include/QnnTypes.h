// Stand-in for the QNN SDK's QnnTypes.h, written by udo-build for syntax checks only:
// declarations of the types the generated op package skeletons use, nothing more.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "QnnCommon.h"

typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t patch;
} Qnn_Version_t;

// the core API version and the backend's (see <Backend>/Qnn<Backend>Common.h)
typedef struct {
  Qnn_Version_t coreApiVersion;
  Qnn_Version_t backendApiVersion;
} Qnn_ApiVersion_t;

typedef enum {
  QNN_DATATYPE_INT_8, QNN_DATATYPE_INT_16, QNN_DATATYPE_INT_32, QNN_DATATYPE_INT_64,
  QNN_DATATYPE_UINT_8, QNN_DATATYPE_UINT_16, QNN_DATATYPE_UINT_32, QNN_DATATYPE_UINT_64,
  QNN_DATATYPE_FLOAT_16, QNN_DATATYPE_FLOAT_32, QNN_DATATYPE_FLOAT_64,
  QNN_DATATYPE_SFIXED_POINT_4, QNN_DATATYPE_SFIXED_POINT_8, QNN_DATATYPE_SFIXED_POINT_16,
  QNN_DATATYPE_SFIXED_POINT_32,
  QNN_DATATYPE_UFIXED_POINT_4, QNN_DATATYPE_UFIXED_POINT_8, QNN_DATATYPE_UFIXED_POINT_16,
  QNN_DATATYPE_UFIXED_POINT_32,
  QNN_DATATYPE_BOOL_8, QNN_DATATYPE_STRING, QNN_DATATYPE_UNDEFINED
} Qnn_DataType_t;

typedef struct {
  Qnn_DataType_t dataType;
  union {
    float floatValue;
    double doubleValue;
    int8_t int8Value;
    int16_t int16Value;
    int32_t int32Value;
    int64_t int64Value;
    uint8_t uint8Value;
    uint16_t uint16Value;
    uint32_t uint32Value;
    uint64_t uint64Value;
    uint8_t bool8Value;
    const char* stringValue;
  };
} Qnn_Scalar_t;

typedef enum { QNN_TENSOR_VERSION_1 = 1 } Qnn_TensorVersion_t;
typedef enum { QNN_TENSOR_TYPE_STATIC, QNN_TENSOR_TYPE_UNDEFINED } Qnn_TensorType_t;
typedef enum { QNN_TENSOR_DATA_FORMAT_FLAT_BUFFER } Qnn_TensorDataFormat_t;
typedef enum { QNN_TENSORMEMTYPE_RAW, QNN_TENSORMEMTYPE_UNDEFINED } Qnn_TensorMemType_t;

typedef struct {
  void* data;
  uint32_t dataSize;
} Qnn_ClientBuffer_t;

typedef struct {
  uint32_t id;
  const char* name;
  Qnn_TensorType_t type;
  Qnn_TensorDataFormat_t dataFormat;
  Qnn_DataType_t dataType;
  uint32_t rank;
  uint32_t* dimensions;
  Qnn_TensorMemType_t memType;
  union {
    Qnn_ClientBuffer_t clientBuf;
    void* memHandle;
  };
} Qnn_TensorV1_t;

typedef struct {
  Qnn_TensorVersion_t version;
  union {
    Qnn_TensorV1_t v1;
  };
} Qnn_Tensor_t;

#define QNN_TENSOR_INIT {QNN_TENSOR_VERSION_1, {}}

typedef enum { QNN_PARAMTYPE_SCALAR, QNN_PARAMTYPE_TENSOR, QNN_PARAMTYPE_UNDEFINED }
    Qnn_ParamType_t;

typedef struct {
  Qnn_ParamType_t paramType;
  const char* name;
  union {
    Qnn_Scalar_t scalarParam;
    Qnn_Tensor_t tensorParam;
  };
} Qnn_Param_t;

#define QNN_PARAM_INIT {QNN_PARAMTYPE_UNDEFINED, NULL, {}}

typedef enum { QNN_OPCONFIG_VERSION_1 = 1 } Qnn_OpConfigVersion_t;

typedef struct {
  const char* name;
  const char* packageName;
  const char* typeName;
  uint32_t numOfParams;
  Qnn_Param_t* params;
  uint32_t numOfInputs;
  Qnn_Tensor_t* inputTensors;
  uint32_t numOfOutputs;
  Qnn_Tensor_t* outputTensors;
} Qnn_OpConfigV1_t;

typedef struct {
  Qnn_OpConfigVersion_t version;
  union {
    Qnn_OpConfigV1_t v1;
  };
} Qnn_OpConfig_t;
