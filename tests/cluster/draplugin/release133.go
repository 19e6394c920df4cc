//go:build !kube1.34

package main

// healthServerBase: 1.33's kubelet has no DRAResourceHealth API and its
// kubeletplugin helper no HandleError (background errors are logged by the
// helper itself), so the plugin serves neither there.
type healthServerBase struct{}
