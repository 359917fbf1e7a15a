// Stand-in for the SNPE SDK's SnpeUdo/UdoBase.h (written by udo-build, declarations only): the
// types, enums and structs of the SnpeUdo API (1.6) that the generated registration library uses.
#ifndef SNPE_UDO_BASE_H
#define SNPE_UDO_BASE_H

#include <stdint.h>

#define API_VERSION_MAJOR 1
#define API_VERSION_MINOR 6
#define API_VERSION_TEENY 0

typedef uint32_t SnpeUdo_Bitmask_t;
typedef char* SnpeUdo_String_t;

typedef enum {
  SNPE_UDO_NO_ERROR = 0,
  SNPE_UDO_WRONG_CORE = 1,
  SNPE_UDO_INVALID_ARGUMENT = 2,
  SNPE_UDO_UNSUPPORTED_FEATURE = 3,
  SNPE_UDO_MEM_ALLOC_ERROR = 4,
  SNPE_UDO_WRONG_OPERATION = 100,
  SNPE_UDO_WRONG_CORE_TYPE = 101,
  SNPE_UDO_WRONG_NUM_OF_PARAMS = 102,
  SNPE_UDO_WRONG_NUM_OF_DIMENSIONS = 103,
  SNPE_UDO_WRONG_NUM_OF_INPUTS = 104,
  SNPE_UDO_WRONG_NUM_OF_OUTPUTS = 105,
  SNPE_UDO_PROGRAM_CACHE_NOT_FOUND = 106,
  SNPE_UDO_UNKNOWN_ERROR = 0xFFFFFFFF
} SnpeUdo_ErrorType_t;

typedef enum {
  SNPE_UDO_DATATYPE_FLOAT_16 = 0x01,
  SNPE_UDO_DATATYPE_FLOAT_32 = 0x02,
  SNPE_UDO_DATATYPE_FIXED_4 = 0x04,
  SNPE_UDO_DATATYPE_FIXED_8 = 0x08,
  SNPE_UDO_DATATYPE_FIXED_16 = 0x10,
  SNPE_UDO_DATATYPE_FIXED_32 = 0x20,
  SNPE_UDO_DATATYPE_UINT_8 = 0x100,
  SNPE_UDO_DATATYPE_UINT_16 = 0x200,
  SNPE_UDO_DATATYPE_UINT_32 = 0x400,
  SNPE_UDO_DATATYPE_INT_8 = 0x1000,
  SNPE_UDO_DATATYPE_INT_16 = 0x2000,
  SNPE_UDO_DATATYPE_INT_32 = 0x4000,
  SNPE_UDO_DATATYPE_LAST = 0xFFFFFFFF
} SnpeUdo_DataType_t;

typedef enum {
  SNPE_UDO_LAYOUT_NHWC = 0x01,
  SNPE_UDO_LAYOUT_NCHW = 0x02,
  SNPE_UDO_LAYOUT_NDHWC = 0x04,
  SNPE_UDO_LAYOUT_LAST = 0xFFFFFFFF
} SnpeUdo_TensorLayout_t;

typedef enum {
  SNPE_UDO_CORETYPE_UNDEFINED = 0x00,
  SNPE_UDO_CORETYPE_CPU = 0x01,
  SNPE_UDO_CORETYPE_GPU = 0x02,
  SNPE_UDO_CORETYPE_DSP = 0x04,
  SNPE_UDO_CORETYPE_LAST = 0xFFFFFFFF
} SnpeUdo_CoreType_t;

typedef enum {
  SNPE_UDO_PARAMTYPE_SCALAR = 0x00,
  SNPE_UDO_PARAMTYPE_STRING = 0x01,
  SNPE_UDO_PARAMTYPE_TENSOR = 0x02,
  SNPE_UDO_PARAMTYPE_LAST = 0xFFFFFFFF
} SnpeUdo_ParamType_t;

typedef enum {
  SNPE_UDO_QUANTIZATION_NONE = 0x00,
  SNPE_UDO_QUANTIZATION_TF = 0x01,
  SNPE_UDO_QUANTIZATION_QMN = 0x02,
  SNPE_UDO_QUANTIZATION_LAST = 0xFFFFFFFF
} SnpeUdo_QuantizationType_t;

