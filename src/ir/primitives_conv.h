// Primitives of the 'conv' family.
#pragma once
#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_CONV_PRIMITIVES(X)

namespace pyflame {}  // namespace pyflame
