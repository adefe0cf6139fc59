/* Fixture of tests/layers/selftest.sh: the lowest layer. With -DUPWARD it calls up into plan. */
#include <string.h>
extern const char fixture_kernels[];
int plan_b(int);
int core_a(int x) {
#ifdef UPWARD
  return plan_b(x);
#else
  return x + (int)strlen(fixture_kernels); /* libc and the generated object: no upward edge */
#endif
}
