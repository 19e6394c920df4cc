/* The CLI verbs. Each takes argv after the verb (getopt-ready, argv[0] is the
 * verb) and the global flags parsed so far, and returns an exit code. */
#pragma once

#include "app.h"

struct verb {
        const char *name;
        const char *summary;
        const char *usage; /* full --help text of the verb */
        int (*run)(int argc, char **argv, struct global_flags *g);
};

const struct verb *verb_find(const char *name);
extern const struct verb verbs[];

/* Parses the global flags that may appear anywhere on the command line.
 * Returns 1 if the option was a global one (consumed), 0 if not, -EINVAL
 * (logged) on a bad value. */
int global_flag(int opt, const char *arg, struct global_flags *g);

struct option;
typedef int (*verb_opt_fn)(int opt, const char *arg, void *userdata);
/* getopt_long over the global flags plus extra (terminated by a zeroed entry); a
 * verb flag goes to on_opt (which returns < 0, logged, on a bad value). Positionals
 * are left from optind on, in order; parsing stops at "--".
 * Returns 1 to go on, 0 after printing --help, or -EINVAL (logged) on bad usage. */
int verb_parse(int argc, char **argv, struct global_flags *g, const struct option *extra, verb_opt_fn on_opt,
               void *userdata);
void verb_help(const struct verb *v);

int verb_status(int argc, char **argv, struct global_flags *g);
int verb_plan(int argc, char **argv, struct global_flags *g);
int verb_drain(int argc, char **argv, struct global_flags *g);
int verb_uncordon(int argc, char **argv, struct global_flags *g);
int verb_maintain(int argc, char **argv, struct global_flags *g);
int verb_serve(int argc, char **argv, struct global_flags *g);
int verb_doctor(int argc, char **argv, struct global_flags *g);
int verb_rollout(int argc, char **argv, struct global_flags *g);
int verb_guard(int argc, char **argv, struct global_flags *g);
int verb_version(int argc, char **argv, struct global_flags *g);
