// Stand-in for the host-side operation base class of the vendor's GPU op package examples,
// written by udo-build for syntax checks only (declarations, no implementation).
#pragma once

#include "GPU/QnnGpuOpPackage.h"

class Operation {
 public:
  virtual ~Operation();
  // the operation as the backend takes it: its kernels, work sizes and arguments
  QnnGpuOpPackage_Operation_t* getOperationInfo();

 protected:
  explicit Operation(const QnnGpuOpPackage_Node_t* node);
  void addKernel(const QnnGpuOpPackage_Kernel_t& kernel);
  const QnnGpuOpPackage_Node_t* node() const;
};
