// Bindings of the 'llm' op family.
#include "common.h"
#include "pyflame/ops_llm.h"

namespace pyflame::py {

void init_ops_llm(nb::module_& m) { (void)m; }

}  // namespace pyflame::py
