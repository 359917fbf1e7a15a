// Stand-in for the HTP core's op_package_name.h, written by udo-build for syntax checks only:
// THIS_PKG_NAME_STR, the package name the Makefile passes as -DTHIS_PKG_NAME=<PackageName> ("" when
// it is not given, as in the SDK header).
#pragma once

#ifndef THIS_PKG_NAME
#define THIS_PKG_NAME_STR ""
#else
#define UDO_STANDIN_STR(x) #x
#define UDO_STANDIN_STR2(x) UDO_STANDIN_STR(x)
#define THIS_PKG_NAME_STR UDO_STANDIN_STR2(THIS_PKG_NAME)
#endif
