/* The nodes of one drain command (-l/--selector), how many at once
 * (--max-parallel), and the command's exit code over them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/base/selector.h"
#include "drainer/drain/nodeset.h"
#include "drainer/kube/client.h"

int nodeset_list_path(const char *selector, char **ret_path, char **ret_error) {
        _cleanup_(selector_freep) struct selector *s = NULL;
        _cleanup_free_ char *canon = NULL, *esc = NULL;
        int r;

        *ret_path = NULL;
        if (ret_error)
                *ret_error = NULL;
        r = selector_parse(selector, &s, ret_error);
        if (r < 0)
                return r;
        if (selector_is_empty(s)) {
                if (ret_error)
                        *ret_error = strdup("an empty selector would match every node: name the node, or "
                                            "give a selector such as pool=gpu");
                return -EINVAL;
        }
        /* the canonical form (as apimachinery prints it): what the server parses */
        r = selector_to_string(s, &canon);
        if (r < 0)
                return r;
        esc = kube_query_escape(canon);
        if (!esc || asprintf(ret_path, "/api/v1/nodes?labelSelector=%s", esc) < 0) {
                *ret_path = NULL;
                return -ENOMEM;
        }
        return 0;
}

int nodeset_add_page(const cJSON *items, char ***names, size_t *n) {
        const cJSON *it;

        cJSON_ArrayForEach(it, items) {
                const char *name = json_str(it, "metadata.name");
                char **v;

                if (!name || !*name)
                        return -EBADMSG;
                v = realloc(*names, (*n + 1) * sizeof(char *));
                if (!v)
                        return -ENOMEM;
                *names = v;
                v[*n] = strdup(name);
                if (!v[*n])
                        return -ENOMEM;
                (*n)++;
        }
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void nodeset_sort(char **names, size_t *n) {
        size_t k = 0;

        if (*n == 0)
                return;
        qsort(names, *n, sizeof(char *), cmp_str);
        for (size_t i = 1; i < *n; i++)
                if (streq(names[i], names[k]))
                        free(names[i]);
                else
                        names[++k] = names[i];
        *n = k + 1;
}

bool nodeset_join(char *const *names, size_t n, char *buf, size_t size) {
        size_t len = 0;

        buf[0] = 0;
        for (size_t i = 0; i < n && len < size - 1; i++)
                len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? " " : "", names[i]);
        return len < size - 1;
}

void nodeset_free(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

int nodeset_parse_max_parallel(const char *s, unsigned *ret) {
        char *end;
        long v;

        if (!s || !*s)
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || *end || v < 1 || v > NODESET_MAX_PARALLEL)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

static int rank(int code) {
        switch (code) {
        case 0:
                return 0;
        case 4:
                return 1;
        case 3:
                return 2;
        default:
                return 3;
        }
}

/* An error's own code (7 API server unreachable, 8 no such node, 9 kubeconfig, 10
 * forbidden, 11 unsupported) is kept while no other error comes; else it reads 1. */
static int error_code(int code) {
        return code >= 7 && code <= 11 ? code : 1;
}

int nodeset_worst_result(int worst, int r) {
        return r < 0 && (worst == 0 || worst == -EPERM) ? r : worst;
}

int nodeset_worst_exit(int a, int b) {
        int ra = rank(a), rb = rank(b);

        if (ra == 3 && rb == 3)
                return error_code(a) == error_code(b) ? error_code(a) : 1;
        if (ra >= rb)
                return ra == 3 ? error_code(a) : a;
        return rb == 3 ? error_code(b) : b;
}
