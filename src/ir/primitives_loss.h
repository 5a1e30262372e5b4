// Primitives of the 'loss' family.
#pragma once
#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_LOSS_PRIMITIVES(X)

namespace pyflame {}  // namespace pyflame
