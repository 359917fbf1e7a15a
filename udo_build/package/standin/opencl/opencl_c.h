// Stand-in for the OpenCL C built-ins, written by udo-build to check the syntax of the generated
// kernels as C (g++ -x c -fsyntax-only -include opencl_c.h): qualifiers, types, functions used.
#pragma once

#include <stddef.h>

#define __kernel
#define __global
#define __local
#define __constant const
#define __private

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef unsigned short half;

size_t get_global_id(uint dimension);
size_t get_global_size(uint dimension);
size_t get_local_id(uint dimension);
int printf(const char* restrict format, ...);
