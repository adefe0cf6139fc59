/* A context shared by threads: the diagnostics text a reader holds stays valid and unchanged
 * while other threads add warnings, and error messages belong to one (context, thread) pair:
 * a new thread reads "", and the slots do not pile up as threads come and go. The threads make
 * cheap calls only (validation failures), since PoCL compiles slowly. */
#include "common.h"
#include "tune.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WRITERS = 8, WARNINGS = 40, SNAPSHOTS = 64 };

typedef struct {
  clattn_context *ctx;
  int id;
  char problem[256];    /* "" when all went well, else what went wrong (asserted by main) */
  atomic_size_t *reads; /* the diagnostics reader's count of reads, when there is one */
} worker;

/* A failing call whose message names this thread (dtype 100 + id), then the check that the
 * calling thread reads its own message. */
static void fail_own_call(worker *w) {
  clattn_problem p = {0};
  p.batch = p.heads_q = p.seqlen_q = p.seqlen_kv = 1, p.head_dim = 8;
  p.dtype = (clattn_dtype)(100 + w->id);
  clattn_status st = clattn_forward(w->ctx, &p, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL);
  char want[64];
  snprintf(want, sizeof want, "dtype %d ", 100 + w->id);
  const char *msg = clattn_last_error(w->ctx);
  if (st != CLATTN_ERR_INVALID_ARGUMENT || !strstr(msg, want))
    snprintf(w->problem, sizeof w->problem, "thread %d: status %d, message \"%.150s\"", w->id,
             (int)st, msg);
}

/* Warnings as the runtime adds them (with the context's lock held), between failing calls.
 * After each, the writer waits for the reader to finish a read, so that reads and warnings
 * interleave even on a loaded machine. */
static void *writer(void *arg) {
  worker *w = arg;
  for (int i = 0; i < WARNINGS && !w->problem[0]; i++) {
    pthread_mutex_lock(&w->ctx->lock);
    clattn__warn(w->ctx, "thread %d warning %d", w->id, i);
    pthread_mutex_unlock(&w->ctx->lock);
    size_t seen = atomic_load(w->reads);
    while (atomic_load(w->reads) < seen + 2) sched_yield();
    fail_own_call(w);
  }
  return NULL;
}

typedef struct {
  clattn_context *ctx;
  atomic_int *stop;
  const char *ptr[SNAPSHOTS];
  char *copy[SNAPSHOTS];
  int n;
  atomic_size_t reads;
} reader_state;

/* Reads the diagnostics in a loop, reading every byte, and keeps the pointer and a copy of the
 * text of each new version it sees. */
static void *reader(void *arg) {
  reader_state *r = arg;
  while (!atomic_load(r->stop)) {
    const char *d = clattn_context_diagnostics(r->ctx);
    size_t len = strlen(d);
    atomic_fetch_add(&r->reads, 1);
    if (r->n < SNAPSHOTS && (r->n == 0 || d != r->ptr[r->n - 1]) && len > 0) {
      r->ptr[r->n] = d;
      r->copy[r->n] = strdup(d);
      r->n++;
    }
  }
  return NULL;
}

