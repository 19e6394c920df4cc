//go:build !kube1.34

package main

import corev1 "k8s.io/api/core/v1"

// extendedResourceClaim: 1.33 has no extended resources backed by DRA.
func extendedResourceClaim(*corev1.Pod) bool { return false }
