package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func isMirror(p *corev1.Pod) bool {
	_, ok := p.Annotations[annMirror]
	return ok
}

// started: the simulated kubelet ran the pod (and so prepared its claims).
func started(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning || len(p.Status.ContainerStatuses) > 0
}

// holdsClaims: the pod uses ResourceClaims the kubelet must prepare and unprepare
// through the DRA driver.
func holdsClaims(p *corev1.Pod) bool {
	if extendedResourceClaim(p) {
		return true
	}
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			return true
		}
		generated := true // not yet known: assume a claim
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.Name == rc.Name {
				generated = st.ResourceClaimName != nil
			}
		}
		if generated {
			return true
		}
	}
	return false
}

func (s *sim) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	p, err := s.podLister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	n := s.nodes[p.Spec.NodeName]
	if n == nil {
		return nil
	}
	if p.DeletionTimestamp != nil {
		return s.terminate(ctx, n, p, key)
	}
	if isTerminal(p) {
		return nil
	}
	if !started(p) {
		return s.start(ctx, n, p)
	}
	if _, ok := p.Annotations[annRunFor]; ok {
		return s.runFor(ctx, n, p, key)
	}
	return s.refreshReady(ctx, n, p)
}

// runFor handles a pod annotated sim.drainer.io/run-for=DURATION, a workload that
// ends by itself (a Job's pod): once it has run that long (from status.startTime),
// its containers exit 0 (Completed), and once the kubelet has unprepared its
// claims through the DRA driver the phase becomes Succeeded. While the node's
// driver is not running the claims cannot be unprepared: containers stopped, the
// phase stays Running, until the driver runs again (the kubelet reports a terminal
// phase only after UnprepareResources). Meant for restartPolicy Never/OnFailure.
func (s *sim) runFor(ctx context.Context, n *simNode, p *corev1.Pod, key string) error {
	d, err := time.ParseDuration(p.Annotations[annRunFor])
	if err != nil || d < 0 || p.Status.StartTime == nil {
		if err != nil || d < 0 {
			n.logOnce(p.UID, "pod %s/%s: bad %s %q, ignoring", p.Namespace, p.Name, annRunFor, p.Annotations[annRunFor])
		}
		return s.refreshReady(ctx, n, p)
	}
	if left := time.Until(p.Status.StartTime.Add(d)); left > 0 {
		s.podQueue.AddAfter(key, left)
		if containersStopped(p) {
			return nil
		}
		return s.refreshReady(ctx, n, p)
	}
	pods := s.cs.CoreV1().Pods(p.Namespace)
	now := metav1.Now()
	if s.needsDriver(p) && !n.driverIsRunning() {
		if !containersStopped(p) {
			if _, err := pods.UpdateStatus(ctx, stoppedStatus(p, now), metav1.UpdateOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
		}
		n.logOnce(p.UID, "pod %s/%s on %s exited and stays Running: driver %s is not running, claims cannot be unprepared",
			p.Namespace, p.Name, n.name, s.cfg.driver)
		return nil
	}
	q := stoppedStatus(p, now)
	q.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	log.Printf("pod %s/%s on %s succeeded after running %v", p.Namespace, p.Name, n.name, time.Since(p.Status.StartTime.Time).Round(time.Second))
	return nil
}

// needsDriver: the kubelet must call the DRA driver to prepare/unprepare this pod.
func (s *sim) needsDriver(p *corev1.Pod) bool {
	return holdsClaims(p) && !s.isDriverPod(p)
}

func (n *simNode) driverIsRunning() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.driverRunning
}

func (n *simNode) logOnce(uid types.UID, format string, args ...any) {
	n.mu.Lock()
	first := !n.waitLogged[uid]
	n.waitLogged[uid] = true
	n.mu.Unlock()
	if first {
		log.Printf(format, args...)
	}
}

