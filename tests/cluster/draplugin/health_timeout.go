//go:build kube1.35

package main

import drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

// setHealthTimeout: how long the kubelet trusts a report (k8s.io/kubelet 0.35 and
// newer; 1.34's kubelet uses its fixed default).
func setHealthTimeout(d *drahealthv1alpha1.DeviceHealth, s int64) { d.HealthCheckTimeoutSeconds = s }
