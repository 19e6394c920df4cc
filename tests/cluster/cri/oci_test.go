package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type tarEntry struct {
	name, link string
	typ        byte
	mode       int64
	uid, gid   int
	body       string
}

func tarOf(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	_, _ = w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// writeArchive: an OCI archive of one image, tag "1.0", with these layers.
func writeArchive(t *testing.T, file string, cfg ocispec.ImageConfig, layers ...[]tarEntry) (manifest, config digest.Digest) {
	t.Helper()
	blobs := map[string][]byte{}
	add := func(b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		blobs["blobs/sha256/"+d.Encoded()] = b
		return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
	}
	var man ocispec.Manifest
	man.SchemaVersion = 2
	man.MediaType = ocispec.MediaTypeImageManifest
	img := ocispec.Image{Config: cfg, RootFS: ocispec.RootFS{Type: "layers"}}
	img.OS, img.Architecture = "linux", "amd64"
	for _, l := range layers {
		raw := tarOf(t, l)
		img.RootFS.DiffIDs = append(img.RootFS.DiffIDs, digest.FromBytes(raw))
		d := add(gz(t, raw))
		d.MediaType = ocispec.MediaTypeImageLayerGzip
		man.Layers = append(man.Layers, d)
	}
	cb, _ := json.Marshal(img)
	man.Config = add(cb)
	man.Config.MediaType = ocispec.MediaTypeImageConfig
	mb, _ := json.Marshal(man)
	md := add(mb)
	md.MediaType = ocispec.MediaTypeImageManifest
	md.Annotations = map[string]string{ocispec.AnnotationRefName: "1.0"}
	ib, _ := json.Marshal(ocispec.Index{Versioned: man.Versioned, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{md}})
	var entries []tarEntry
	for name, b := range blobs {
		entries = append(entries, tarEntry{name: "./" + name, typ: tar.TypeReg, mode: 0o444, body: string(b)})
	}
	entries = append(entries, tarEntry{name: "./index.json", typ: tar.TypeReg, mode: 0o444, body: string(ib)},
		tarEntry{name: "./oci-layout", typ: tar.TypeReg, mode: 0o444, body: `{"imageLayoutVersion":"1.0.0"}`})
	if err := os.WriteFile(file, tarOf(t, entries), 0o644); err != nil {
		t.Fatal(err)
	}
	return md.Digest, man.Config.Digest
}

// A pull resolves REPO:TAG and REPO@DIGEST, refuses other tags, and unpacks the
// layers in order inside the root (whiteouts, links, owners, modes; a symlink in
// the image never leads a write out of the root).
func TestOCIArchive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unpacking keeps the archive's owners: needs root")
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "img.oci.tar")
	// (the runtime runs under a umask of 077, as tests/cluster/up starts it)
	defer syscall.Umask(syscall.Umask(0o077))
	l1 := []tarEntry{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./var/lib/x/", typ: tar.TypeDir, mode: 0o750},
		{name: "./usr/bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "./usr/bin/tool", typ: tar.TypeReg, mode: 0o755, body: "#!tool"},
		{name: "./bin", typ: tar.TypeSymlink, link: "usr/bin"},
		{name: "./home/nonroot/", typ: tar.TypeDir, mode: 0o700, uid: 65532, gid: 65532},
		{name: "./etc/passwd", typ: tar.TypeReg, mode: 0o644, body: "root:x:0:0::/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n"},
		{name: "./etc/group", typ: tar.TypeReg, mode: 0o644, body: "root:x:0:\nnonroot:x:65532:\n"},
		{name: "./gone", typ: tar.TypeReg, mode: 0o644, body: "x"},
		{name: "./opaque/old", typ: tar.TypeReg, mode: 0o644, body: "x"},
		{name: "./escape", typ: tar.TypeSymlink, link: "/"},
		{name: "./up", typ: tar.TypeSymlink, link: "../../../.."},
	}
	l2 := []tarEntry{
		{name: "./.wh.gone", typ: tar.TypeReg},
		{name: "./opaque/.wh..wh..opq", typ: tar.TypeReg},
		{name: "./opaque/new", typ: tar.TypeReg, mode: 0o600, body: "n"},
		{name: "./bin/tool2", typ: tar.TypeLink, link: "usr/bin/tool"},
		{name: "./escape/etc/escaped", typ: tar.TypeReg, mode: 0o644, body: "no"},
		{name: "./up/escaped-too", typ: tar.TypeReg, mode: 0o644, body: "no"},
		{name: "../../dotdot", typ: tar.TypeReg, mode: 0o644, body: "no"},
	}
	cfg := ocispec.ImageConfig{User: "nonroot", Entrypoint: []string{"/usr/bin/tool"}, Cmd: []string{"run"}, Env: []string{"PATH=/usr/bin"}, WorkingDir: "/home/nonroot"}
	man, conf := writeArchive(t, archive, cfg, l1, l2)

	if _, err := resolveOCI("localhost/img:2.0", "localhost/img", archive); err == nil || !strings.Contains(err.Error(), "localhost/img:1.0") {
		t.Fatalf("an unknown tag: %v, want an error naming the archive's tag", err)
	}
	byDigest, err := resolveOCI("localhost/img@"+man.String(), "localhost/img", archive)
	if err != nil || byDigest.manifest != man {
		t.Fatalf("by digest: %v %+v", err, byDigest)
	}
	img, err := resolveOCI("localhost/img:1.0", "localhost/img", archive)
	if err != nil {
		t.Fatal(err)
	}
	if img.manifest != man || img.id != conf || !reflect.DeepEqual(img.config.Config.Entrypoint, cfg.Entrypoint) {
		t.Fatalf("resolved %+v", img)
	}
	cri := img.criImage()
	if cri.Id != conf.String() || cri.RepoDigests[0] != "localhost/img@"+man.String() || cri.Username != "nonroot" {
		t.Fatalf("CRI image %+v", cri)
	}
	oci := filepath.Join(dir, "oci")
	if err := unpackOCI(img, oci); err != nil {
		t.Fatal(err)
	}
	root := img.rootfs
	if root != filepath.Join(oci, "sha256-"+man.Encoded(), "rootfs") {
		t.Fatalf("rootfs %s", root)
	}
	read := func(p string) string { b, _ := os.ReadFile(filepath.Join(root, p)); return string(b) }
	if read("usr/bin/tool") != "#!tool" || read("usr/bin/tool2") != "#!tool" || read("opaque/new") != "n" {
		t.Errorf("files: tool %q tool2 %q opaque/new %q", read("usr/bin/tool"), read("usr/bin/tool2"), read("opaque/new"))
	}
	for _, p := range []string{"gone", "opaque/old"} {
		if _, err := os.Lstat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s: whited out, still there (%v)", p, err)
		}
	}
	// the escapes landed inside the root (or nowhere), never outside it
	for _, p := range []string{"/etc/escaped", filepath.Join(dir, "escaped-too"), filepath.Join(filepath.Dir(dir), "dotdot")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s written outside the root", p)
		}
	}
	if read("etc/escaped") != "no" {
		t.Errorf("escape/etc/escaped: want it at root/etc/escaped")
	}
	if st, err := os.Stat(filepath.Join(root, "home/nonroot")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("home/nonroot: %v %v", st, err)
	} else if owner := st.Sys().(*syscall.Stat_t); owner.Uid != 65532 || owner.Gid != 65532 {
		t.Errorf("home/nonroot owned by %d:%d", owner.Uid, owner.Gid)
	}
	if st, err := os.Stat(filepath.Join(root, "usr/bin/tool")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("usr/bin/tool mode %v (%v)", st, err)
	}
	// the root's own entry, and folders the archive does not list (var, var/lib), open to all
	for p, want := range map[string]os.FileMode{"": 0o755, "usr": 0o755, "var": 0o755, "var/lib": 0o755, "var/lib/x": 0o750} {
		if st, err := os.Stat(filepath.Join(root, p)); err != nil || st.Mode().Perm() != want {
			t.Errorf("/%s: mode %v (%v), want %v", p, st.Mode().Perm(), err, want)
		}
	}
	// once per digest: a second unpack finds it done
	if err := os.WriteFile(filepath.Join(root, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unpackOCI(img, oci); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "marker")); err != nil {
		t.Errorf("unpacked again: %v", err)
	}
	if uid, gid, err := imageUser(root, "nonroot"); err != nil || uid != 65532 || gid != 65532 {
		t.Errorf("imageUser(nonroot) = %d %d %v", uid, gid, err)
	}
	if uid, gid, err := imageUser(root, "7:nonroot"); err != nil || uid != 7 || gid != 65532 {
		t.Errorf("imageUser(7:nonroot) = %d %d %v", uid, gid, err)
	}
	if _, _, err := imageUser(root, "nobody"); err == nil {
		t.Errorf("imageUser(nobody): no error")
	}

	// a corrupted blob is refused
	b, _ := os.ReadFile(archive)
	bad := bytes.Replace(b, []byte(`"run"`), []byte(`"RUN"`), 1)
	if err := os.WriteFile(archive, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveOCI("localhost/img:1.0", "localhost/img", archive); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a changed config blob: %v, want a digest error", err)
	}
}