func (s *sim) wantReady(n *simNode, p *corev1.Pod) bool {
	if s.isDriverPod(p) {
		if node, err := s.nodeLister.Get(n.name); err == nil && node.Annotations[annNotReady] == "true" {
			return false
		}
	}
	for _, g := range p.Spec.ReadinessGates {
		ok := false
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func setCondition(st *corev1.PodStatus, typ corev1.PodConditionType, ok bool, gen int64, now metav1.Time) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == typ {
			if c.Status != status {
				c.Status = status
				c.LastTransitionTime = now
			}
			c.ObservedGeneration = gen
			c.Reason, c.Message = "", ""
			if !ok && (typ == corev1.PodReady || typ == corev1.ContainersReady) {
				c.Reason = "PodCompleted"
			}
			return
		}
	}
	c := corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now, ObservedGeneration: gen}
	if !ok && (typ == corev1.PodReady || typ == corev1.ContainersReady) {
		c.Reason = "PodCompleted"
	}
	st.Conditions = append(st.Conditions, c)
}

func containerID(p *corev1.Pod, name string) string {
	return fmt.Sprintf("sim://%s-%s", strings.ReplaceAll(string(p.UID), "-", "")[:12], name)
}

// start runs a bound pod: the kubelet has prepared its claims, started its
// containers and reports it Running and Ready with a pod IP.
func (s *sim) start(ctx context.Context, n *simNode, p *corev1.Pod) error {
	if s.needsDriver(p) && !n.driverIsRunning() {
		// The kubelet cannot prepare the claims: ContainerCreating until the driver runs.
		n.logOnce(p.UID, "pod %s/%s on %s waits for driver %s to prepare its claims", p.Namespace, p.Name, n.name, s.cfg.driver)
		return nil
	}
	ip := n.ip
	switch {
	case p.Spec.HostNetwork:
	case s.isDriverPod(p):
		ip = n.driverIP
	default:
		var err error
		if ip, err = n.allocIP(p.UID, s.cfg.ipPrefix); err != nil {
			return err
		}
	}
	now := metav1.Now()
	q := p.DeepCopy()
	st := &q.Status
	st.ObservedGeneration = p.Generation
	st.Phase = corev1.PodRunning
	st.HostIP = n.ip
	st.HostIPs = []corev1.HostIP{{IP: n.ip}}
	st.PodIP = ip
	st.PodIPs = []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sim://" + c.Image, ContainerID: containerID(p, c.Name),
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
			cs.Ready, cs.Started = true, ptr.To(true)
		} else {
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID}
			cs.Started = ptr.To(false)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "sim://" + c.Image, ContainerID: containerID(p, c.Name),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			Ready: true, Started: ptr.To(true),
		})
	}
	ready := s.wantReady(n, p)
	setCondition(st, corev1.PodReadyToStartContainers, true, p.Generation, now)
	setCondition(st, corev1.PodInitialized, true, p.Generation, now)
	setCondition(st, corev1.ContainersReady, true, p.Generation, now)
	setCondition(st, corev1.PodReady, ready, p.Generation, now)
	if !ready {
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.PodReady {
				st.Conditions[i].Reason = "ReadinessGatesNotReady"
			}
		}
	}
	if _, err := s.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	log.Printf("pod %s/%s on %s running (IP %s)", p.Namespace, p.Name, n.name, ip)
	return nil
}

// refreshReady keeps a running pod's Ready condition in line (driver pods follow
// the sim.drainer.io/driver-not-ready switch).
func (s *sim) refreshReady(ctx context.Context, n *simNode, p *corev1.Pod) error {
	want := s.wantReady(n, p)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if (c.Status == corev1.ConditionTrue) == want {
				return nil
			}
		}
	}
	q := p.DeepCopy()
	now := metav1.Now()
	setCondition(&q.Status, corev1.PodReady, want, p.Generation, now)
	if !want {
		for i := range q.Status.Conditions {
			if q.Status.Conditions[i].Type == corev1.PodReady {
				q.Status.Conditions[i].Reason = "ContainersNotReady"
			}
		}
	}
	for i := range q.Status.ContainerStatuses {
		q.Status.ContainerStatuses[i].Ready = want
	}
	setCondition(&q.Status, corev1.ContainersReady, want, p.Generation, now)
	if _, err := s.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	log.Printf("pod %s/%s on %s ready=%v", p.Namespace, p.Name, n.name, want)
	return nil
}

