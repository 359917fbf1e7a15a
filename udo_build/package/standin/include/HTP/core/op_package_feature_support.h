// Stand-in for the HTP core's op_package_feature_support.h, written by udo-build for syntax
// checks only: the macros of a package interface that set up and fill the HTP core's tables.
#pragma once

#include "HTP/core/simple_reg.h"

#define INIT_PACKAGE_OP_DEF() static_assert(true, "op table");
#define INIT_PACKAGE_OPTIMIZATION_DEF() static_assert(true, "optimization table");
#define INIT_PACKAGE_PARAM_ORDER_DEF() static_assert(true, "parameter order table");
#define INIT_PKG_CORE_INIT_FUNC() static_assert(true, "core init");

#define BEGIN_PKG_OPS_OPTS_LIST() static_assert(true, "ops list");
#define DECLARE_PKG_OPS_OPTS_LIST(name) static_assert(true, #name);
#define END_PKG_OPS_OPTS_LIST() static_assert(true, "ops list");

#define REGISTER_PACKAGE_OPS() ((void)0)
#define REGISTER_PACKAGE_OPTIMIZATIONS() ((void)0)
#define REGISTER_PACKAGE_PARAM_ORDERS() ((void)0)
