// Bindings of the 'norm' op family.
#include "common.h"
#include "pyflame/ops_norm.h"

namespace pyflame::py {

void init_ops_norm(nb::module_& m) { (void)m; }

}  // namespace pyflame::py
