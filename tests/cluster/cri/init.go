package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The container init: `drainer-cri __container-init`, started by startProcess in
// a new mount namespace (Go's exec made "/" recursively private there, so no
// mount below propagates to the node), reads its initSpec on fd 3, builds the
// container's root, pivots into it and execs the command. An error goes to fd 4
// (close-on-exec: the CRI reads EOF when the exec succeeded) and exit 127.
//
// The root of an OCI image's container (spec.Image): an overlay at spec.Root with
// the image's unpacked root file system as its lower layer, /dev, /proc and /sys
// (buildImageRoot). Of a mapped binary's: a tmpfs at spec.Root (a folder of the
// node: the node's namespace never sees this mount) holding
//   - /usr, /etc and the host's /lib*, /bin, /sbin (or the same symlinks as on the
//     host): overlays with the host's folder as their read-only lower layer and an
//     upper layer on a tmpfs of the container's own (spec.Layers), like an image's
//     layers: the container can create files (mount points, the mapped binary at
//     /usr/bin/NAME) and change them, and the host's files never change;
//   - /dev (tmpfs with null, zero, full, random, urandom, tty and a /dev/shm),
//     /proc (its own instance, /proc/sys read-only), /sys (read-only, without the
//     host's cgroup mounts), /tmp and /run (tmpfs), /var, /root;
//   - the kubelet's volume mounts, made after pivot_root (sources under
//     /.oldroot), so a symlink in the root can never lead a mount point out of it.

func initFail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if f := os.NewFile(4, "status"); f != nil {
		_, _ = f.WriteString(msg)
	}
	fmt.Fprintln(os.Stderr, "drainer-cri init: "+msg)
	os.Exit(127)
}

