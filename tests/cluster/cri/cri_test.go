package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestBinName(t *testing.T) {
	for in, want := range map[string]string{
		"drainer.test/drainer:dev":    "drainer",
		"drainer.test/dra-plugin:dev": "dra-plugin",
		"drainer.test/sleep@sha256:0": "sleep",
		"example.com/a/b/tool":        "tool",
	} {
		if got := binName(in); got != want {
			t.Errorf("binName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The CRI's Signal enum is alphabetical (SIGABRT = 1, SIGINT = 10 in 1.36; names
// SIGNAL_SIGABRT... from cri-api 0.37): each maps to Linux's signal of that name.
func TestStopSignal(t *testing.T) {
	byName := func(name string) runtimeapi.Signal {
		for _, n := range []string{name, "SIGNAL_" + name} {
			if v, ok := runtimeapi.Signal_value[n]; ok {
				return runtimeapi.Signal(v)
			}
		}
		t.Fatalf("the CRI has no signal %s", name)
		return 0
	}
	for name, want := range map[string]syscall.Signal{
		"SIGABRT": syscall.SIGABRT, "SIGINT": syscall.SIGINT, "SIGKILL": syscall.SIGKILL,
		"SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1, "SIGTERM": syscall.SIGTERM,
	} {
		if got := stopSignal(byName(name)); got != want {
			t.Errorf("stopSignal(%s = %d) = %v, want %v", name, byName(name), got, want)
		}
	}
	if got := stopSignal(0); got != syscall.SIGTERM {
		t.Errorf("stopSignal(RUNTIME_DEFAULT) = %v, want SIGTERM", got)
	}
}

func sandboxCfg(ns string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: ns, Uid: "u"}, Labels: labels}
}

// The simulator's IP rule: the pinned pod gets P.i.1 while it is free, the
// others P.i.2 .. P.i.254, unique, round robin; none left is an error.
func TestAllocIP(t *testing.T) {
	r, err := newRuntime(&config{nodeDir: t.TempDir(), ipPrefix: "127.9.3", pinnedIP: "127.9.3.1",
		pinnedPods: "dra-system/app=drv", images: stringMap{}})
	if err != nil {
		t.Fatal(err)
	}
	drv := sandboxCfg("dra-system", map[string]string{"app": "drv"})
	other := sandboxCfg("default", nil)
	if ip, err := r.allocIP("a", drv); err != nil || ip != "127.9.3.1" {
		t.Fatalf("pinned pod: %q %v", ip, err)
	}
	if ip, _ := r.allocIP("b", drv); ip != "127.9.3.2" {
		t.Errorf("second pinned pod while the first lives: %q, want 127.9.3.2", ip)
	}
	seen := map[string]bool{}
	for i := 0; i < 252; i++ {
		ip, err := r.allocIP("x"+string(rune(i)), other)
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if seen[ip] || ip == "127.9.3.1" || ip == "127.9.3.2" {
			t.Fatalf("pod %d got %s twice or a taken one", i, ip)
		}
		seen[ip] = true
	}
	if _, err := r.allocIP("full", other); err == nil {
		t.Errorf("254 pods on a node: want an error")
	}
}

func TestLabelsMatch(t *testing.T) {
	have := map[string]string{"a": "1", "b": "2"}
	if !labelsMatch(have, nil) || !labelsMatch(have, map[string]string{"a": "1"}) ||
		labelsMatch(have, map[string]string{"a": "2"}) || labelsMatch(have, map[string]string{"c": ""}) {
		t.Error("labelsMatch")
	}
}

// The CRI log format: one "TIMESTAMP STREAM F TEXT" line per line, P for the
// parts of a line longer than maxLine, the last line without a newline kept.
func TestCRILog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	l, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", maxLine+10)
	l.copy("stdout", bytes.NewBufferString("one\ntwo\n"+long+"\nlast"))
	l.close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z stdout ([FP]) (.*)$`)
	var tags, texts []string
	for _, line := range lines {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("bad line %q", line[:min(len(line), 80)])
		}
		tags, texts = append(tags, m[2]), append(texts, m[3])
	}
	if strings.Join(tags, "") != "FFPFF" || texts[0] != "one" || texts[1] != "two" || texts[2]+texts[3] != long || texts[4] != "last" {
		t.Errorf("tags %v, texts %d", tags, len(texts))
	}
}
