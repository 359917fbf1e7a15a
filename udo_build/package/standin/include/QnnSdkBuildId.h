// Stand-in for the QNN SDK's QnnSdkBuildId.h, written by udo-build for syntax checks only: the
// build id of the SDK a package is built with (the real one names the SDK release).
#pragma once

#define QNN_SDK_BUILD_ID "udo-build-standin"
