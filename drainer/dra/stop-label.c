/* --driver-stop label:KEY (GPU-operator style): sets node label KEY to
 * drainer-paused, so that the driver DaemonSet's nodeSelector stops matching
 * and its controller removes the pod; the record keeps the label's old value,
 * which the undo sets back. Only the configured KEY is ever written. No state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/selector.h"
#include "drainer/base/text.h"
#include "drainer/dra/driverstop.h"
#include "drainer/kube/objects.h"

static const char *label_of(const struct node_rec *n, const char *key) {
        return kv_get(n->labels, n->n_labels, key);
}

static int label_check_arg(const char *arg, char *msg, size_t size) {
        if (label_key_is_valid(arg))
                return 0;
        snprintf(msg, size, "--driver-stop: \"%s\" is not a valid label key", arg);
        return -EINVAL;
}

static void label_describe(const char *arg, const struct pod_rec *const *drivers, size_t n, FILE *f) {
        fprintf(f, "set node label %s=%s, so the DaemonSet controller removes ", strna(arg),
                DRIVER_PAUSED_VALUE);
        driver_stop_print_pods(f, drivers, n, "");
}

static void label_fill_record(const char *arg, const struct node_rec *n, struct driver_stop_record *rec) {
        const char *old = label_of(n, arg);

        rec->had_old = old != NULL;
        rec->old_value = (char *)old;
}

static void label_stop(struct driver_stop *s, const struct driver_stop_view *v,
                       struct driver_stop_action *ret) {
        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
        if (streq_ptr(label_of(v->node, s->arg), DRIVER_PAUSED_VALUE))
                return;
        ret->what = DRIVER_STOP_SET_LABEL;
        ret->key = s->arg;
        ret->value = DRIVER_PAUSED_VALUE;
}

/* Paused, and the DaemonSet controller has removed the driver pods. */
static bool label_stopped(struct driver_stop *s, const struct driver_stop_view *v, char *msg, size_t size) {
        snprintf(msg, size, "stopping DRA drivers: %zu driver %s left", v->driver_pods,
                 text_plural(v->driver_pods, "pod", "pods"));
        return streq_ptr(label_of(v->node, s->arg), DRIVER_PAUSED_VALUE) && v->driver_pods == 0;
}

/* undo_allowed() lets only the configured key through: r->arg is it. */
static void label_undo(struct driver_stop *s, const struct driver_stop_record *r,
                       const struct driver_stop_view *v, struct driver_stop_action *ret) {
        driver_stop_action_set(ret, DRIVER_STOP_WAIT, NULL);
        if (!streq_ptr(label_of(v->node, r->arg), DRIVER_PAUSED_VALUE))
                return;
        ret->what = DRIVER_STOP_SET_LABEL;
        ret->key = r->arg;
        ret->value = r->had_old ? r->old_value : NULL;
}

static bool label_undone(struct driver_stop *s, const struct driver_stop_record *r,
                         const struct driver_stop_view *v, char *msg, size_t size) {
        return !streq_ptr(label_of(v->node, r->arg), DRIVER_PAUSED_VALUE) &&
               driver_stop_pods_back(r, v, msg, size);
}

static int label_read_record(const cJSON *entry, struct driver_stop_record *rec,
                             struct driver_stop_bad *ret_bad) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(entry, "key"),
                    *v = cJSON_GetObjectItemCaseSensitive(entry, "old");

        if (k && !cJSON_IsNull(k) && !cJSON_IsString(k))
                return *ret_bad = (struct driver_stop_bad){ "key", NULL, "is not a string" }, -EBADMSG;
        if (!cJSON_IsString(k))
                return *ret_bad = (struct driver_stop_bad){ "key", NULL, "is missing" }, -EBADMSG;
        if (!label_key_is_valid(k->valuestring))
                return *ret_bad = (struct driver_stop_bad){ "key", k->valuestring, "is not a label key" },
                       -EBADMSG;
        if (v) {
                if (!cJSON_IsNull(v) && !cJSON_IsString(v))
                        return *ret_bad = (struct driver_stop_bad){ "old", NULL,
                                                                    "is neither a string nor null" },
                               -EBADMSG;
                if (cJSON_IsString(v) && !label_value_is_valid(v->valuestring))
                        return *ret_bad = (struct driver_stop_bad){ "old", v->valuestring,
                                                                    "is not a label value" },
                               -EBADMSG;
                rec->had_old = true;
                if (cJSON_IsString(v) && !(rec->old_value = strdup(v->valuestring)))
                        return -ENOMEM;
        }
        rec->arg = strdup(k->valuestring);
        return rec->arg ? 0 : -ENOMEM;
}

