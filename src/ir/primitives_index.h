// Primitives of the 'index' family.
#pragma once
#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_INDEX_PRIMITIVES(X)

namespace pyflame {}  // namespace pyflame
