#include "pyflame/tensor.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>
#include <sstream>

#include "ir/primitives.h"
#include "pyflame/autograd.h"
#include "pyflame/checked.h"
#include "pyflame/ops.h"
#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/trace.h"

namespace pyflame {

namespace {
std::atomic<uint64_t> g_next_id{1};

// An op output joins the autograd graph when grad mode is on, it is
// floating point, and some input requires grad.
bool records_grad(Dtype dtype, const std::vector<Tensor>& inputs) {
  if (!is_floating(dtype) || !is_grad_enabled()) return false;
  for (const auto& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// Whether a node's vjp reads its inputs' values (PyTorch's saved tensors):
// views, copies, casts, put, sums and differences do not, so writing their
// inputs in place afterwards is allowed, as in PyTorch.
bool vjp_reads_inputs(const Primitive* p) {
  if (!p || p->is_view()) return false;
  if (auto* b = dynamic_cast<const Binary*>(p)) {
    return b->op != BinaryOp::Add && b->op != BinaryOp::Sub;
  }
  return !dynamic_cast<const AsType*>(p) && !dynamic_cast<const ToDevice*>(p) &&
         !dynamic_cast<const Put*>(p);
}

// Node::version is replaced by writes (Python threads) while backward() may
// read it on another thread.
std::mutex g_version_mu;

uint32_t version_of(const Node* n) {
  std::lock_guard<std::mutex> lock(g_version_mu);
  return n && n->version ? n->version->load() : 0;
}

// What backward() compares against: the inputs' write counts now.
void record_input_versions(Node& n) {
  if (!n.requires_grad || !vjp_reads_inputs(n.prim.get())) return;
  n.input_versions.resize(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) n.input_versions[i] = version_of(n.inputs[i].node());
}
}  // namespace

uint64_t next_node_id() { return g_next_id.load(std::memory_order_relaxed); }

Node::Node() : id(g_next_id.fetch_add(1, std::memory_order_relaxed)) {}

Node::~Node() {
  // Destroying a node may release the last reference to its inputs, and
  // theirs, down a chain as long as the graph: unroll that with a worklist
  // so a 100,000-op chain is freed without deep recursion.
  std::vector<std::shared_ptr<Node>> work;
  auto take = [&work](std::vector<Tensor>& ins) {
    for (auto& t : ins) {
      if (t.node_ && t.node_.use_count() == 1) work.push_back(std::move(t.node_));
    }
    ins.clear();
  };
  take(inputs);
  while (!work.empty()) {
    std::shared_ptr<Node> n = std::move(work.back());
    work.pop_back();
    take(n->inputs);
  }  // each popped node dies here with no inputs left
}

int64_t shape_size(const Shape& s) { return checked_shape_size(s, "shape"); }

Strides row_major_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc = checked_mul(acc, std::max<int64_t>(s[i], 1), "strides");
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

Tensor Tensor::make(Shape shape, Dtype dtype, Device device, std::shared_ptr<Primitive> prim,
                    std::vector<Tensor> inputs) {
  // Every op output passes here: its byte count must fit before anything
  // (strides, the allocation, kernels' loops) is derived from the shape.
  checked_nbytes(shape, pyflame::itemsize(dtype), prim ? prim->name() : "tensor");
  auto n = std::make_shared<Node>();
  n->strides = row_major_strides(shape);
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->device = device;
  n->prim = std::move(prim);
  n->inputs = std::move(inputs);
  n->requires_grad = records_grad(n->dtype, n->inputs);
  record_input_versions(*n);
  return Tensor(std::move(n));
}

Tensor Tensor::make_view(Shape shape, Strides strides, int64_t offset,
                         std::shared_ptr<Primitive> prim, const Tensor& base) {
  // A view may repeat elements (stride 0) but its size, byte count and the
  // offsets it reaches must still fit 64 bits.
  const char* fn = prim ? prim->name() : "view";
  checked_nbytes(shape, base.itemsize(), fn);
  const OffsetRange r = checked_offset_range(shape, strides, offset, fn);
  checked_mul(r.lo, static_cast<int64_t>(base.itemsize()), fn, "offset");
  checked_mul(r.hi, static_cast<int64_t>(base.itemsize()), fn, "offset");
  auto n = std::make_shared<Node>();
  n->shape = std::move(shape);
  n->strides = std::move(strides);
  n->offset = offset;
  n->dtype = base.dtype();
  n->device = base.device();
  n->requires_grad = records_grad(n->dtype, {base});
  if (base.is_evaluated()) n->buffer = base.buffer();  // computed: share, no kernel
  // Otherwise the view is just data; a traced view keeps how it was made.
  if (!n->buffer || n->requires_grad || runtime::active_trace()) {
    n->prim = std::move(prim);
    n->inputs = {base};
  }
  record_input_versions(*n);
  return Tensor(std::move(n));
}

Tensor Tensor::from_host(const void* data, Shape shape, Dtype dtype) {
  const size_t bytes = checked_nbytes(shape, pyflame::itemsize(dtype), "tensor");
  auto n = std::make_shared<Node>();
  n->strides = row_major_strides(shape);
  n->shape = std::move(shape);
  n->dtype = dtype;
  n->device = Device::cpu();
  n->buffer = allocate(Device::cpu(), bytes);
  if (bytes) std::memcpy(n->buffer->ptr, data, bytes);
  return Tensor(std::move(n));
}

int64_t Tensor::shape(int axis) const {
  return node_->shape[normalize_axis(axis, ndim(), "shape")];
}

int64_t Tensor::size() const { return shape_size(node_->shape); }

bool Tensor::is_row_contiguous() const {
  const auto& sh = node_->shape;
  const auto& st = node_->strides;
  int64_t expect = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (sh[i] != 1 && st[i] != expect) return false;
    expect *= sh[i];
  }
  return true;
}

bool Tensor::is_evaluated() const {
  switch (node_->state.load(std::memory_order_acquire)) {
    case NodeState::Done: return true;
    case NodeState::Running: return false;  // its buffer is being written
    default: return node_->buffer != nullptr;  // no evaluation touches it
  }
}

void* Tensor::raw_data() const {
  if (!node_->buffer) throw RuntimeError("[data] tensor is not evaluated");
  return static_cast<char*>(node_->buffer->ptr) + node_->offset * itemsize();
}

void Tensor::eval() const { pyflame::eval({*this}); }

void Tensor::set_requires_grad(bool on) {
  Node* n = node_.get();
  if (on == n->requires_grad && (!on || n->grad_leaf)) return;
  if (!is_leaf()) {
    throw ValueError(errmsg("requires_grad", "can only be changed on leaf tensors; use "
                                             "detach() to get a leaf from a computed tensor"));
  }
  if (on && !is_floating(n->dtype)) {
    throw ValueError(errmsg("requires_grad", std::string("only floating-point tensors can "
                                                         "require gradients, got ") +
                                                 dtype_name(n->dtype)));
  }
  n->requires_grad = on;
  n->grad_leaf = on;
}

namespace {
std::mutex g_grad_slot_mu;  // .grad is read and replaced from any thread
}

Tensor Tensor::grad() const {
  std::shared_ptr<Node> g;
  {
    std::lock_guard<std::mutex> lock(g_grad_slot_mu);
    g = node_->grad;
  }
  runtime::trace_grad_read(node_, g);
  return g ? Tensor(std::move(g)) : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined() && (g.shape() != shape() || g.device() != device())) {
    throw ValueError(errmsg("grad", "assigned gradient " + g.str() + " does not match " + str()));
  }
  runtime::trace_grad_write(node_);
  std::shared_ptr<Node> old;  // released outside the lock: its destructor may run a graph
  std::lock_guard<std::mutex> lock(g_grad_slot_mu);
  old = std::exchange(node_->grad, g.node_ptr());
}

namespace {
std::mutex g_binding_mu;  // Node::binding of every node (set once, rarely read)
}

std::shared_ptr<Binding> binding_of(const Node* n) {
  std::lock_guard<std::mutex> lock(g_binding_mu);
  return n->binding;
}

std::shared_ptr<Binding> install_binding(Node* n, std::shared_ptr<Binding> fresh) {
  std::lock_guard<std::mutex> lock(g_binding_mu);
  if (!n->binding) n->binding = std::move(fresh);
  return n->binding;
}

void Tensor::rebind(const Tensor& other) {
  std::shared_ptr<Binding> b = node_ ? binding_of(node_.get()) : nullptr;
  if (node_ && !b) b = install_binding(node_.get(), std::make_shared<Binding>());
  node_ = other.node_;
  if (!b || !node_) return;
  install_binding(node_.get(), b);
  std::lock_guard<std::mutex> lock(b->mu);
  b->latest = node_;
}

std::shared_ptr<Node> Binding::current() const {
  std::lock_guard<std::mutex> lock(mu);
  return latest.lock();
}

uint32_t Tensor::version() const { return version_of(node_.get()); }

void Tensor::bump_version() {
  std::lock_guard<std::mutex> lock(g_version_mu);
  if (!node_->version) node_->version = std::make_shared<std::atomic<uint32_t>>(0);
  node_->version->fetch_add(1);
}

void Tensor::share_version(const Tensor& other) {
  std::lock_guard<std::mutex> lock(g_version_mu);
  if (!other.node_->version) other.node_->version = std::make_shared<std::atomic<uint32_t>>(0);
  node_->version = other.node_->version;
}

bool Tensor::is_view_of(const Tensor& base) const {
  if (node_ == base.node_) return false;
  // Buffers are read only once published (an evaluation may be writing them).
  if (is_evaluated() && base.is_evaluated() && node_->buffer &&
      node_->buffer == base.node_->buffer) {
    return true;
  }
  const Node* n = node_.get();  // down a chain of views (x[:, 1:] slices twice)
  while (n->prim && n->prim->is_view() && n->inputs.size() == 1) {
    n = n->inputs[0].node();
    if (n == base.node()) return true;
  }
  return false;
}

void Tensor::copy_to_host(void* dst) const {
  runtime::trace_host_read("a host read (item(), numpy(), bool() or a copy to the host)");
  if (device().is_cpu()) {
    eval();
    runtime::copy_host_contiguous(*this, dst);
    return;
  }
  // One evaluation computes the tensor and downloads it into dst (on the
  // evaluation's stream), with no host tensor in between.
  Tensor src = contiguous(*this);
  Tensor::make({}, Dtype::UInt8, Device::cpu(), std::make_shared<DownloadTo>(dst), {src}).eval();
}

std::string Tensor::str() const {
  return std::string("Tensor(shape=") + shape_str(shape()) + ", dtype=" + dtype_name(dtype()) +
         ", device=" + device().str() + ")";
}

}  // namespace pyflame
