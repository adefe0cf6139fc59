/* Errors and diagnostics: each (context, thread) pair's last error message, the status texts,
 * and the context's versioned, append-only diagnostics (warnings). Any thread. */
#include "core.h"

#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The last failure of a call that had no context (DESIGN.md: thread-local). */
static _Thread_local char no_context_error[1024];

const char *clattn_status_string(clattn_status status) {
  switch (status) {
#define CLATTN_STATUS_TEXT_(name, value, text)                                                     \
  case CLATTN_##name:                                                                              \
    return "CLATTN_" #name ": " text;
    CLATTN_STATUS_MAP(CLATTN_STATUS_TEXT_)
#undef CLATTN_STATUS_TEXT_
  }
  return "unknown clattn status";
}

/* One thread's last error on one context. Two owners hold it: the thread, in its own list
 * (thread_slots), and the context, in ctx->errors. Either may go first (a thread exits, a
 * context is destroyed); the one that lets go last frees it, so neither order leaves a dangling
 * pointer or a leak, and a thread id that the system reuses finds nothing of the dead thread. */
struct clattn__thread_error {
  const clattn_context *ctx;         /* set once; compared, never followed, by the thread */
  atomic_int owners;                 /* 2, then 1 when the thread or the context has let go */
  char *message;                     /* written and read by its thread only */
  struct clattn__thread_error *next; /* in ctx->errors, under ctx->text_lock */
  struct clattn__thread_error *thread_next; /* in thread_slots, touched by its thread only */
};

/* The calling thread's slots, one per context it failed a call on. A pthread key exists only
 * to run release_thread_slots when a thread exits (TLS has no destructor in C11); it is process
 * state by necessity, created once and never deleted. */
static _Thread_local clattn__thread_error *thread_slots;
static pthread_once_t exit_hook_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_hook;
static int exit_hook_made;

static void free_slot(clattn__thread_error *e) {
  free(e->message);
  free(e);
}

/* At thread exit: the thread lets go of its slots; those whose context is gone are freed. */
static void release_thread_slots(void *head) {
  clattn__thread_error **slots = head;
  for (clattn__thread_error *e = *slots, *next; e; e = next) {
    next = e->thread_next;
    if (atomic_fetch_sub(&e->owners, 1) == 1) free_slot(e);
  }
  *slots = NULL;
}

static void make_exit_hook(void) {
  exit_hook_made = pthread_key_create(&exit_hook, release_thread_slots) == 0;
}

/* The calling thread's slot on ctx, or NULL. Frees on the way the slots of contexts that were
 * destroyed, before comparing: a new context may have the address of a destroyed one. */
static clattn__thread_error *own_slot(const clattn_context *ctx) {
  clattn__thread_error *found = NULL;
  for (clattn__thread_error **link = &thread_slots; *link;) {
    clattn__thread_error *e = *link;
    if (atomic_load(&e->owners) == 1) { /* we still hold it, so its context let go */
      *link = e->thread_next;
      free_slot(e);
      continue;
    }
    if (e->ctx == ctx) found = e;
    link = &e->thread_next;
  }
  return found;
}

/* Frees, under ctx->text_lock, the slots of threads that have exited. */
static void prune_context_slots(clattn_context *ctx) {
  for (clattn__thread_error **link = &ctx->errors; *link;) {
    clattn__thread_error *e = *link;
    if (atomic_load(&e->owners) == 1) { /* the context holds it, so its thread let go */
      *link = e->next;
      free_slot(e);
    } else {
      link = &e->next;
    }
  }
}

/* The calling thread's slot on ctx, made on its first failure there; NULL without memory. */
static clattn__thread_error *slot_for_write(clattn_context *ctx) {
  clattn__thread_error *e = own_slot(ctx);
  if (!e && (e = calloc(1, sizeof *e)) != NULL) {
    pthread_once(&exit_hook_once, make_exit_hook);
    e->ctx = ctx;
    atomic_init(&e->owners, 2);
    pthread_mutex_lock(&ctx->text_lock);
    prune_context_slots(ctx); /* so the list is as long as the live threads that failed */
    e->next = ctx->errors;
    ctx->errors = e;
    pthread_mutex_unlock(&ctx->text_lock);
    e->thread_next = thread_slots;
    thread_slots = e;
    /* Without the hook (the process ran out of pthread keys) an exited thread's slots are never
     * freed, as before this scheme; messages still work. */
    if (exit_hook_made && !pthread_getspecific(exit_hook))
      pthread_setspecific(exit_hook, &thread_slots);
  }
  return e;
}

static void set_message(clattn_context *ctx, char *msg) {
  if (!ctx) {
    snprintf(no_context_error, sizeof no_context_error, "%s", msg ? msg : "out of host memory");
    free(msg);
    return;
  }
  clattn__thread_error *e = slot_for_write(ctx);
  if (!e) {
    free(msg);
    return;
  }
  free(e->message);
  e->message = msg;
}

clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  va_end(ap);
  set_message(ctx, msg);
  return status;
}

clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *what) {
  clattn_status st = CLATTN_ERR_OPENCL;
  if (err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
      err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    st = CLATTN_ERR_OUT_OF_RESOURCES;
  return clattn__fail(ctx, st, "%s failed: %s (%d)", what, clattn__cl_error_name(err), err);
}

/* One version of the diagnostics text. A version that was handed out is never changed or freed
 * before destroy (a reader may hold it in another thread); a new warning makes a new version. */
struct clattn__diag {
  struct clattn__diag *older;
  int handed_out;
  char text[];
};

/* Whether text (lines ending in '\n') has line as one of its lines: a whole line, so a warning
 * that happens to be part of an earlier one is still recorded. */
static int has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
    if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
  return 0;
}

void clattn__warn(clattn_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = NULL;
  if (vasprintf(&line, fmt, ap) < 0) line = NULL;
  va_end(ap);
  if (!line) return;
  pthread_mutex_lock(&ctx->text_lock);
  clattn__diag *cur = ctx->diag;
  if (!cur || !has_line(cur->text, line)) {
    size_t old = cur ? strlen(cur->text) : 0, add = strlen(line);
    clattn__diag *next = malloc(sizeof *next + old + add + 2);
    if (next) {
      if (cur) memcpy(next->text, cur->text, old);
      memcpy(next->text + old, line, add);
      memcpy(next->text + old + add, "\n", 2);
      next->handed_out = 0;
      next->older = cur;
      if (cur && !cur->handed_out) { /* nobody holds it: drop it */
        next->older = cur->older;
        free(cur);
      }
      ctx->diag = next;
    }
  }
  pthread_mutex_unlock(&ctx->text_lock);
  free(line);
}

/* The current text, kept until destroy from now on; "" when there is none. */
static const char *diagnostics_held(const clattn_context *cctx) {
  clattn_context *ctx = (clattn_context *)cctx; /* the lock, not the text, changes */
  const char *text = "";
  pthread_mutex_lock(&ctx->text_lock);
  if (ctx->diag) {
    ctx->diag->handed_out = 1;
    text = ctx->diag->text;
  }
  pthread_mutex_unlock(&ctx->text_lock);
  return text;
}

const char *clattn__diagnostics_last(const clattn_context *ctx) {
  const char *all = diagnostics_held(ctx);
  if (!all[0]) return all;
  const char *p = all + strlen(all) - 1; /* the final newline */
  while (p > all && p[-1] != '\n') p--;
  return p;
}

const char *clattn_context_diagnostics(const clattn_context *ctx) {
  return ctx ? diagnostics_held(ctx) : "";
}

void clattn__append_error(clattn_context *ctx, const char *text) {
  if (!ctx) return;
  clattn__thread_error *e = slot_for_write(ctx);
  if (!e) return;
  char *msg = NULL;
  if (asprintf(&msg, "%s%s", e->message ? e->message : "", text) < 0) return;
  free(e->message);
  e->message = msg;
}

/* The slot is the calling thread's own, so reading it takes no lock. */
const char *clattn__last_error_locked(const clattn_context *ctx) {
  const clattn__thread_error *e = own_slot(ctx);
  return e && e->message ? e->message : "";
}

const char *clattn_last_error(const clattn_context *ctx) {
  return ctx ? clattn__last_error_locked(ctx) : no_context_error;
}

size_t clattn__error_slots(clattn_context *ctx) {
  size_t n = 0;
  pthread_mutex_lock(&ctx->text_lock);
  prune_context_slots(ctx);
  for (const clattn__thread_error *e = ctx->errors; e; e = e->next) n++;
  pthread_mutex_unlock(&ctx->text_lock);
  return n;
}

/* At destroy: the calling thread lets go of its own slot at once (the main thread runs no exit
 * hook), then the context of all; slots still held by live threads are freed by them. */
void clattn__errors_release(clattn_context *ctx) {
  for (clattn__thread_error **link = &thread_slots; *link; link = &(*link)->thread_next)
    if ((*link)->ctx == ctx && atomic_load(&(*link)->owners) == 2) {
      clattn__thread_error *e = *link;
      *link = e->thread_next;
      atomic_fetch_sub(&e->owners, 1);
      break;
    }
  for (clattn__thread_error *e = ctx->errors, *next; e; e = next) {
    next = e->next;
    if (atomic_fetch_sub(&e->owners, 1) == 1) free_slot(e);
  }
  for (clattn__diag *d = ctx->diag, *older; d; d = older) {
    older = d->older;
    free(d);
  }
}

/* A storage type's name in messages, and its define for the kernels (cl/common.cl's DTYPE;
 * fp32, the default, adds nothing). */
const char *clattn__dtype_name(clattn_dtype dtype) {
  return dtype == CLATTN_F16 ? "CLATTN_F16" : dtype == CLATTN_BF16 ? "CLATTN_BF16" : "CLATTN_F32";
}

const char *clattn__dtype_define(clattn_dtype dtype) {
  return dtype == CLATTN_F16 ? " -DDTYPE=1" : dtype == CLATTN_BF16 ? " -DDTYPE=2" : "";
}
