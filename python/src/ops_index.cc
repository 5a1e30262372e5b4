// Bindings of the 'index' op family.
#include "common.h"
#include "pyflame/ops_index.h"

namespace pyflame::py {

void init_ops_index(nb::module_& m) { (void)m; }

}  // namespace pyflame::py
