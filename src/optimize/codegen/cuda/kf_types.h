// Plain C++ types shared by the host (.cpp, torch side) and device (.cu) translation units of a generated
// extension: the iteration shape, strided input views and runtime scalars a launcher takes.
#pragma once
#include <stdint.h>

#define KF_MAX_DIMS 6
#define KF_MAX_SCALARS 16

// The iteration space of a launch: sizes of the (broadcast) output, outermost first.
struct KfShape {
  int ndim;
  int64_t size[KF_MAX_DIMS];
};

// One input seen through the iteration space: element strides per dimension of KfShape, 0 where the input
// is broadcast. The element type is a template argument of the launcher, not stored here.
struct KfTensorRef {
  const void* data;
  int64_t stride[KF_MAX_DIMS];
};

// Runtime scalars of a region (model attributes such as a scaling factor, eps): passed by value.
struct KfScalars {
  float v[KF_MAX_SCALARS];
};
