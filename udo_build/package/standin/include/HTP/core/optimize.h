// Stand-in for the HTP core's optimize.h, written by udo-build for syntax checks only: the
// optimization table of a package, the priorities of optimization rules and the rule macro.
#pragma once

#include "HTP/core/simple_reg.h"

enum : unsigned { EARLY = 2000, MIDDLE = 3000, LATE = 4000 };

#define INIT_PACKAGE_OPTIMIZATION_DEF() static_assert(true, "optimization table");
#define REGISTER_PACKAGE_OPTIMIZATIONS() \
  if (::udo_standin::registers(THIS_PKG_NAME_STR, "optimizations")) {}

#define DEF_PACKAGE_OPTIMIZATION(priority, match, constraint, replacement) \
  static_assert((priority) > 0, "an optimization rule");
