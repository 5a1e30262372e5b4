// Bindings of the 'conv' op family.
#include "common.h"
#include "pyflame/ops_conv.h"

namespace pyflame::py {

void init_ops_conv(nb::module_& m) { (void)m; }

}  // namespace pyflame::py
