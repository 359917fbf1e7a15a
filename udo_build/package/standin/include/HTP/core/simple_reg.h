// Stand-in for the HTP core's simple_reg.h, written by udo-build for syntax checks only: the
// tensor types, status, costs and flags of op implementations, and the op registration macros.
// The macros expand to checks only: a registered implementation must be a function returning
// GraphStatus; a parameter order lists (name, mandatory, const Qnn_Param_t* default) triples.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "HTP/core/op_package_name.h"
#include "QnnTypes.h"

enum class GraphStatus { Success, ErrorFatal, ErrorDimensions, ErrorPrecision, ErrorUnsupported };

// The element types of HTP tensors (the SDK's dtype_enum.h).
enum class DType : uint32_t {
  UNKNOWN = 0, QUInt8 = 1, QUInt16 = 2, QInt16 = 3, Float32 = 4, Int32 = 5, QInt32 = 6,
  QInt8 = 7, Float16 = 8, Int64 = 9, BFloat16 = 10
};

// A tensor's element type and quantization (Tensor::get_dtype_intfc()).
struct DTypeScaleOff {
  DType dtype;
  float scale;
  int offset;
  DTypeScaleOff(DType dt, float sc, int zo) : dtype(dt), scale(sc), offset(zo) {}
  explicit DTypeScaleOff(DType dt) : dtype(dt), scale(1.0f), offset(0) {}
  DTypeScaleOff() : DTypeScaleOff(DType::UNKNOWN) {}
};

class Op;

// Tensors: the generic one with the members the sources call, and the typed ones.
class Tensor {
 public:
  size_t total_storage_elements() const;
  DType get_dtype() const;
  DTypeScaleOff get_dtype_intfc() const;
  const void* raw_data_const() const;
  void* raw_data();
};
class PlainFloatTensor : public Tensor {};
class PlainFloat16Tensor : public Tensor {};
class QuantUint8Tensor : public Tensor {};
class QuantUint16Tensor : public Tensor {};
class QuantInt8Tensor : public Tensor {};
class QuantInt16Tensor : public Tensor {};
class QuantInt32Tensor : public Tensor {};
class Int32Tensor : public Tensor {};

enum Cost { GLACIAL, SNAIL, FAST, FREE };

namespace Flags {
enum Flag : unsigned { IS_CONST = 1, INHIBIT_CONST_PROP = 2, RESOURCE_HVX = 4 };
}

// errlog(format, ...): logs an error of an op implementation.
void udo_standin_errlog(const char* format, ...) __attribute__((format(printf, 1, 2)));
#define errlog(...) udo_standin_errlog(__VA_ARGS__)

namespace udo_standin {
// what the SDK's REGISTER_PACKAGE_* statements do: add a table to the package's registry
bool registers(const char* package, const char* table);

template <typename... Args>
bool register_op(GraphStatus (*impl)(Args...), const char* op);
template <typename... Args, typename... Flag>
bool register_op(GraphStatus (*impl)(Args...), const char* op, Cost cost, Flag... flags);

constexpr bool param_triples() { return true; }
template <typename... Rest>
constexpr bool param_triples(const char* name, bool /*mandatory*/,
                             const Qnn_Param_t* /*fallback*/, Rest... rest) {
  return name != nullptr && param_triples(rest...);
}
}  // namespace udo_standin

#define UDO_STANDIN_CAT2(a, b) a##b
#define UDO_STANDIN_CAT(a, b) UDO_STANDIN_CAT2(a, b)
#define UDO_STANDIN_UNIQUE(prefix) UDO_STANDIN_CAT(prefix, __COUNTER__)

#define BEGIN_PKG_OP_DEFINITION(name) static_assert(true, #name)
#define END_PKG_OP_DEFINITION(name) static_assert(true, #name)

#define DEF_PACKAGE_OP(impl, op) \
  static const bool UDO_STANDIN_UNIQUE(udo_standin_op_) = ::udo_standin::register_op(impl, op);
#define DEF_PACKAGE_OP_AND_COST_AND_FLAGS(impl, op, cost, ...)                       \
  static const bool UDO_STANDIN_UNIQUE(udo_standin_op_) =                            \
      ::udo_standin::register_op(impl, op, cost, ##__VA_ARGS__);

#define DEF_PACKAGE_PARAM_ORDER(op, ...)                                              \
  static_assert(::udo_standin::param_triples(__VA_ARGS__), op);