// Kubernetes' rule: command replaces the entrypoint, args the cmd (dropped when
// the pod gives a command); a mapped binary is its own entrypoint.
func TestContainerArgv(t *testing.T) {
	img := &ociImage{}
	img.config.Config = ocispec.ImageConfig{Entrypoint: []string{"/e"}, Cmd: []string{"c"}}
	for _, tc := range []struct {
		cmd, args, want []string
	}{
		{nil, nil, []string{"/e", "c"}},
		{nil, []string{"a"}, []string{"/e", "a"}},
		{[]string{"/x"}, nil, []string{"/x"}},
		{[]string{"/x"}, []string{"a"}, []string{"/x", "a"}},
	} {
		c := &container{oci: img, cfg: &runtimeapi.ContainerConfig{Command: tc.cmd, Args: tc.args}}
		if got := containerArgv(c, ""); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("command %q args %q: %q, want %q", tc.cmd, tc.args, got, tc.want)
		}
	}
	c := &container{cfg: &runtimeapi.ContainerConfig{Args: []string{"serve"}}}
	if got := containerArgv(c, "drainer"); !reflect.DeepEqual(got, []string{"/usr/bin/drainer", "serve"}) {
		t.Errorf("mapped: %q", got)
	}
}

func TestSplitRef(t *testing.T) {
	for in, want := range map[string][3]string{
		"localhost/drainer:0.1.0":    {"localhost/drainer", "0.1.0", ""},
		"localhost:5000/drainer":     {"localhost:5000/drainer", "latest", ""},
		"localhost/drainer@sha256:1": {"localhost/drainer", "", "sha256:1"},
	} {
		r, tag, d := splitRef(in)
		if [3]string{r, tag, string(d)} != want {
			t.Errorf("splitRef(%q) = %q %q %q", in, r, tag, d)
		}
	}
}
