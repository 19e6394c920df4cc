//go:build !kube1.34

package main

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// setImageSize: k8s.io/cri-api 0.33 (gogo protobuf) names the field Size_.
func setImageSize(img *runtimeapi.Image, n uint64) { img.Size_ = n }