typedef struct {
  uint32_t major;
  uint32_t minor;
  uint32_t teeny;
} SnpeUdo_Version_t;

typedef struct {
  SnpeUdo_Version_t libVersion;
  SnpeUdo_Version_t apiVersion;
} SnpeUdo_LibVersion_t;

typedef union {
  float floatValue;
  uint32_t uint32Value;
  int32_t int32Value;
  uint16_t uint16Value;
  int16_t int16Value;
  uint8_t uint8Value;
  int8_t int8Value;
} SnpeUdo_Value_t;

typedef struct {
  SnpeUdo_DataType_t dataType;
  SnpeUdo_Value_t dataValue;
} SnpeUdo_ScalarParam_t;

typedef struct {
  float minValue;
  float maxValue;
} SnpeUdo_TFQuantize_t;

typedef struct {
  SnpeUdo_QuantizationType_t quantizeType;
  union {
    SnpeUdo_TFQuantize_t TFParams;
  };
} SnpeUdo_QuantizeParams_t;

typedef struct {
  SnpeUdo_CoreType_t coreType;
  SnpeUdo_DataType_t dataType;
} SnpeUdo_PerCoreDatatype_t;

typedef struct {
  uint32_t* maxDimensions;
  uint32_t* currDimensions;
  SnpeUdo_QuantizeParams_t quantizeParams;
  uint32_t tensorRank;
  SnpeUdo_DataType_t dataType;
  SnpeUdo_TensorLayout_t layout;
  void* tensorData;
} SnpeUdo_TensorParam_t;

typedef struct {
  SnpeUdo_String_t tensorName;
  SnpeUdo_TensorLayout_t layout;
  SnpeUdo_PerCoreDatatype_t* perCoreDatatype;
  bool repeated;
  bool isStatic;
} SnpeUdo_TensorInfo_t;

typedef struct {
  SnpeUdo_ParamType_t paramType;
  SnpeUdo_String_t paramName;
  union {
    SnpeUdo_ScalarParam_t scalarParam;
    SnpeUdo_TensorParam_t tensorParam;
    SnpeUdo_String_t stringParam;
  };
} SnpeUdo_Param_t;

typedef struct {
  SnpeUdo_CoreType_t udoCoreType;
  SnpeUdo_Bitmask_t operationCalculationTypes;
} SnpeUdo_OpCoreInfo_t;

typedef struct {
  SnpeUdo_String_t operationType;
  SnpeUdo_Bitmask_t supportedByCores;
  uint32_t numOfStaticParams;
  SnpeUdo_Param_t* staticParams;
  uint32_t numOfInputs;
  SnpeUdo_String_t* inputNames;
  uint32_t numOfOutputs;
  SnpeUdo_String_t* outputNames;
  uint32_t numOfCoreInfo;
  SnpeUdo_OpCoreInfo_t* opPerCoreInfo;
  SnpeUdo_TensorInfo_t* inputInfos;
  SnpeUdo_TensorInfo_t* outputInfos;
} SnpeUdo_OperationInfo_t;

typedef struct {
  SnpeUdo_CoreType_t udoCoreType;
  SnpeUdo_String_t libraryName;
} SnpeUdo_LibraryInfo_t;

typedef struct {
  SnpeUdo_String_t packageName;
  SnpeUdo_Bitmask_t supportedCoreTypes;
  uint32_t numOfImplementationLib;
  SnpeUdo_LibraryInfo_t* implementationLib;
  SnpeUdo_String_t operationsString;
  uint32_t numOfOperations;
  SnpeUdo_OperationInfo_t* operationsInfo;
} SnpeUdo_RegInfo_t;

typedef struct {
  SnpeUdo_CoreType_t udoCoreType;
  SnpeUdo_String_t operationType;
  uint32_t numOfStaticParams;
  SnpeUdo_Param_t* staticParams;
  uint32_t numOfInputs;
  SnpeUdo_TensorParam_t* inputs;
  uint32_t numOfOutputs;
  SnpeUdo_TensorParam_t* outputs;
} SnpeUdo_OpDefinition_t;

#endif  // SNPE_UDO_BASE_H
