package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The container runtime of the real nodes (drainer-cri), through the real
// kubelet: a mapped image runs its binary with the kubelet's command, env and
// volumes (projected ServiceAccount token, configMap, downward API, emptyDir,
// hostPath) in a root of its own; an exec readiness probe and an exec preStop
// hook run inside the container; a pause-like init container ends at once; the
// pod's log is the container's output (kubectl logs); pods get the node's pod
// IPs; a container that exits by itself gets its real exit code, one that
// crashes is restarted by the kubelet.
func TestRuntimeContainers(t *testing.T) {
	ctx := need(t)
	if !env.real {
		t.Skip("the simulator runs no containers")
	}
	t.Parallel()
	const i = 1
	node := nodeName(i)
	ns := newNamespace(t, ctx, "e2e-runtime")
	hostDir := filepath.Join(env.dir, "nodes", node, "e2e-"+ns)
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"key": "value-from-configmap"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	script := `echo "hello from $(hostname)"; echo "api $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT";
ls /var/run/secrets/kubernetes.io/serviceaccount; cat /etc/cfg/key; echo; echo "pod $(cat /etc/podinfo/name)";
echo started > /hostdir/started; touch /scratch/x; exec sleep 3600`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "proc"},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: node},
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			InitContainers: []corev1.Container{
				{Name: "init-pause", Image: "registry.example.com/init:v1"},
				{Name: "init-sleep", Image: "drainer.test/sleep:dev", Args: []string{"0.2"}},
			},
			Containers: []corev1.Container{{
				Name: "main", Image: "drainer.test/sleep:dev", Command: []string{"/bin/sh", "-c", script},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c",
						`test -s /var/run/secrets/kubernetes.io/serviceaccount/token && test "$KUBERNETES_SERVICE_HOST" = 127.0.0.1 && test -f /scratch/x && test "$POD_NAME" = proc`}}},
					PeriodSeconds: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "echo \"prestop in $(hostname)\" > /hostdir/prestop"}},
				}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "cfg", MountPath: "/etc/cfg"},
					{Name: "podinfo", MountPath: "/etc/podinfo"},
					{Name: "scratch", MountPath: "/scratch"},
					{Name: "host", MountPath: "/hostdir"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: hostDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	eventually(t, 60*time.Second, "pod proc Running and Ready (exec readiness probe)", func() (bool, string) {
		var err error
		if p, err = cs.CoreV1().Pods(ns).Get(ctx, "proc", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && isReady(p), fmt.Sprintf("phase %s, %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	if !strings.HasPrefix(p.Status.PodIP, fmt.Sprintf("%s.%d.", env.ipPrefix, i)) || p.Status.PodIP == driverIP(i) {
		t.Errorf("pod IP %s: want %s.%d.2-254", p.Status.PodIP, env.ipPrefix, i)
	}
	for _, st := range p.Status.InitContainerStatuses {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			t.Errorf("init container %s: %+v, want terminated with exit 0", st.Name, st.State)
		}
	}
	if b, err := os.ReadFile(filepath.Join(hostDir, "started")); err != nil || string(b) != "started\n" {
		t.Errorf("the container's write to its hostPath volume: %q %v", b, err)
	}
	eventually(t, 20*time.Second, "kubectl logs of proc", func() (bool, string) {
		b, err := cs.CoreV1().Pods(ns).GetLogs("proc", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		out := string(b)
		for _, want := range []string{"hello from proc", "api 127.0.0.1:", "token", "value-from-configmap", "pod proc"} {
			if !strings.Contains(out, want) {
				return false, fmt.Sprintf("log lacks %q: %q", want, out)
			}
		}
		return true, ""
	})

	// Pods that end by themselves: a real exit code, and a restart of a crashed one.
	for _, q := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node}, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			Containers:                    []corev1.Container{{Name: "main", Image: "drainer.test/sleep:dev", Args: []string{"0.5"}}},
		}},
		// Not root: the token (the kubelet makes it 0600, owned by the pod's user) and the
		// mount points above it (made by the runtime) are open to it.
		{ObjectMeta: metav1.ObjectMeta{Name: "nonroot"}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node}, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(65532)), RunAsGroup: ptr.To(int64(65532))},
			Containers: []corev1.Container{{Name: "main", Image: "drainer.test/sleep:dev", Command: []string{"/bin/sh", "-c",
				`test "$(id -u):$(id -g)" = 65532:65532 && test -s /var/run/secrets/kubernetes.io/serviceaccount/token && cat /var/run/secrets/kubernetes.io/serviceaccount/token >/dev/null`}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "crash"}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node}, TerminationGracePeriodSeconds: ptr.To(int64(2)),
			Containers: []corev1.Container{{Name: "main", Image: "drainer.test/sleep:dev", Command: []string{"/bin/sh", "-c", "exit 3"}}},
		}},
	} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "pod done Succeeded with exit code 0", func() (bool, string) {
		q, err := cs.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok := q.Status.Phase == corev1.PodSucceeded && len(q.Status.ContainerStatuses) == 1 &&
			q.Status.ContainerStatuses[0].State.Terminated != nil && q.Status.ContainerStatuses[0].State.Terminated.ExitCode == 0
		return ok, fmt.Sprintf("%s %+v", q.Status.Phase, q.Status.ContainerStatuses)
	})
	eventually(t, 30*time.Second, "pod nonroot (uid 65532) read its ServiceAccount token: Succeeded", func() (bool, string) {
		q, err := cs.CoreV1().Pods(ns).Get(ctx, "nonroot", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return q.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("%s %+v", q.Status.Phase, q.Status.ContainerStatuses)
	})
	eventually(t, 60*time.Second, "pod crash restarted by the kubelet after exit code 3", func() (bool, string) {
		q, err := cs.CoreV1().Pods(ns).Get(ctx, "crash", metav1.GetOptions{})
		if err != nil || len(q.Status.ContainerStatuses) != 1 {
			return false, fmt.Sprint(err)
		}
		st := q.Status.ContainerStatuses[0]
		last := st.LastTerminationState.Terminated
		return st.RestartCount >= 1 && last != nil && last.ExitCode == 3, fmt.Sprintf("restarts %d, last %+v", st.RestartCount, last)
	})

	// Deleting proc runs its exec preStop hook inside the container (its hostname,
	// its volumes) before the kubelet stops it.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "proc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, 30*time.Second, "pod proc", func() error {
		_, err := cs.CoreV1().Pods(ns).Get(context.Background(), "proc", metav1.GetOptions{})
		return err
	})
	if b, err := os.ReadFile(filepath.Join(hostDir, "prestop")); err != nil || string(b) != "prestop in proc\n" {
		t.Errorf("the preStop hook's write: %q %v", b, err)
	}
}
