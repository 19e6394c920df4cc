/* Whether a DRA driver upgrades seamlessly: its DaemonSet surges (the new plugin
 * starts before the old one stops) and every kubelet of its nodes supports two
 * plugin instances of one driver at once (1.33+). The one decision that doctor
 * (driver-rollout), plan --driver and maintain --driver share. Pure. */
#pragma once

#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>

enum daemonset_rollout {
        DAEMONSET_ROLLOUT_SURGE,    /* RollingUpdate with maxSurge > 0: old and new pod overlap */
        DAEMONSET_ROLLOUT_NO_SURGE, /* RollingUpdate without surge: the old pod goes first */
        DAEMONSET_ROLLOUT_ON_DELETE,
        _DAEMONSET_ROLLOUT_MAX,
        _DAEMONSET_ROLLOUT_INVALID = -EINVAL,
};

/* "RollingUpdate with maxSurge", "RollingUpdate without maxSurge", "OnDelete" */
const char *daemonset_rollout_to_string(enum daemonset_rollout r);
/* From an apps/v1 DaemonSet: spec.updateStrategy (type defaults to
 * RollingUpdate; maxSurge, an int or a percentage, defaults to 0). *ret_surge
 * (may be NULL) gets maxSurge as written ("0" when unset), borrowed or static. */
enum daemonset_rollout daemonset_rollout(const cJSON *ds, const char **ret_surge);

/* Parses a kubelet version ("v1.33.2", "v1.32.4-eks-1", "1.34.0+k3s1"): 0 with
 * major and minor, -EINVAL when it cannot (or for "v0.x", the placeholder of
 * untagged builds). */
int kubelet_version_parse(const char *v, int *ret_major, int *ret_minor);
/* Whether a kubelet of this version supports seamless driver upgrades (two
 * plugin instances of one driver at once; kubelet 1.33+): 1 yes, 0 no,
 * -EINVAL unknown. */
int kubelet_seamless_upgrades(const char *v);
/* Whether a DRA driver gets seamless upgrades, the one decision that doctor
 * (driver-rollout), plan --driver and maintain --driver share: its DaemonSet ds
 * surges (RollingUpdate with maxSurge, daemonset_rollout) and every kubelet of
 * its nodes (n versions; NULL: unknown) is 1.33 or newer. 1 yes, 0 no; why says
 * which, for people. */
int driver_upgrade_seamless(const cJSON *ds, const char *const *kubelet_versions, size_t n, char *why,
                            size_t size);
