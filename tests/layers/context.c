/* Fixture of tests/layers/selftest.sh: a file directly in runtime/, the top layer. */
#include <stdio.h>
int plan_b(int);
int fixture_context(void) {
  return printf("%d\n", plan_b(1));
}
