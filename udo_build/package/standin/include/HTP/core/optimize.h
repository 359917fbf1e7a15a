// Stand-in for the HTP core's optimize.h, written by udo-build for syntax checks only: the
// priorities of optimization rules and the rule macro (the skeletons only show it, commented).
#pragma once

enum : unsigned { EARLY = 2000, MIDDLE = 3000, LATE = 4000 };

#define DEF_PACKAGE_OPTIMIZATION(priority, match, constraint, replacement) \
  static_assert((priority) > 0, "an optimization rule");
