// Ops of the 'index' family (see ops.h for the contract).
#pragma once
#include "pyflame/ops.h"

namespace pyflame {}  // namespace pyflame