Test(threads, diagnostics_stay_valid_while_others_warn) {
  clattn_context *ctx = test_context(NULL);
  atomic_int stop = 0;
  reader_state r = {ctx, &stop, {0}, {0}, 0, 0};
  atomic_init(&r.reads, 0);
  pthread_t rt, wt[WRITERS];
  worker w[WRITERS];
  cr_assert_eq(pthread_create(&rt, NULL, reader, &r), 0);
  for (int i = 0; i < WRITERS; i++) {
    w[i] = (worker){ctx, i, "", &r.reads};
    cr_assert_eq(pthread_create(&wt[i], NULL, writer, &w[i]), 0);
  }
  for (int i = 0; i < WRITERS; i++) pthread_join(wt[i], NULL);
  atomic_store(&stop, 1);
  pthread_join(rt, NULL);
  for (int i = 0; i < WRITERS; i++) cr_expect_str_empty(w[i].problem, "%s", w[i].problem);
  /* Every text handed out is still there, as it was when handed out. */
  for (int s = 0; s < r.n; s++) {
    cr_expect_str_eq(r.ptr[s], r.copy[s], "diagnostics snapshot %d changed after it was read", s);
    free(r.copy[s]);
  }
  const char *all = clattn_context_diagnostics(ctx);
  for (int t = 0; t < WRITERS; t++)
    for (int i = 0; i < WARNINGS; i++) {
      char line[64];
      snprintf(line, sizeof line, "thread %d warning %d\n", t, i);
      cr_expect(strstr(all, line), "diagnostics lack \"%s\"", line);
    }
  cr_expect_gt(r.n, 1, "the reader saw %d versions: no overlap with the writers", r.n);
  cr_log_info("%zu reads, %d versions kept", atomic_load(&r.reads), r.n);
  clattn_context_destroy(ctx);
}

static void *fail_and_exit(void *arg) {
  fail_own_call(arg);
  return NULL;
}

static void *read_error(void *arg) {
  worker *w = arg;
  const char *msg = clattn_last_error(w->ctx);
  if (msg[0])
    snprintf(w->problem, sizeof w->problem, "a new thread read \"%.150s\" instead of \"\"", msg);
  return NULL;
}

/* Threads that set an error and exit, each followed by a new thread (which often reuses the
 * dead one's id): the new one has made no call on ctx, so it reads "". */
Test(threads, new_thread_reads_empty_error) {
  clattn_context *ctx = test_context(NULL);
  for (int i = 0; i < WRITERS; i++) {
    worker a = {ctx, i, ""}, b = {ctx, i, ""};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fail_and_exit, &a), 0);
    pthread_join(t, NULL);
    cr_assert_str_empty(a.problem, "%s", a.problem);
    cr_assert_eq(pthread_create(&t, NULL, read_error, &b), 0);
    pthread_join(t, NULL);
    cr_expect_str_empty(b.problem, "round %d: %s", i, b.problem);
  }
  cr_expect_str_empty(clattn_last_error(ctx), "the main thread made no call");
  clattn_context_destroy(ctx);
}

/* Rounds of threads that fail a call and exit: the context keeps no slot for a thread that has
 * exited, so the count stays at the live threads' (here the main thread's one). */
