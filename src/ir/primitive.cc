// Equality and hashing of primitives, derived from their declared parameters.
#include <cstring>
#include <typeinfo>

#include "ir/primitives.h"

namespace pyflame {

namespace {
// 64-bit mix (splitmix64's finalizer): every word affects every bit.
uint64_t mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::vector<uint64_t> words_of(const Primitive& p) {
  ParamSink sink;
  p.params(sink);
  return sink.words();
}
}  // namespace

bool Primitive::equal(const Primitive& other) const {
  if (this == &other) return true;
  return typeid(*this) == typeid(other) && std::strcmp(name(), other.name()) == 0 &&
         words_of(*this) == words_of(other);
}

size_t Primitive::hash() const {
  uint64_t h = typeid(*this).hash_code();
  for (const char* c = name(); *c; ++c) h = mix(h, static_cast<unsigned char>(*c));
  for (uint64_t w : words_of(*this)) h = mix(h, w);
  return static_cast<size_t>(h);
}

// Every primitive of the backends' list declares its parameters (the pure
// virtual params() already refuses to build one that does not; this says so
// at the list, with the class's name).
#define PF_CHECK_PARAMS(Cls) \
  static_assert(!std::is_abstract_v<Cls>, #Cls " must declare its parameters (PF_PARAMS)");
PF_FOR_EACH_PRIMITIVE(PF_CHECK_PARAMS)
#undef PF_CHECK_PARAMS

}  // namespace pyflame
