// Stand-in for the HTP core's op_package_feature_support.h, written by udo-build for syntax
// checks only: parameter orders, axis parameters and per-channel quantized ops of a package (the
// DEF/LIST macros at file scope, the REGISTER macros as statements in the package's init, without
// a trailing semicolon as in the SDK), and the ops/optimizations list of the package interface.
#pragma once

#include <string>

#include "HTP/core/op_package_name.h"
#include "HTP/core/simple_reg.h"

namespace udo_standin {
template <typename... Names>
bool names(Names... names);
}  // namespace udo_standin

#define INIT_PACKAGE_PARAM_ORDER_DEF() static_assert(true, "parameter order table");

#define DEF_PACKAGE_PARAM_ORDER(op, ...)                                              \
  static_assert(::udo_standin::param_triples(__VA_ARGS__), op);
#define REGISTER_PACKAGE_PARAM_ORDERS() \
  if (::udo_standin::registers(THIS_PKG_NAME_STR, "parameter orders")) {}

#define LIST_PACKAGE_AXIS_PARAMS(...) \
  static const bool UDO_STANDIN_UNIQUE(udo_standin_axes_) = ::udo_standin::names(__VA_ARGS__);
#define REGISTER_PACKAGE_AXIS_PARAMS() \
  if (::udo_standin::registers(THIS_PKG_NAME_STR, "axis parameters")) {}

#define LIST_PACKAGE_PER_CHANNEL_QUANTIZED_OPS(...) \
  static const bool UDO_STANDIN_UNIQUE(udo_standin_per_channel_) = ::udo_standin::names(__VA_ARGS__);
#define REGISTER_PACKAGE_PER_CHANNEL_QUANTIZED_OPS() \
  if (::udo_standin::registers(THIS_PKG_NAME_STR, "per-channel quantized ops")) {}

// (in the SDK these come from the op and optimization registration headers)
#define BEGIN_PKG_OPS_OPTS_LIST() static_assert(true, "ops list");
#define DECLARE_PKG_OPS_OPTS_LIST(name) static_assert(true, #name);
#define END_PKG_OPS_OPTS_LIST() static_assert(true, "ops list");
