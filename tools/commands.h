#ifndef CLATTN_COMMANDS_H
#define CLATTN_COMMANDS_H

enum { CLI_OK = 0, CLI_CHECK_FAILED = 1, CLI_USAGE = 2, CLI_ERROR = 3 };

int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
