/* Fixture of tests/layers/selftest.sh: plan. With -DCYCLE it calls plan_b back: a cycle
   inside one layer, which layering alone would allow. */
int plan_b(int);
int plan_c(int x) {
#ifdef CYCLE
  return x > 0 ? plan_b(x - 1) : 0;
#else
  return x * 2;
#endif
}
