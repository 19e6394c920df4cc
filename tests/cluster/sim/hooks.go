package main

// preStop hooks of terminating pods, run as the kubelet runs them: every
// container's hook at once, the pod's containers stopped only once all hooks
// returned or the grace period ran out (then the hook is killed). There are no
// containers here, so an exec hook runs on the host: only commands named in
// --hook-path-map run (mapped to a host path, e.g. /guard/drainer to the built
// drainer), with the container's env (plain values and the usual fieldRefs),
// NODE_NAME, and KUBECONFIG pointing at the pod's identity: a token of its
// ServiceAccount bound to the pod (as the kubelet projects it), or the file
// given with --hook-kubeconfig. Sleep hooks sleep. Output goes to the log.

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// minStopGrace: after the hooks, the kubelet gives containers at least this
// long to stop (minimumGracePeriodInSeconds).
const minStopGrace = 2 * time.Second

// pathMap is --hook-path-map SRC=DST, repeatable: an exec hook whose command is
// SRC (or lies below SRC when SRC ends in "/") runs DST on the host.
type pathMap map[string]string

func (m pathMap) String() string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func (m pathMap) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		src, dst, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || !strings.HasPrefix(src, "/") || dst == "" {
			return fmt.Errorf("want /CONTAINER/PATH=/HOST/PATH, got %q", item)
		}
		m[src] = dst
	}
	return nil
}

// resolve maps a hook's command to the host, or reports that it is not mapped.
func (m pathMap) resolve(cmd string) (string, bool) {
	if dst, ok := m[cmd]; ok {
		return dst, true
	}
	for src, dst := range m {
		if strings.HasSuffix(src, "/") && strings.HasPrefix(cmd, src) {
			return filepath.Join(dst, strings.TrimPrefix(cmd, src)), true
		}
	}
	return "", false
}

// hookRun is the preStop phase of one pod (all of its containers' hooks).
type hookRun struct {
	started time.Time
	done    chan struct{} // closed when every hook returned or was killed
	ended   time.Time     // valid once done is closed
	cancel  context.CancelFunc
}

func hasPreStop(p *corev1.Pod) bool {
	for i := range p.Spec.Containers {
		if l := p.Spec.Containers[i].Lifecycle; l != nil && l.PreStop != nil {
			return true
		}
	}
	return false
}

// graceOf: the grace period of the pod's deletion (an eviction may shorten it),
// else its spec's, else the default 30 s.
func graceOf(p *corev1.Pod) time.Duration {
	if p.DeletionGracePeriodSeconds != nil {
		return time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// runsHooks: the kubelet runs the preStop hooks of this terminating pod
// (running containers, a grace period left, hooks enabled).
func (s *sim) runsHooks(p *corev1.Pod) bool {
	return s.cfg.hooks && p.DeletionTimestamp != nil && hasPreStop(p) && started(p) && !isTerminal(p) &&
		!containersStopped(p) && graceOf(p) > 0
}

// hookPending: p's containers still run because its preStop hooks have not all
// returned (or not started yet: the next sync starts them). A driver pod in
// this state still serves its kubelet plugin.
func (s *sim) hookPending(p *corev1.Pod) bool {
	if !s.runsHooks(p) {
		return false
	}
	s.hooksMu.Lock()
	run := s.hooks[p.UID]
	s.hooksMu.Unlock()
	if run == nil {
		return true
	}
	select {
	case <-run.done:
		return false
	default:
		return true
	}
}

// forgetHooks drops the state of a deleted pod, killing hooks still running.
func (s *sim) forgetHooks(uid types.UID) {
	s.hooksMu.Lock()
	run := s.hooks[uid]
	delete(s.hooks, uid)
	s.hooksMu.Unlock()
	if run != nil {
		run.cancel()
	}
}

// stopHooks kills every hook still running (the simulator is stopping: no hook
// process may outlive it) and waits a little for them to be reaped.
func (s *sim) stopHooks() {
	s.hooksMu.Lock()
	s.hooksStopped = true
	for _, run := range s.hooks {
		run.cancel()
	}
	s.hooksMu.Unlock()
	reaped := make(chan struct{})
	go func() { s.hookProcs.Wait(); close(reaped) }()
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
		log.Printf("preStop hooks still running after 5 s of shutdown")
	}
}

// startHooks starts the preStop hooks of p once (later calls return the same run).
// The grace period counts from seen, when the deletion was first observed.
func (s *sim) startHooks(n *simNode, p *corev1.Pod, key string, seen time.Time) *hookRun {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	if run := s.hooks[p.UID]; run != nil {
		return run
	}
	grace := graceOf(p)
	ctx, cancel := context.WithDeadline(context.Background(), seen.Add(grace))
	run := &hookRun{started: time.Now(), done: make(chan struct{}), cancel: cancel}
	s.hooks[p.UID] = run
	if s.hooksStopped {
		// Shutting down: no new hook process.
		cancel()
		run.ended = run.started
		close(run.done)
		return run
	}
	pod := p.DeepCopy()
	var wg sync.WaitGroup
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		wg.Add(1)
		s.hookProcs.Add(1)
		go func() {
			defer wg.Done()
			defer s.hookProcs.Done()
			s.runHook(ctx, n, pod, c, grace)
		}()
	}
	go func() {
		wg.Wait()
		timedOut := ctx.Err() == context.DeadlineExceeded
		cancel()
		run.ended = time.Now()
		close(run.done)
		what := "returned"
		if timedOut {
			what = "ran out of the grace period " + grace.String()
		}
		log.Printf("pod %s on %s: preStop hooks %s after %v; stopping its containers",
			key, n.name, what, run.ended.Sub(run.started).Round(time.Millisecond))
		s.podQueue.Add(key)
		if s.isDriverPod(pod) {
			s.nodeQueue.Add(n.name)
		}
	}()
	return run
}

