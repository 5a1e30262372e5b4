// Bindings of the 'loss' op family.
#include "common.h"
#include "pyflame/ops_loss.h"

namespace pyflame::py {

void init_ops_loss(nb::module_& m) { (void)m; }

}  // namespace pyflame::py
