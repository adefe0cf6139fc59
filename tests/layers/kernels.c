/* Fixture of tests/layers/selftest.sh: generated data outside runtime/, counted as core. */
const char fixture_kernels[] = "__kernel void k(void) {}";
