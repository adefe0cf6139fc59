/* Fixture of tests/layers/selftest.sh: plan, uses core and plan_c (same layer). */
int core_a(int);
int plan_c(int);
int plan_b(int x) {
  return plan_c(core_a(x));
}
