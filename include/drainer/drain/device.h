/* Device-scoped drains (--device DRIVER/POOL/DEVICE): the devices a drain takes out of
 * service, how one is written on the command line and on the Node, the scope its state
 * lives under (drainer.io/KEY.device.ID), and which claims hold one. Pure functions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct claim_rec;
struct node_rec;

/* At most this many --device per drain. */
#define DRAIN_MAX_DEVICES 16

/* One device of a ResourceSlice: spec.driver, the pool's name, the device's name. */
struct drain_device {
        const char *driver, *pool, *device;
};

/* The scope of a device drain: "device." + "D" + 16 upper-case hex digits of a hash of
 * the sorted set. Upper case never appears in a DRA driver name (a DNS subdomain), so
 * it is never a driver's scope. */
#define DRAIN_DEVICE_SCOPE_PREFIX "device."
#define DRAIN_DEVICE_SCOPE_SIZE   (sizeof(DRAIN_DEVICE_SCOPE_PREFIX) + 17)
/* drainer.io/devices.device.ID: the devices of that drain ("DRIVER/POOL/DEVICE,..."),
 * for the refusal of an overlapping drain and for status. Says where a drain stands,
 * never what drainer may do: the devices acted on come from the command line. */
#define DRAINER_ANN_DEVICES       "drainer.io/devices"

/* Parses "DRIVER/POOL/DEVICE" (the pool may hold '/': DRIVER is up to the first '/',
 * DEVICE after the last). *ret borrows from buf, a copy of arg the caller owns (at least
 * strlen(arg) + 1 bytes). A driver that is not a DNS subdomain, an empty pool, a
 * device name that is not a DNS label: -EINVAL with msg the error line. */
int drain_device_parse(const char *arg, char *buf, struct drain_device *ret, char *msg, size_t size);
/* Whether a and b name the same device. */
bool drain_device_eq(const struct drain_device *a, const struct drain_device *b);
/* The scope of the set (order does not matter) into ret (DRAIN_DEVICE_SCOPE_SIZE). */
void drain_devices_scope(const struct drain_device *d, size_t n, char *ret);
/* Whether scope is a device drain's scope (else a driver's, or NULL: the node's). */
bool drain_scope_is_device(const char *scope);
/* "DRIVER/POOL/DEVICE,..." of the set in the given order (malloc'd), NULL: no memory. */
char *drain_devices_format(const struct drain_device *d, size_t n);
/* Whether list ("DRIVER/POOL/DEVICE,...", as drain_devices_format writes it) names one
 * of the devices (the first such one in *ret_at, NULL ok). */
bool drain_devices_listed(const char *list, const struct drain_device *d, size_t n, size_t *ret_at);
/* Whether claim c's allocation (status.allocation.devices.results[]) holds one of the
 * devices. */
bool drain_devices_held(const struct claim_rec *c, const struct drain_device *d, size_t n);
/* Another drain of node n that overlaps a device drain of scope over d: the node's own
 * (returns "node"), a driver's of one of the devices' drivers (returns its name), or
 * another device drain with a device in common (returns its device list). The string
 * is malloc'd; NULL: none (or no memory). */
char *drain_devices_conflict(const struct node_rec *n, const char *scope, const struct drain_device *d,
                             size_t n_devices);
struct slice_rec;
/* Whether each device is published on node: a ResourceSlice with spec.nodeName == node,
 * of its driver and pool, lists it. 0, or -ENXIO with msg naming the first one that is
 * not (and what the node has of that driver). */
int drain_devices_on_node(const struct drain_device *d, size_t n, const struct slice_rec *const *slices,
                          size_t n_slices, const char *node, char *msg, size_t size);
/* Adds drainer.io/devices=list to the metadata.annotations of a Node merge patch built
 * from a scope view (*body replaced; drain_scope_patch renames it with the rest). 0 or
 * -ENOMEM (-EINVAL: body is not a patch drainer built). */
int drain_devices_patch_add(char **body, const char *list);
/* The device list of a device drain on n with a device of driver (malloc'd), or NULL. */
char *drain_devices_of_driver(const struct node_rec *n, const char *driver);
/* The device drains recorded on n, for status: f with each one's device list (NULL if
 * unrecorded), its phase and its scope (strings borrowed from n). */
void drain_devices_foreach(const struct node_rec *n,
                           void (*f)(const char *devices, const char *phase, const char *scope,
                                     void *userdata),
                           void *userdata);