static int label_write_record(const struct driver_stop_record *rec, cJSON *entry) {
        if (!label_key_is_valid(rec->arg) ||
            (rec->had_old && rec->old_value && !label_value_is_valid(rec->old_value)))
                return -EINVAL;
        if (!cJSON_AddStringToObject(entry, "key", rec->arg))
                return -ENOMEM;
        if (rec->had_old && !(rec->old_value ? cJSON_AddStringToObject(entry, "old", rec->old_value)
                                             : cJSON_AddNullToObject(entry, "old")))
                return -ENOMEM;
        return 0;
}

/* Only the configured label key is ever set back. */
static bool label_undo_allowed(const struct driver_stop_ops *ops, const char *arg,
                               const struct driver_stop_record *r) {
        return ops == &driver_stop_label && streq_ptr(arg, r->arg);
}

const struct driver_stop_ops driver_stop_label = {
        .name = "label",
        .arg_usage = "KEY",
        .removes_driver_pods = true,
        .pods_stay = "DRA driver: stopped by label",
        .check_arg = label_check_arg,
        .describe = label_describe,
        .fill_record = label_fill_record,
        .stop = label_stop,
        .stopped = label_stopped,
        .undo = label_undo,
        .undone = label_undone,
        .read_record = label_read_record,
        .write_record = label_write_record,
        .undo_allowed = label_undo_allowed,
};

/* Whether the prefix (n bytes) is domain or a subdomain of it. */
static bool prefix_in_domain(const char *prefix, size_t n, const char *domain) {
        size_t d = strlen(domain);

        return n >= d && memcmp(prefix + n - d, domain, d) == 0 && (n == d || prefix[n - d - 1] == '.');
}

/* Keys of the kubernetes.io and k8s.io namespaces (kubernetes.io/os, node-role...) are
 * the cluster's: the kubelet or an admin owns them, never a driver's switch. */
static bool key_is_clusters(const char *key) {
        const char *slash = strchr(key, '/');
        size_t n = slash ? (size_t)(slash - key) : 0;

        return slash && (prefix_in_domain(key, n, "kubernetes.io") || prefix_in_domain(key, n, "k8s.io"));
}

int driver_stop_label_key(const cJSON *daemonset, const char *what, char **ret_key, char **ret_why) {
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(daemonset, "spec"),
                    *tmpl = cJSON_GetObjectItemCaseSensitive(spec, "template"),
                    *sel = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tmpl, "spec"),
                                                            "nodeSelector"),
                    *e;
        char keys[512] = "", skipped[256] = "";
        const char *key = NULL;
        size_t n = 0, len = 0, slen = 0;
        char *k, *why = NULL;

        if (!cJSON_IsObject(sel))
                sel = NULL;
        cJSON_ArrayForEach(e, sel) {
                if (!e->string || !cJSON_IsString(e) || !label_key_is_valid(e->string))
                        continue;
                if (key_is_clusters(e->string)) {
                        if (slen < sizeof(skipped))
                                slen += (size_t)snprintf(skipped + slen, sizeof(skipped) - slen, "%s%s",
                                                         slen ? ", " : "", e->string);
                        continue;
                }
                key = e->string;
                if (len < sizeof(keys))
                        len += (size_t)snprintf(keys + len, sizeof(keys) - len, "%s%s", n ? ", " : "",
                                                e->string);
                n++;
        }
        if (n == 1) {
                k = strdup(key);
                if (!k)
                        return -ENOMEM;
                *ret_key = k;
                return 0;
        }
        if (n > 1 && asprintf(&why,
                              "the nodeSelector of %s has %zu keys (%s): say which one stops the driver "
                              "with --driver-stop label:KEY",
                              what, n, keys) < 0)
                return -ENOMEM;
        if (n == 0 && asprintf(&why,
                               "the nodeSelector of %s has no key the driver owns%s%s%s, so no node "
                               "label stops it; use --driver-stop systemd:UNIT or none, or give the "
                               "DaemonSet a nodeSelector label",
                               what, slen ? " (" : "", skipped, slen ? " are the cluster's)" : "") < 0)
                return -ENOMEM;
        *ret_why = why;
        return n > 1 ? -E2BIG : -ENOENT;
}
