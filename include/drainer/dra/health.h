/* gRPC health probe (grpc.health.v1.Health/Check) of a DRA driver: HTTP/2
 * cleartext (prior knowledge) to podIP:PORT, or over a unix socket, through the
 * transport (libcurl). The gRPC framing is ours; HTTP/2 is libcurl's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drainer/base/macro.h"

struct transport;
struct health_probe;

/* Longest service name we send; the longest request frame (5-byte gRPC header,
 * tag, 2-byte length, name). */
#define HEALTH_SERVICE_MAX          255
#define HEALTH_REQUEST_MAX          (5 + 1 + 2 + HEALTH_SERVICE_MAX)
/* Default timeout of a probe given timeout_usec 0. */
#define HEALTH_TIMEOUT_DEFAULT_USEC (UINT64_C(10) * 1000000)

/* Parsed --driver-health: "PORT", "PORT/SERVICE", "unix:PATH" or "unix:PATH#SERVICE"
 * (a unix path keeps its slashes, so its service follows a '#'). */
struct health_target {
        int port;        /* 0 for unix */
        char *unix_path; /* NULL for TCP */
        char *service;   /* default "liveness" */
};

/* Parses the flag value; -EINVAL with *ret_error (a one-line message, malloc'd,
 * the caller frees it) on a malformed value, -ENOMEM. *ret is written only on
 * success. PORT: 1-65535, digits only. PATH: absolute, shorter than sun_path;
 * the service follows the last '#', so a path with a '#' in it needs an explicit
 * service. SERVICE: at most HEALTH_SERVICE_MAX printable non-blank characters;
 * "PORT/" and "unix:PATH#" ask for the empty service, which is gRPC's name for
 * the server as a whole. */
int health_target_parse(const char *s, struct health_target *ret, char **ret_error);
/* Frees what t owns and resets it. This function can't fail. */
void health_target_done(struct health_target *t);

enum health_status {
        HEALTH_UNKNOWN = 0,
        HEALTH_SERVING = 1,
        HEALTH_NOT_SERVING = 2,
        HEALTH_SERVICE_UNKNOWN = 3,
};

/* "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"; NULL for anything else. */
const char *health_status_to_string(enum health_status s);

/* The gRPC message of a Check request: compressed flag 0, 4-byte big-endian
 * length, then protobuf HealthCheckRequest{service = 1 (string)}; an empty
 * service is an empty message (proto3 omits default values). Writes at most
 * HEALTH_REQUEST_MAX bytes to buf and returns how many; -EINVAL for a service
 * longer than HEALTH_SERVICE_MAX, -ENOBUFS when size is too small. */
int health_encode_request(const char *service, uint8_t *buf, size_t size);

/* Decodes a Check response body: exactly one uncompressed gRPC message holding
 * HealthCheckResponse{status = 1 (enum, varint)}. A missing status is UNKNOWN
 * (proto3 default); so is a value we do not know (proto3 enums are open);
 * unknown fields are skipped. -EBADMSG for a truncated or malformed frame or
 * message, trailing bytes, or a compressed one (we never offer compression). */
int health_decode_response(const void *data, size_t len, enum health_status *ret);

/* status valid when error == 0. error < 0: the transport's errors as they are
 * (-ECONNREFUSED, -ETIMEDOUT, -ENOENT for a missing unix socket, ...); -EPROTO
 * for an HTTP status other than 200, a response without grpc-status, or a gRPC
 * error (grpc-status other than 0); -EBADMSG for a malformed response message.
 * grpc-status 5 NOT_FOUND is what grpc.health.v1 servers answer for a service
 * they do not know: error 0 and HEALTH_SERVICE_UNKNOWN. message: NULL or a
 * one-line explanation (the server's grpc-message, percent-decoded, behind the
 * gRPC code name), valid during the callback only. */
typedef void (*health_done_fn)(int error, enum health_status status, const char *message, void *userdata);

/* Probes target (for TCP at host, e.g. the driver pod's IP, an IPv6 address
 * without brackets or a host name; ignored for unix) with one
 * grpc.health.v1.Health/Check call over h2c, within timeout_usec (0: the
 * default), telling the server that deadline in grpc-timeout. done runs
 * exactly once, never from inside this call; the probe is freed right after
 * it returns. Fails without running done: -EINVAL (no or a bad host for TCP,
 * a malformed target), -ENOMEM, or the transport's submit error. *ret, which
 * may be NULL, is valid until done runs. */
int health_probe_start(struct transport *t, const struct health_target *target, const char *host,
                       uint64_t timeout_usec, health_done_fn done, void *userdata,
                       struct health_probe **ret);
/* done runs later with -ECANCELED (unless it is running already). Only while
 * done has not run: the probe is gone afterwards. */
void health_probe_cancel(struct health_probe *p);
