//go:build kube1.34 && !kube1.35

package main

import drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"

// setHealthTimeout: 1.34's DeviceHealth has no timeout (the kubelet's default holds).
func setHealthTimeout(*drahealthv1alpha1.DeviceHealth, int64) {}
