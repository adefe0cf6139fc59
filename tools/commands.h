#ifndef CLATTN_COMMANDS_H
#define CLATTN_COMMANDS_H

enum { CLI_OK = 0, CLI_CHECK_FAILED = 1, CLI_USAGE = 2, CLI_ERROR = 3 };

int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* `clattn run --kv-cache` (cmd_run_kv.c): its check, time and bandwidth; a CLI_* status. */
struct clattn_context;
struct check_spec;
struct check_kv;
int cmd_run_kv(struct clattn_context *ctx, struct check_spec *sp, struct check_kv *kv);

#endif
