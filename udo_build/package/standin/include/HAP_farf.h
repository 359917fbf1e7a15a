// Stand-in for the Hexagon SDK's HAP_farf.h, written by udo-build for syntax checks only:
// FARF(LEVEL, format, ...) logs a printf-style message at LEVEL (LOW, MEDIUM, HIGH, ERROR, FATAL).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif
void udo_standin_farf(const char* level, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
#ifdef __cplusplus
}
#endif

#define FARF(level, ...) udo_standin_farf(#level, __VA_ARGS__)
