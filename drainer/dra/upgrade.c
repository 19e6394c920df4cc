/* A DRA driver's upgrade: its DaemonSet's rollout strategy and whether its
 * nodes' kubelets take the new plugin beside the old one. Reads borrowed JSON and
 * version strings; owns nothing, logs nothing. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "drainer/base/json.h"
#include "drainer/base/macro.h"
#include "drainer/dra/upgrade.h"

static const char *const rollout_names[_DAEMONSET_ROLLOUT_MAX] = {
        [DAEMONSET_ROLLOUT_SURGE] = "RollingUpdate with maxSurge",
        [DAEMONSET_ROLLOUT_NO_SURGE] = "RollingUpdate without maxSurge",
        [DAEMONSET_ROLLOUT_ON_DELETE] = "OnDelete",
};

const char *daemonset_rollout_to_string(enum daemonset_rollout r) {
        return r >= 0 && r < _DAEMONSET_ROLLOUT_MAX ? rollout_names[r] : NULL;
}

enum daemonset_rollout daemonset_rollout(const cJSON *ds, const char **ret_surge) {
        const char *type = json_str(ds, "spec.updateStrategy.type");
        const cJSON *surge = json_path(ds, "spec.updateStrategy.rollingUpdate.maxSurge");
        bool positive = false;

        if (ret_surge)
                *ret_surge = "0";
        if (streq_ptr(type, "OnDelete"))
                return DAEMONSET_ROLLOUT_ON_DELETE;
        if (cJSON_IsNumber(surge)) {
                positive = surge->valuedouble >= 1;
                if (ret_surge)
                        *ret_surge = positive ? "a count" : "0";
        } else if (cJSON_IsString(surge)) {
                /* A percentage of the nodes, rounded up by the DaemonSet controller: any
                 * positive percentage surges at least one pod. */
                char *end;
                double v = strtod(surge->valuestring, &end);

                positive = end != surge->valuestring && v > 0 && (*end == '%' || *end == 0);
                if (ret_surge)
                        *ret_surge = surge->valuestring;
        }
        return positive ? DAEMONSET_ROLLOUT_SURGE : DAEMONSET_ROLLOUT_NO_SURGE;
}

int kubelet_version_parse(const char *v, int *ret_major, int *ret_minor) {
        long major, minor;
        char *end;

        if (!v)
                return -EINVAL;
        if (*v == 'v' || *v == 'V')
                v++;
        if (!isdigit((unsigned char)*v))
                return -EINVAL;
        errno = 0;
        major = strtol(v, &end, 10);
        if (errno || *end != '.' || !isdigit((unsigned char)end[1]))
                return -EINVAL;
        minor = strtol(end + 1, &end, 10);
        if (errno || major <= 0 || major > 1000 || minor < 0 || minor > 100000)
                return -EINVAL;
        /* What follows the minor version: ".patch", "-suffix", "+build", or nothing. */
        if (*end && *end != '.' && *end != '-' && *end != '+')
                return -EINVAL;
        *ret_major = (int)major;
        *ret_minor = (int)minor;
        return 0;
}

int kubelet_seamless_upgrades(const char *v) {
        int major, minor;

        if (kubelet_version_parse(v, &major, &minor) < 0)
                return -EINVAL;
        return major > 1 || (major == 1 && minor >= 33);
}

int driver_upgrade_seamless(const cJSON *ds, const char *const *kubelet_versions, size_t n, char *why,
                            size_t size) {
        enum daemonset_rollout rollout = daemonset_rollout(ds, NULL);
        size_t n_old = 0, n_unknown = 0;
        const char *old = NULL;

        if (rollout != DAEMONSET_ROLLOUT_SURGE) {
                snprintf(why, size,
                         "its DaemonSet's updateStrategy is %s: the old plugin stops before the new one "
                         "starts",
                         daemonset_rollout_to_string(rollout));
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                int k = kubelet_seamless_upgrades(kubelet_versions[i]);

                if (k == 0 && !old)
                        old = kubelet_versions[i];
                n_old += k == 0;
                n_unknown += k < 0;
        }
        if (n_old > 0) {
                snprintf(why, size,
                         "%zu of %zu of its nodes run a kubelet older than 1.33 (%s): two plugin "
                         "instances at once are not supported there",
                         n_old, n, old);
                return 0;
        }
        if (n_unknown > 0) {
                snprintf(why, size, "%zu of %zu of its nodes report a kubelet version drainer cannot read",
                         n_unknown, n);
                return 0;
        }
        if (n == 0) {
                snprintf(why, size, "none of its nodes is known, so neither are their kubelets");
                return 0;
        }
        snprintf(why, size,
                 "its DaemonSet is RollingUpdate with maxSurge and all %zu of its nodes run kubelet "
                 "1.33 or newer: the new plugin starts before the old one stops",
                 n);
        return 1;
}
