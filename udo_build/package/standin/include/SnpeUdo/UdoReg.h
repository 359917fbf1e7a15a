// Stand-in for the SNPE SDK's SnpeUdo/UdoReg.h (written by udo-build, declarations only): the
// functions a registration library exports, which the SNPE runtime calls before any other.
#ifndef SNPE_UDO_REG_H
#define SNPE_UDO_REG_H

#include "SnpeUdo/UdoShared.h"

#ifdef __cplusplus
extern "C" {
#endif

SnpeUdo_ErrorType_t SnpeUdo_initRegLibrary(void);
typedef SnpeUdo_ErrorType_t (*SnpeUdo_InitRegLibraryFunction_t)(void);

SnpeUdo_ErrorType_t SnpeUdo_getRegLibraryVersion(SnpeUdo_LibVersion_t** version);
typedef SnpeUdo_ErrorType_t (*SnpeUdo_getRegLibraryVersion_t)(SnpeUdo_LibVersion_t** version);

SnpeUdo_ErrorType_t SnpeUdo_terminateRegLibrary(void);
typedef SnpeUdo_ErrorType_t (*SnpeUdo_TerminateRegLibraryFunction_t)(void);

SnpeUdo_ErrorType_t SnpeUdo_getRegInfo(SnpeUdo_RegInfo_t** registrationInfo);
typedef SnpeUdo_ErrorType_t (*SnpeUdo_GetRegInfoFunction_t)(SnpeUdo_RegInfo_t** registrationInfo);

SnpeUdo_ErrorType_t SnpeUdo_validateOperation(SnpeUdo_OpDefinition_t* opDefinition);
typedef SnpeUdo_ErrorType_t (*SnpeUdo_ValidateOperationFunction_t)(
    SnpeUdo_OpDefinition_t* opDefinition);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SNPE_UDO_REG_H
