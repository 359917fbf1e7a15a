// Stand-in for the SNPE SDK's SnpeUdo/UdoShared.h (written by udo-build, declarations only): the
// version query every SnpeUdo library exports.
#ifndef SNPE_UDO_SHARED_H
#define SNPE_UDO_SHARED_H

#include "SnpeUdo/UdoBase.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef _WIN32
#define SNPE_API __declspec(dllexport)
#else
#define SNPE_API
#endif

SNPE_API SnpeUdo_ErrorType_t SnpeUdo_getVersion(SnpeUdo_LibVersion_t** version);

typedef SnpeUdo_ErrorType_t (*SnpeUdo_GetVersionFunction_t)(SnpeUdo_LibVersion_t** version);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SNPE_UDO_SHARED_H