func must(err error, format string, args ...any) {
	if err != nil {
		initFail("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

func containerInit() {
	// A container's umask is 022 whatever the runtime's (tests/cluster/up runs with
	// 077): mount points made here must be open to a container that runs as another user.
	syscall.Umask(0o022)
	syscall.CloseOnExec(4)
	var spec initSpec
	specFile := os.NewFile(3, "spec")
	if specFile == nil {
		initFail("no spec on fd 3")
	}
	must(json.NewDecoder(specFile).Decode(&spec), "read spec")
	specFile.Close()
	if self, parent := mountNS("self"), mountNS(fmt.Sprint(os.Getppid())); self == "" || self == parent {
		initFail("not in a mount namespace of its own (%s)", self)
	}
	readOnly := buildRoot(&spec)
	pivot(spec.Root)
	if spec.Binary != "" {
		target := "/usr/bin/" + spec.BinName
		if _, err := os.Stat(target); err != nil {
			must(os.WriteFile(target, nil, 0o755), "create %s", target)
		}
		must(syscall.Mount("/.oldroot"+spec.Binary, target, "", syscall.MS_BIND, ""), "bind %s at %s", spec.Binary, target)
		remountRO(target)
	}
	for _, m := range spec.Mounts {
		mountVolume(m)
	}
	must(syscall.Unmount("/.oldroot", syscall.MNT_DETACH), "detach the old root")
	must(os.Remove("/.oldroot"), "remove /.oldroot")
	if spec.ReadOnly {
		// As a runtime's read-only rootfs: only volumes, /dev and /dev/shm stay writable.
		for _, o := range readOnly {
			remountRO(o)
		}
	}
	if spec.Hostname != "" {
		must(syscall.Sethostname([]byte(spec.Hostname)), "set hostname %q", spec.Hostname)
	}
	if err := os.Chdir(spec.Cwd); err != nil {
		must(os.MkdirAll(spec.Cwd, 0o755), "working directory %s", spec.Cwd)
		must(os.Chdir(spec.Cwd), "working directory %s", spec.Cwd)
	}
	if len(spec.Argv) == 0 {
		initFail("no command")
	}
	argv0 := lookPath(spec.Argv[0], spec.Env)
	if spec.GID != nil || spec.UID != nil {
		groups := make([]int, len(spec.Groups))
		for i, g := range spec.Groups {
			groups[i] = int(g)
		}
		must(syscall.Setgroups(groups), "setgroups")
		if spec.GID != nil {
			must(syscall.Setgid(int(*spec.GID)), "setgid %d", *spec.GID)
		}
		if spec.UID != nil {
			must(syscall.Setuid(int(*spec.UID)), "setuid %d", *spec.UID)
		}
	}
	err := syscall.Exec(argv0, spec.Argv, spec.Env)
	initFail("exec %s: %v", spec.Argv[0], err)
}

// lookPath finds argv0 on the container's PATH (inside the new root).
func lookPath(argv0 string, env []string) string {
	if strings.Contains(argv0, "/") {
		return argv0
	}
	p := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	for _, dir := range filepath.SplitList(p) {
		f := filepath.Join(dir, argv0)
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return f
		}
	}
	initFail("exec %s: executable file not found in $PATH (%s)", argv0, p)
	return ""
}

// hostEntries are taken from the host, as binds or symlinks (merged /usr).
var hostEntries = []string{"usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// buildRoot returns the mounts (paths inside the root) that readOnlyRootFilesystem
// makes read-only.
func buildRoot(spec *initSpec) []string {
	r := spec.Root
	must(syscall.Mount("tmpfs", spec.Layers, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=700,size=256m"), "tmpfs layers")
	if spec.Image != "" {
		return buildImageRoot(spec)
	}
	must(syscall.Mount("tmpfs", r, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755,size=64m"), "tmpfs root")
	var overlays []string
	for _, e := range hostEntries {
		host := "/" + e
		st, err := os.Lstat(host)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			l, err := os.Readlink(host)
			must(err, "readlink %s", host)
			must(os.Symlink(l, filepath.Join(r, e)), "symlink /%s", e)
			continue
		}
		if !st.IsDir() {
			continue
		}
		upper, work := filepath.Join(spec.Layers, e, "upper"), filepath.Join(spec.Layers, e, "work")
		must(os.MkdirAll(upper, 0o755), "mkdir %s", upper)
		must(os.MkdirAll(work, 0o700), "mkdir %s", work)
		must(os.Chmod(upper, st.Mode().Perm()), "chmod %s", upper)
		must(os.Mkdir(filepath.Join(r, e), 0o755), "mkdir /%s", e)
		must(syscall.Mount("overlay", filepath.Join(r, e), "overlay", 0,
			"lowerdir="+host+",upperdir="+upper+",workdir="+work), "overlay /%s", e)
		overlays = append(overlays, "/"+e)
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "var", "var/lib", "var/log", "var/tmp", "root"} {
		must(os.MkdirAll(filepath.Join(r, d), 0o755), "mkdir /%s", d)
	}
	must(os.Chmod(filepath.Join(r, "root"), 0o700), "chmod /root")
	must(os.Symlink("../run", filepath.Join(r, "var/run")), "symlink /var/run")
	must(syscall.Mount("tmpfs", filepath.Join(r, "tmp"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777,size=64m"), "tmpfs /tmp")
	must(syscall.Mount("tmpfs", filepath.Join(r, "run"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=755,size=16m"), "tmpfs /run")
	must(syscall.Mount("tmpfs", filepath.Join(r, "var/tmp"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777,size=16m"), "tmpfs /var/tmp")
	systemMounts(r)
	return append([]string{"/", "/tmp", "/run", "/var/tmp"}, overlays...)
}

// buildImageRoot: the root of an OCI image's container is an overlay whose lower
// layer is the image's unpacked root file system (shared, never written) and whose
// upper layer lies on the container's own tmpfs, with /dev, /proc and /sys as
// containerd mounts them; nothing else (the image's /tmp is the image's).
func buildImageRoot(spec *initSpec) []string {
	r := spec.Root
	upper, work := filepath.Join(spec.Layers, "root", "upper"), filepath.Join(spec.Layers, "root", "work")
	must(os.MkdirAll(upper, 0o755), "mkdir %s", upper)
	must(os.MkdirAll(work, 0o700), "mkdir %s", work)
	if st, err := os.Stat(spec.Image); err == nil {
		must(os.Chmod(upper, st.Mode().Perm()), "chmod %s", upper)
	}
	must(syscall.Mount("overlay", r, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV,
		"lowerdir="+spec.Image+",upperdir="+upper+",workdir="+work), "overlay root on %s", spec.Image)
	for _, d := range []string{"dev", "proc", "sys"} {
		p := filepath.Join(r, d)
		if st, err := os.Lstat(p); err == nil && !st.IsDir() {
			initFail("image root: /%s is not a folder", d)
		}
		must(os.MkdirAll(p, 0o755), "mkdir /%s", d)
	}
	systemMounts(r)
	return []string{"/"}
}

// systemMounts: /dev, /proc, /sys and the folder of the old root, inside root r.
func systemMounts(r string) {
	dev := filepath.Join(r, "dev")
	must(syscall.Mount("tmpfs", dev, "tmpfs", syscall.MS_NOSUID, "mode=755,size=1m"), "tmpfs /dev")
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		f := filepath.Join(dev, d)
		must(os.WriteFile(f, nil, 0o666), "create /dev/%s", d)
		must(syscall.Mount("/dev/"+d, f, "", syscall.MS_BIND, ""), "bind /dev/%s", d)
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		must(os.Symlink(target, filepath.Join(dev, name)), "symlink /dev/%s", name)
	}
	must(os.Mkdir(filepath.Join(dev, "shm"), 0o1777), "mkdir /dev/shm")
	must(syscall.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=1777,size=16m"), "tmpfs /dev/shm")
	proc := filepath.Join(r, "proc")
	must(syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""), "mount /proc")
	// The node's sysctls are the host's (no network namespace): read-only here.
	must(syscall.Mount(proc+"/sys", proc+"/sys", "", syscall.MS_BIND, ""), "bind /proc/sys")
	remountRO(proc + "/sys")
	for _, f := range []string{"sysrq-trigger", "kcore"} {
		if _, err := os.Stat(proc + "/" + f); err == nil {
			must(syscall.Mount("/dev/null", proc+"/"+f, "", syscall.MS_BIND, ""), "mask /proc/%s", f)
		}
	}
	// /sys without its submounts (the host's cgroup hierarchies): read-only.
	bindReadOnly("/sys", filepath.Join(r, "sys"))
	must(os.Mkdir(filepath.Join(r, ".oldroot"), 0o700), "mkdir /.oldroot")
}

// bindReadOnly binds src (not the mounts below it) at dst, read-only.
func bindReadOnly(src, dst string) {
	must(os.MkdirAll(dst, 0o755), "mkdir %s", dst)
	must(syscall.Mount(src, dst, "", syscall.MS_BIND, ""), "bind %s at %s", src, dst)
	remountRO(dst)
}

func remountRO(target string) {
	var st syscall.Statfs_t
	must(syscall.Statfs(target, &st), "statfs %s", target)
	// Keep the flags the mount has (nosuid, nodev, noexec...) and add ro.
	keep := uintptr(st.Flags) & (syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_NOATIME |
		syscall.MS_NODIRATIME | syscall.MS_RELATIME)
	must(syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|keep, ""), "read-only %s", target)
}

// pivot makes root the root of this mount namespace, the old one at /.oldroot
// (detached once the volumes are bound from it).
func pivot(root string) {
	must(os.Chdir(root), "chdir %s", root)
	must(syscall.PivotRoot(".", ".oldroot"), "pivot_root %s", root)
	must(os.Chdir("/"), "chdir /")
}

// mountVolume binds one of the kubelet's mounts (inside the new root). The
// mount point is created in the root (its tmpfs, or an overlay's upper layer).
func mountVolume(m initMount) {
	src := "/.oldroot" + m.Source
	if m.Dir {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			initFail("volume mount point %s: %v", m.Target, err)
		}
	} else {
		if _, err := os.Stat(m.Target); err != nil {
			must(os.MkdirAll(filepath.Dir(m.Target), 0o755), "volume mount point %s", filepath.Dir(m.Target))
			if err := os.WriteFile(m.Target, nil, 0o644); err != nil {
				initFail("volume mount point %s: %v", m.Target, err)
			}
		}
	}
	real, err := filepath.EvalSymlinks(m.Target)
	must(err, "resolve %s", m.Target)
	if real == "/.oldroot" || strings.HasPrefix(real, "/.oldroot/") {
		initFail("volume mount point %s leads out of the container (%s)", m.Target, real)
	}
	must(syscall.Mount(src, real, "", syscall.MS_BIND|syscall.MS_REC, ""), "bind %s at %s", m.Source, m.Target)
	if m.ReadOnly {
		remountRO(real)
	}
}
