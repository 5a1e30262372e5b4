// Tensor: a handle to a node of the lazy graph. Creating a tensor through an
// op records a node; evaluation (eval(), item(), host copies) runs the graph.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pyflame/device.h"
#include "pyflame/dtype.h"

namespace pyflame {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements; may be 0 or negative

class Primitive;
struct Node;
class Tensor;

// Device memory owned by one or more tensors (views share it).
struct Buffer {
  using Deleter = void (*)(void* ptr, void* ctx);
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device;
  Deleter deleter = nullptr;
  void* ctx = nullptr;  // backend state for the deleter (e.g. stream)

  Buffer(void* p, size_t n, Device d, Deleter del, void* c = nullptr)
      : ptr(p), bytes(n), device(d), deleter(del), ctx(c) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (deleter) deleter(ptr, ctx);
  }
};

// One graph node. Layout (shape, strides, offset) is fixed when the node is
// recorded: non-view ops produce row-major outputs, views derive theirs.
// Evaluation state (see runtime/eval.cc): an evaluation claims a pending node
// before computing it, so threads sharing a graph compute each node once.
enum class NodeState : uint32_t { Pending, Running, Done };

// What a tensor handle rebound by in-place writes (Tensor::rebind: optimizer
// steps, running statistics, x.add_()) holds now. Every version of the
// handle's value shares one Binding, so a compiled function that captured
// one version reads the latest one (docs/design/replay.md).
// The handle's post-accumulate-grad hooks live here too, so an optimizer
// step that rebinds a parameter keeps them (autograd.h).
struct GradHookList;
struct Binding {
  std::shared_ptr<Node> current() const;  // null once no handle holds it
  mutable std::mutex mu;
  std::weak_ptr<Node> latest;
  std::shared_ptr<GradHookList> grad_hooks;  // guarded by mu; null until a hook is registered
};

struct Node {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // elements from buffer start
  Dtype dtype = Dtype::Float32;
  Device device;
  std::shared_ptr<Buffer> buffer;     // set once evaluated
  std::shared_ptr<Primitive> prim;    // null for leaves (constants)
  std::vector<Tensor> inputs;         // dropped after evaluation
  // Autograd: a node that requires grad keeps its inputs and primitive after
  // evaluation so backward() can walk them. A grad leaf (requires_grad set
  // by the user) is where backward stops and accumulates `grad`.
  bool requires_grad = false;
  bool grad_leaf = false;
  bool graph_released = false;  // backward() already walked and freed this part
  std::shared_ptr<Node> grad;       // guarded: read and set through Tensor
  // In-place writes (docs/design/inplace.md): a counter shared by every
  // version and view of a written tensor (null until the first write), and,
  // on nodes that record gradients, the counts their inputs' counters had
  // when the node was recorded; backward() raises where they differ.
  std::shared_ptr<std::atomic<uint32_t>> version;
  std::vector<uint32_t> input_versions;
  uint64_t id = 0;
  // Null until rebound (or captured by a trace); read and set through
  // binding_of / install_binding below.
  std::shared_ptr<Binding> binding;
  // Pending until an evaluation claims it (Running), Done once its buffer is
  // published. A node made with data may still read Pending: its first
  // evaluation marks it Done without computing.
  std::atomic<NodeState> state{NodeState::Pending};

  Node();
  ~Node();  // iterative: a long chain must not overflow the stack
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
};

// A node's Binding (null if none), and the one it has after installing
// `fresh` when it had none. Under a lock: threads tracing functions over one
// shared tensor (a weight every thread's compiled function captures) may
// give it a Binding at the same time.
std::shared_ptr<Binding> binding_of(const Node* n);
std::shared_ptr<Binding> install_binding(Node* n, std::shared_ptr<Binding> fresh);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<Node> n) : node_(std::move(n)) {}

  // Records a node computing `prim` from `inputs`, with a row-major layout.
  static Tensor make(Shape shape, Dtype dtype, Device device,
                     std::shared_ptr<Primitive> prim, std::vector<Tensor> inputs);
  // Records a node with an explicit (view) layout over its first input.
  static Tensor make_view(Shape shape, Strides strides, int64_t offset,
                          std::shared_ptr<Primitive> prim, const Tensor& base);
  // An evaluated tensor holding a copy of host data laid out row-major.
  static Tensor from_host(const void* data, Shape shape, Dtype dtype);

  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const { return node_->shape; }
  int64_t shape(int axis) const;  // negative axes count from the end
  const Strides& strides() const { return node_->strides; }
  int64_t offset() const { return node_->offset; }
  Dtype dtype() const { return node_->dtype; }
  Device device() const { return node_->device; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  int64_t size() const;
  size_t itemsize() const { return pyflame::itemsize(dtype()); }
  size_t nbytes() const { return size() * itemsize(); }

  // True once the node's data exists and is complete; false while another
  // thread is computing it.
  bool is_evaluated() const;
  bool is_row_contiguous() const;
  Primitive* primitive() const { return node_->prim.get(); }
  const std::vector<Tensor>& inputs() const { return node_->inputs; }
  const std::shared_ptr<Buffer>& buffer() const { return node_->buffer; }

  // Pointer to the first element (evaluated tensors only).
  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  void eval() const;
  // Evaluates, moves to the host and copies row-major into dst (nbytes()).
  void copy_to_host(void* dst) const;
  std::string str() const;  // short description: shape, dtype, device

  // Autograd state (see pyflame/autograd.h).
  bool requires_grad() const { return node_->requires_grad; }
  // Leaves are tensors that do not require grad and those the user marked.
  bool is_leaf() const { return !node_->requires_grad || node_->grad_leaf; }
  // Marks a floating-point tensor as a leaf whose gradient backward() keeps.
  void set_requires_grad(bool on);
  Tensor grad() const;              // undefined until backward() reaches it
  void set_grad(const Tensor& g);   // undefined clears

  // In-place writes: the write count of this tensor's storage (0 if never
  // written); bump_version() counts one more write, share_version() makes
  // this node count with `other` (a new version or a view of it).
  uint32_t version() const;
  void bump_version();
  void share_version(const Tensor& other);
  // Whether this tensor is a view sharing base's storage (a view op's
  // output, evaluated or not).
  bool is_view_of(const Tensor& base) const;

  // Makes this handle hold `other`'s node (an in-place update), and
  // records it as the latest version of this handle's Binding.
  void rebind(const Tensor& other);

  Node* node() const { return node_.get(); }
  const std::shared_ptr<Node>& node_ptr() const { return node_; }
  uint64_t id() const { return node_->id; }

 private:
  friend struct Node;  // its destructor unlinks inputs without recursion
  std::shared_ptr<Node> node_;
};

// The id the next recorded node will get (ids only grow): a tensor whose
// id() is at least this was recorded afterwards.
uint64_t next_node_id();

// Evaluates several tensors in one pass over their common graph.
void eval(const std::vector<Tensor>& outputs);

Strides row_major_strides(const Shape& shape);
int64_t shape_size(const Shape& shape);
std::string shape_str(const Shape& shape);  // "(2,3)"

}  // namespace pyflame
