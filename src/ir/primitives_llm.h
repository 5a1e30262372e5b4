// Primitives of the 'llm' family.
#pragma once
#include "ir/primitive.h"

// Every primitive of this family, for the backends' lists.
#define PF_LLM_PRIMITIVES(X)

namespace pyflame {}  // namespace pyflame