Test(threads, error_slots_do_not_grow) {
  clattn_context *ctx = test_context(NULL);
  worker self = {ctx, 99, ""};
  fail_own_call(&self);
  cr_assert_str_empty(self.problem, "%s", self.problem);
  for (int round = 0; round < 4; round++) {
    pthread_t t[WRITERS];
    worker w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
      w[i] = (worker){ctx, i, ""};
      cr_assert_eq(pthread_create(&t[i], NULL, fail_and_exit, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < WRITERS; i++) cr_expect_str_empty(w[i].problem, "%s", w[i].problem);
  }
  cr_expect_eq(clattn__error_slots(ctx), 1, "%zu error slots for 1 live thread",
               clattn__error_slots(ctx));
  cr_expect(strstr(clattn_last_error(ctx), "dtype 199 "), "main's own message: \"%s\"",
            clattn_last_error(ctx));
  clattn_context_destroy(ctx);
}

typedef struct {
  worker w;
  pthread_barrier_t *made_call, *destroyed;
  clattn_context *next; /* a context made after ctx was destroyed (maybe at its address) */
} outliving;

static void *outlive_context(void *arg) {
  outliving *o = arg;
  fail_own_call(&o->w);
  pthread_barrier_wait(o->made_call);
  pthread_barrier_wait(o->destroyed);
  const char *msg = clattn_last_error(o->next);
  if (!o->w.problem[0] && msg[0])
    snprintf(o->w.problem, sizeof o->w.problem, "new context: read \"%.150s\"", msg);
  worker again = {o->next, o->w.id, ""};
  fail_own_call(&again);
  if (!o->w.problem[0]) snprintf(o->w.problem, sizeof o->w.problem, "%s", again.problem);
  return NULL;
}

/* The context is destroyed while threads that used it still run; they exit afterwards (the
 * other order is error_slots_do_not_grow's). A context made next reads "" for them. */
Test(threads, context_destroyed_before_its_threads_exit) {
  clattn_context *ctx = test_context(NULL);
  pthread_barrier_t made_call, destroyed;
  pthread_barrier_init(&made_call, NULL, WRITERS + 1);
  pthread_barrier_init(&destroyed, NULL, WRITERS + 1);
  pthread_t t[WRITERS];
  outliving o[WRITERS];
  for (int i = 0; i < WRITERS; i++) {
    o[i] = (outliving){{ctx, i, ""}, &made_call, &destroyed, NULL};
    cr_assert_eq(pthread_create(&t[i], NULL, outlive_context, &o[i]), 0);
  }
  pthread_barrier_wait(&made_call);
  clattn_context_destroy(ctx);
  clattn_context *next = test_context(NULL);
  for (int i = 0; i < WRITERS; i++) o[i].next = next;
  pthread_barrier_wait(&destroyed);
  for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < WRITERS; i++) cr_expect_str_empty(o[i].w.problem, "%s", o[i].w.problem);
  cr_expect_eq(clattn__error_slots(next), 0, "%zu slots left by exited threads",
               clattn__error_slots(next));
  pthread_barrier_destroy(&made_call);
  pthread_barrier_destroy(&destroyed);
  clattn_context_destroy(next);
}

typedef struct {
  worker w;
  pthread_barrier_t *made_call;
} racing;

static void *fail_then_exit_at_once(void *arg) {
  racing *r = arg;
  fail_own_call(&r->w);
  pthread_barrier_wait(r->made_call);
  return NULL; /* exits while the main thread destroys the context */
}

/* Threads exit while the context they used is being destroyed: whichever lets go of a slot last
 * frees it (the sanitizer builds check that nothing is freed twice, leaked or raced on). */
Test(threads, threads_exit_while_context_is_destroyed) {
  for (int round = 0; round < 10; round++) {
    clattn_context *ctx = test_context(NULL);
    pthread_barrier_t made_call;
    pthread_barrier_init(&made_call, NULL, WRITERS + 1);
    pthread_t t[WRITERS];
    racing r[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
      r[i] = (racing){{ctx, i, ""}, &made_call};
      cr_assert_eq(pthread_create(&t[i], NULL, fail_then_exit_at_once, &r[i]), 0);
    }
    pthread_barrier_wait(&made_call);
    clattn_context_destroy(ctx);
    for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < WRITERS; i++) cr_expect_str_empty(r[i].w.problem, "%s", r[i].w.problem);
    pthread_barrier_destroy(&made_call);
  }
}

/* Each warning is recorded once, by whole lines: one that is part of an earlier line still
 * counts as new, a repeat does not. */
Test(threads, warnings_are_recorded_once_by_whole_line) {
  clattn_context *ctx = test_context(NULL);
  clattn__warn(ctx, "the entry for d = 128 no longer fits");
  clattn__warn(ctx, "the entry for d = 12");
  clattn__warn(ctx, "the entry for d = 128 no longer fits");
  clattn__warn(ctx, "the entry for d = 12");
  const char *text = clattn_context_diagnostics(ctx);
  cr_assert(strstr(text, "the entry for d = 128 no longer fits\nthe entry for d = 12\n"), "%s",
            text);
  const char *second = strstr(text, "the entry for d = 12\n");
  cr_assert_null(strstr(second + 1, "the entry for d = 12\n"), "a repeat was recorded: %s", text);
  cr_assert_null(strstr(strstr(text, "fits\n") + 1, "fits\n"), "a repeat was recorded: %s", text);
  clattn_context_destroy(ctx);
}
