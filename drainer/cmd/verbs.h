/* The CLI verbs. Each takes argv after the verb (getopt-ready, argv[0] is the
 * verb) and the global flags parsed so far, and returns an exit code. */
#pragma once

#include "app.h"

/* A verb that talks to the API server, as the composition root (main.c) runs it:
 *   parse  argv (argv[0] is the verb) into state (state_size bytes, zeroed): no
 *          request, no loop. 1 to go on, 0 after --help, negative errno (logged) on
 *          bad usage (exit 2);
 *   start  with the app set up: sets the work going on the loop and returns at once
 *          (a negative errno: logged by the verb, the exit code app_exit_code()'s);
 *          the verb calls app_quit(a, EXIT_...) when its work is over;
 *   stop   once, after app_quit() (or a failed start): closes what start made,
 *          and calls app_stopped(a) once the last of it closed (from within stop
 *          when nothing is left); the root runs the loop until then;
 *   free   what parse and start allocated (state itself is the root's). */
struct verb_ops {
        size_t state_size;
        int (*parse)(int argc, char **argv, struct global_flags *g, void *state);
        int (*start)(struct app *a, void *state);
        void (*stop)(struct app *a, void *state);
        void (*free)(void *state);
};

struct verb {
        const char *name;
        const char *summary;
        const char *usage; /* full --help text of the verb */
        /* a verb without the API server or the loop (version): runs and returns an exit
         * code; NULL when ops is set */
        int (*run)(int argc, char **argv, struct global_flags *g);
        const struct verb_ops *ops;
};

/* Runs verb v with ops as the composition root: parse, app_init, start, the loop until
 * app_quit, stop, free. Returns the exit code. */
int verb_run_ops(const struct verb *v, int argc, char **argv, struct global_flags *g);

const struct verb *verb_find(const char *name);
extern const struct verb verbs[];

/* Parses the global flags that may appear anywhere on the command line.
 * Returns 1 if the option was a global one (consumed), 0 if not, -EINVAL
 * (logged) on a bad value. */
int global_flag(int opt, const char *arg, struct global_flags *g);

/* What verb_parse hands a switch's handler for --flag=false (compared by address);
 * --flag and --flag=true hand NULL. */
extern const char flag_false[];
static inline bool flag_on(const char *arg) {
        return arg != flag_false;
}

struct option;
typedef int (*verb_opt_fn)(int opt, const char *arg, void *userdata);
/* getopt_long over the global flags plus extra (terminated by a zeroed entry); a
 * verb flag goes to on_opt (which returns < 0, logged, on a bad value). Positionals
 * are left from optind on, in order; parsing stops at "--".
 * Returns 1 to go on, 0 after printing --help, or -EINVAL (logged) on bad usage. */
int verb_parse(int argc, char **argv, struct global_flags *g, const struct option *extra, verb_opt_fn on_opt,
               void *userdata);
void verb_help(const struct verb *v);

extern const struct verb_ops verb_status_ops;
extern const struct verb_ops verb_plan_ops;
extern const struct verb_ops verb_drain_ops;
extern const struct verb_ops verb_uncordon_ops;
extern const struct verb_ops verb_maintain_ops;
extern const struct verb_ops verb_serve_ops;
extern const struct verb_ops verb_doctor_ops;
extern const struct verb_ops verb_rollout_ops;
extern const struct verb_ops verb_guard_ops;
int verb_version(int argc, char **argv, struct global_flags *g);
