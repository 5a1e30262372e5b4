// Buffer donation under replay (docs/design/kv_cache.md). A replay knows
// holders of a rebound handle's old version that let go of it when the step
// ends: the program's resolved captured tensors and the handle itself, which
// the replay rebinds to the new version. While a DonationScope is active on
// this thread, the eval loop's donation test (eval.cc, donated_buffer)
// discounts them, so a `put` into a KV cache writes in place under replay as
// it does eagerly. Any other holder still blocks the donation.
#pragma once
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame::runtime {

struct KnownHolders {
  const Node* node;  // an old version that dies with the step ...
  long nodes;        // ... its references held by the replay and the handles
  long buffers;      // references to its buffer besides the node's own
};

class DonationScope {
 public:
  explicit DonationScope(std::vector<KnownHolders> known);
  ~DonationScope();
  DonationScope(const DonationScope&) = delete;
  DonationScope& operator=(const DonationScope&) = delete;

 private:
  std::vector<KnownHolders> known_;
  const std::vector<KnownHolders>* prev_;
};

// The holders the active scope knows of for n (zeros if none).
KnownHolders known_holders(const Node* n);

}  // namespace pyflame::runtime
