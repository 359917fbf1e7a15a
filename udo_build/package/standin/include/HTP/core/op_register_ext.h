// Stand-in for the HTP core's op_register_ext.h, written by udo-build for syntax checks only:
// tensor properties. DEF_TENSOR_PROPERTIES(Op(type, inputs...), properties...) where a property
// is Flat, Crouton, Tcm or MainMemory over tensor names ("*": the op's outputs).
#pragma once

#include "HTP/core/simple_reg.h"

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
    using namespace ::udo_standin::properties;                                       \
    return tensor_properties(__VA_ARGS__);                                           \
  }();
