// Stand-in for the HTP core's unique_types.h, written by udo-build for syntax checks only:
// DEFINE_UNIQ_TY() (once per package interface) and UNIQUE_TYPE, as in the SDK header.
#pragma once

#define DEFINE_UNIQ_TY() \
  namespace {            \
  template <int K>       \
  struct UniqTy {};      \
  }  // namespace
#define UNIQUE_TYPE UniqTy<__LINE__>