// runHook runs one container's preStop handler until it returns or ctx ends.
func (s *sim) runHook(ctx context.Context, n *simNode, p *corev1.Pod, c *corev1.Container, grace time.Duration) {
	key := p.Namespace + "/" + p.Name
	h := c.Lifecycle.PreStop
	t0 := time.Now()
	switch {
	case h.Sleep != nil:
		d := time.Duration(h.Sleep.Seconds) * time.Second
		log.Printf("pod %s on %s: preStop hook of container %s: sleep %v", key, n.name, c.Name, d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return
	case h.Exec == nil || len(h.Exec.Command) == 0:
		log.Printf("pod %s on %s: preStop hook of container %s is not an exec or sleep hook: not simulated", key, n.name, c.Name)
		return
	}
	argv := h.Exec.Command
	path, ok := s.cfg.hookPathMap.resolve(argv[0])
	if !ok {
		log.Printf("pod %s on %s: preStop hook of container %s (%s) not run: %s is not in --hook-path-map",
			key, n.name, c.Name, strings.Join(argv, " "), argv[0])
		return
	}
	kubeconfig, cleanup, err := s.hookKubeconfig(ctx, p, grace)
	if err != nil {
		log.Printf("pod %s on %s: preStop hook of container %s failed: no credentials: %v", key, n.name, c.Name, err)
		return
	}
	defer cleanup()

	cmd := exec.Command(path, argv[1:]...)
	cmd.Env = s.hookEnv(n, p, c, kubeconfig)
	cmd.Dir = s.cfg.hookDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			log.Printf("pod %s hook %s: %s", key, c.Name, sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	log.Printf("pod %s on %s: preStop hook of container %s: running %s (as %s), grace period %v",
		key, n.name, c.Name, strings.Join(append([]string{path}, argv[1:]...), " "), argv[0], grace)
	if err := cmd.Start(); err != nil {
		pw.Close()
		<-logged
		log.Printf("pod %s on %s: preStop hook of container %s failed to start: %v", key, n.name, c.Name, err)
		return
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	killed := false
	select {
	case werr = <-waited:
	case <-ctx.Done():
		// The grace period ran out (or the pod is gone): the kubelet stops the
		// container, and the hook's process with it.
		killed = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-waited
	}
	pw.Close()
	<-logged
	took := time.Since(t0).Round(time.Millisecond)
	switch {
	case killed:
		log.Printf("pod %s on %s: preStop hook of container %s killed after %v (grace period %v ran out)", key, n.name, c.Name, took, grace)
	case werr != nil:
		log.Printf("pod %s on %s: preStop hook of container %s failed after %v: %v", key, n.name, c.Name, took, werr)
	default:
		log.Printf("pod %s on %s: preStop hook of container %s exited 0 after %v", key, n.name, c.Name, took)
	}
}

// hookEnv: what the container would see: NODE_NAME, its env (plain values and
// fieldRefs; $(VAR) references are not expanded), KUBECONFIG, and the host's PATH.
func (s *sim) hookEnv(n *simNode, p *corev1.Pod, c *corev1.Container, kubeconfig string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "HOME=" + s.cfg.hookDir, "NODE_NAME=" + n.name}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil:
			if v, ok := fieldRef(p, e.ValueFrom.FieldRef.FieldPath); ok {
				env = append(env, e.Name+"="+v)
			} else {
				log.Printf("pod %s/%s hook %s: env %s: fieldRef %s not simulated, left out", p.Namespace, p.Name, c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		default:
			log.Printf("pod %s/%s hook %s: env %s: only values and fieldRefs are simulated, left out", p.Namespace, p.Name, c.Name, e.Name)
		}
	}
	return append(env, "KUBECONFIG="+kubeconfig)
}

func fieldRef(p *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return p.Name, true
	case "metadata.namespace":
		return p.Namespace, true
	case "metadata.uid":
		return string(p.UID), true
	case "spec.nodeName":
		return p.Spec.NodeName, true
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, true
	case "status.podIP":
		return p.Status.PodIP, true
	case "status.hostIP":
		return p.Status.HostIP, true
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			return m[strings.TrimSuffix(strings.TrimPrefix(path, prefix+"['"), "']")], true
		}
	}
	return "", false
}

// hookKubeconfig: --hook-kubeconfig, or a kubeconfig with a token of the pod's
// ServiceAccount bound to the pod (what the kubelet mounts for in-cluster
// clients), written for this hook and removed after it.
func (s *sim) hookKubeconfig(ctx context.Context, p *corev1.Pod, grace time.Duration) (string, func(), error) {
	if s.cfg.hookKubeconfig != "" {
		return s.cfg.hookKubeconfig, func() {}, nil
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(grace/time.Second) + 600 // the API's minimum is 600 s
	tr, err := s.cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("token for ServiceAccount %s/%s: %w", p.Namespace, sa, err)
	}
	ca := s.rc.TLSClientConfig.CAData
	if len(ca) == 0 && s.rc.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(s.rc.TLSClientConfig.CAFile); err != nil {
			return "", nil, err
		}
	}
	f, err := os.CreateTemp(s.cfg.hookDir, string(p.UID)+"-*.kubeconfig")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, `apiVersion: v1
kind: Config
clusters:
- name: in-cluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: in-cluster
  context:
    cluster: in-cluster
    user: %s
current-context: in-cluster
`, s.rc.Host, base64.StdEncoding.EncodeToString(ca), sa, tr.Status.Token, sa)
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	name := f.Name()
	return name, func() { os.Remove(name) }, nil
}
