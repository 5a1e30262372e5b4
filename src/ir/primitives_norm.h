// Primitives of the 'norm' family.
#pragma once
#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_NORM_PRIMITIVES(X)

namespace pyflame {}  // namespace pyflame
