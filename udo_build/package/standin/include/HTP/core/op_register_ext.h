// Stand-in for the HTP core's op_register_ext.h, written by udo-build for syntax checks only:
// the op table and core init function of a package, and tensor properties:
// DEF_TENSOR_PROPERTIES(Op(type, inputs...), properties...) where a property is Flat, Crouton,
// Tcm or MainMemory over tensor names ("*": the op's outputs).
#pragma once

#include "HTP/core/op_package_name.h"
#include "HTP/core/simple_reg.h"

// the op table of a package and the entry point the HTP core loads it through
#define INIT_PACKAGE_OP_DEF() static_assert(true, "op table");
#define INIT_PKG_CORE_INIT_FUNC() static_assert(true, "core init");
#define REGISTER_PACKAGE_OPS() \
  if (::udo_standin::registers(THIS_PKG_NAME_STR, "ops")) {}

namespace udo_standin {
namespace properties {
struct Property {};
template <typename... Names> Property Op(const char* type, Names... inputs);
template <typename... Names> Property Flat(Names... names);
template <typename... Names> Property Crouton(Names... names);
template <typename... Names> Property Tcm(Names... names);
template <typename... Names> Property MainMemory(Names... names);
template <typename... Properties> bool tensor_properties(Property op, Properties... properties);
}  // namespace properties
}  // namespace udo_standin

#define DEF_TENSOR_PROPERTIES(...)                                                    \
  static const bool UDO_STANDIN_UNIQUE(udo_standin_properties_) = [] {               \
    using ::udo_standin::properties::Op; /* hides the class Op */                    \
    using namespace ::udo_standin::properties;                                       \
    return tensor_properties(__VA_ARGS__);                                           \
  }();
