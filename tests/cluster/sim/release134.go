//go:build kube1.34

package main

import corev1 "k8s.io/api/core/v1"

// extendedResourceClaim: the scheduler made the pod a claim for an extended
// resource (status.extendedResourceClaimStatus, 1.34 and newer).
func extendedResourceClaim(p *corev1.Pod) bool { return p.Status.ExtendedResourceClaimStatus != nil }
