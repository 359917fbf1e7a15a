// Stand-in for the HTP core's constraints.h, written by udo-build for syntax checks only. The
// skeletons include it as the vendor's do; they use nothing of it.
#pragma once