// stoppedStatus: all containers exited 0 after SIGTERM; Ready false.
func stoppedStatus(p *corev1.Pod, now metav1.Time) *corev1.Pod {
	q := p.DeepCopy()
	stop := func(list []corev1.ContainerStatus) {
		for i := range list {
			cs := &list[i]
			if cs.State.Terminated != nil {
				continue
			}
			startedAt := now
			if cs.State.Running != nil {
				startedAt = cs.State.Running.StartedAt
			}
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: startedAt, FinishedAt: now, ContainerID: cs.ContainerID,
			}}
			cs.Ready, cs.Started = false, ptr.To(false)
		}
	}
	stop(q.Status.InitContainerStatuses)
	stop(q.Status.ContainerStatuses)
	setCondition(&q.Status, corev1.ContainersReady, false, p.Generation, now)
	setCondition(&q.Status, corev1.PodReady, false, p.Generation, now)
	return q
}

func containersStopped(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil {
			return false
		}
	}
	return true
}

// terminate does what the kubelet does with a pod that has a deletionTimestamp:
// stop the containers within the grace period, unprepare the claims through the
// DRA driver (impossible while the driver is not running: the pod stays
// Terminating, kubernetes/kubernetes#129402), report a terminal phase, and
// delete the pod with grace 0.
func (s *sim) terminate(ctx context.Context, n *simNode, p *corev1.Pod, key string) error {
	s.deletionMu.Lock()
	seen, ok := s.deletionSeen[p.UID]
	if !ok {
		seen = time.Now()
		s.deletionSeen[p.UID] = seen
	}
	s.deletionMu.Unlock()
	wait := s.cfg.terminateDelay
	if p.DeletionGracePeriodSeconds != nil {
		if g := time.Duration(*p.DeletionGracePeriodSeconds) * time.Second; g < wait {
			wait = g
		}
	}
	from := seen
	if s.runsHooks(p) {
		// preStop hooks first; the containers get what is left of the grace
		// period (at least 2 s, as the kubelet gives), capped by the delay.
		run := s.startHooks(n, p, key, seen)
		select {
		case <-run.done:
		default:
			return nil // the hook's end requeues the pod
		}
		from = run.ended
		left := seen.Add(graceOf(p)).Sub(run.ended)
		if left < minStopGrace {
			left = minStopGrace
		}
		wait = min(s.cfg.terminateDelay, left)
	}
	if left := time.Until(from.Add(wait)); left > 0 {
		s.podQueue.AddAfter(key, left)
		return nil
	}
	pods := s.cs.CoreV1().Pods(p.Namespace)
	now := metav1.Now()
	if started(p) && !isTerminal(p) && s.needsDriver(p) && !n.driverIsRunning() {
		// Containers are stopped, UnprepareResources fails: phase stays as it is.
		if !containersStopped(p) {
			if _, err := pods.UpdateStatus(ctx, stoppedStatus(p, now), metav1.UpdateOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
		}
		n.logOnce(p.UID, "pod %s/%s on %s stays Terminating: driver %s is not running, claims cannot be unprepared",
			p.Namespace, p.Name, n.name, s.cfg.driver)
		return nil
	}
	if !isTerminal(p) && !isMirror(p) {
		q := stoppedStatus(p, now)
		q.Status.Phase = corev1.PodSucceeded
		if !started(p) {
			q.Status.Phase = corev1.PodFailed
		}
		if _, err := pods.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &p.UID},
	})
	switch {
	case err == nil:
		log.Printf("pod %s/%s on %s terminated after %v", p.Namespace, p.Name, n.name, time.Since(seen).Round(time.Millisecond))
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		return err
	}
	return nil
}
