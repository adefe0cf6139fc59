/* The `clattn` command: a front end over the public API only. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: clattn <command> [options]\n"
          "\n"
          "commands:\n"
          "  devices   list OpenCL platforms and devices, their memory, and the tiles a sample\n"
          "            problem would get on each\n"
          "  run       run one attention problem on random data, check it against the host\n"
          "            reference, print the plan, time and GFLOP/s (`clattn run --help`)\n"
          "  tune      find the fastest tiles per problem class on this device and store them in\n"
          "            the tuning database (`clattn tune --help`)\n"
          "  explain   the config a problem gets, where it came from, and which tiles are\n"
          "            illegal on this device and why, and the modelled global-memory traffic of\n"
          "            the fused and standard plans\n"
          "  bench     fused vs standard attention (and OpenBLAS on the host, for CPUs) over a\n"
          "            sweep of shapes: time, TFLOP/s, traffic, memory (`clattn bench --help`)\n"
          "\n"
          "environment: CLATTN_DEVICE, CLATTN_CACHE_DIR, CLATTN_TUNING_DB, CLATTN_KERNEL_DIR,\n"
          "             CLATTN_WORKSPACE_LIMIT\n"
          "exit codes: 0 success, 1 a result failed its check, 2 usage error, 3 clattn error\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
  if (!strcmp(cmd, "tune")) return cmd_tune(argc - 1, argv + 1);
  if (!strcmp(cmd, "explain")) return cmd_explain(argc - 1, argv + 1);
  if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    usage(stdout);
    return CLI_OK;
  }
  fprintf(stderr, "clattn: unknown command '%s'\n", cmd);
  usage(stderr);
  return CLI_USAGE;
}
