/* The driver-stop interface: the list of strategies, --driver-stop parsing, a
 * run's instance of one (its own state is the strategy's), and helpers the
 * strategies share. Knows no strategy's behaviour; owns only the instance. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/dra/driverstop.h"
#include "drainer/kube/objects.h"

const struct driver_stop_ops *const driver_stop_strategies[] = {
        &driver_stop_taint, &driver_stop_label, &driver_stop_systemd, &driver_stop_none, NULL,
};

const struct driver_stop_ops *driver_stop_find(const char *name) {
        for (size_t i = 0; name && driver_stop_strategies[i]; i++)
                if (streq(driver_stop_strategies[i]->name, name))
                        return driver_stop_strategies[i];
        return NULL;
}

const struct driver_stop_ops *driver_stop_or_default(const struct driver_stop_ops *ops) {
        return ops ? ops : driver_stop_strategies[0];
}

const char *driver_stop_names(bool with_args) {
        static char names[2][256];
        char *buf = names[with_args];
        size_t n = 0, len = 0;

        if (buf[0])
                return buf;
        while (driver_stop_strategies[n])
                n++;
        for (size_t i = 0; i < n; i++) {
                const struct driver_stop_ops *o = driver_stop_strategies[i];

                len += snprintf(buf + len, sizeof(names[0]) - len, "%s%s%s%s",
                                i == 0       ? ""
                                : i + 1 == n ? " or "
                                             : ", ",
                                o->name, with_args && o->arg_usage ? ":" : "",
                                with_args ? strempty(o->arg_usage) : "");
                if (len >= sizeof(names[0]))
                        break;
        }
        return buf;
}

int driver_stop_parse(const char *value, const struct driver_stop_ops **ret_ops, const char **ret_arg,
                      char *msg, size_t size) {
        const char *colon = strchr(value, ':'), *arg = colon ? colon + 1 : NULL;
        const struct driver_stop_ops *ops = NULL;
        char name[64];

        if ((colon ? (size_t)(colon - value) : strlen(value)) < sizeof(name)) {
                snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - value) : (int)strlen(value),
                         value);
                ops = driver_stop_find(name);
        }
        if (!ops || (ops->arg_usage ? !arg || !*arg : colon != NULL)) {
                snprintf(msg, size, "--driver-stop: invalid value \"%s\" (%s)", value,
                         driver_stop_names(true));
                return -EINVAL;
        }
        if (arg && ops->check_arg && ops->check_arg(arg, msg, size) < 0)
                return -EINVAL;
        *ret_ops = ops;
        *ret_arg = arg;
        return 0;
}

void driver_stop_record_done(struct driver_stop_record *r) {
        if (!r)
                return;
        free(r->arg);
        free(r->old_value);
        free(r->daemonset);
        for (size_t i = 0; i < r->n_drivers && i < DRIVER_STOP_MAX_DRIVERS; i++)
                free(r->drivers[i]);
        *r = (struct driver_stop_record){};
}

int driver_stop_new(const struct driver_stop_ops *ops, const char *arg, const struct driver_stop_env *env,
                    struct driver_stop **ret) {
        struct driver_stop *s;
        int r;

        ops = driver_stop_or_default(ops);
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->ops = ops;
        if (env)
                s->env = *env;
        if (arg && !(s->arg = strdup(arg))) {
                free(s);
                return -ENOMEM;
        }
        if (ops->init) {
                r = ops->init(s);
                if (r < 0) {
                        free(s->arg);
                        free(s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

void driver_stop_free(struct driver_stop *s) {
        if (!s)
                return;
        if (s->ops->done)
                s->ops->done(s);
        free(s->arg);
        free(s);
}

void driver_stop_action_set(struct driver_stop_action *a, enum driver_stop_do what, const char *fmt, ...) {
        va_list ap;

        a->what = what;
        a->message[0] = 0;
        if (!fmt)
                return;
        va_start(ap, fmt);
        vsnprintf(a->message, sizeof(a->message), fmt, ap);
        va_end(ap);
}

void driver_stop_action_fail(struct driver_stop_action *a, int error, const char *fmt, ...) {
        va_list ap;

        a->what = DRIVER_STOP_FAIL;
        a->error = error;
        va_start(ap, fmt);
        vsnprintf(a->message, sizeof(a->message), fmt, ap);
        va_end(ap);
}

void driver_stop_print_pods(FILE *f, const struct pod_rec *const *drivers, size_t n, const char *verb) {
        for (size_t i = 0; i < n; i++) {
                const struct pod_rec *pod = drivers[i];

                fprintf(f, "%s%s%s/%s", i == 0 ? "" : "; ", verb, pod->ns, pod->name);
                if (pod->controller)
                        fprintf(f, " (%s %s/%s)", strna(pod->controller->kind), pod->ns,
                                strna(pod->controller->name));
        }
        if (n == 0)
                fputs("no DRA driver pod on the node", f);
}

bool driver_stop_pods_back(const struct driver_stop_record *r, const struct driver_stop_view *v, char *msg,
                           size_t size) {
        if (!r->daemonset || v->driver_pods_ready > 0)
                return true;
        snprintf(msg, size, "waiting for the DRA driver pods to run and be Ready");
        return false;
}

bool driver_stop_is_configured(const struct driver_stop_ops *ops, const char *arg,
                               const struct driver_stop_record *r) {
        return r->ops == driver_stop_or_default(ops) && streq_ptr(r->arg, arg);
}
