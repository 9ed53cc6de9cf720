// The build fails if an entry point's signature in abi/shm_entries.def, which the compiler's
// code generator declares the function by, does not spell the parameters the runtime defines
// it with (a wrong width or a pointer for an integer would otherwise be a silent bad call).
#include "shmap_runtime.h"

#include <cstdint>
#include <type_traits>

namespace shm {
namespace {

template <class T> constexpr char code() {
  if constexpr (std::is_void_v<T>) return 'v';
  else if constexpr (std::is_pointer_v<T>) return 'p';
  else if constexpr (std::is_same_v<T, int32_t>) return 'i';
  else if constexpr (std::is_same_v<T, int64_t>) return 'l';
  else if constexpr (std::is_same_v<T, float>) return 'f';
  else if constexpr (std::is_same_v<T, double>) return 'd';
  else return '?';
}

template <class F> struct Spelled;
template <class R, class... A> struct Spelled<R(A...)> {
  static constexpr char text[] = {code<R>(), code<A>()..., '\0'};
};

constexpr bool same(const char *a, const char *b) {
  for (; *a && *a == *b; ++a, ++b) {}
  return *a == *b;
}

#define SHM_ENTRY(Ret, Name, Sig, Params)                                                                    \
  static_assert(same(Spelled<decltype(Name)>::text, Sig), #Name ": its signature in shm_entries.def is " Sig \
                                                                ", which does not spell its parameters");
#include "shm_entries.def"
#undef SHM_ENTRY

} // namespace
} // namespace shm
