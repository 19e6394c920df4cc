//go:build kube1.34

package main

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// setImageSize: k8s.io/cri-api 0.34 and newer (protoc-gen-go) name the field Size.
func setImageSize(img *runtimeapi.Image, n uint64) { img.Size = n }
