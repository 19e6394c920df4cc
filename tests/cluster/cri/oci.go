package main

// Images of local OCI archives (an OCI image layout in a tar, as
// deploy/image/build makes build/drainer-image.oci.tar): --oci-archive REPO=PATH
// serves REPO:TAG for every manifest of the archive's index named TAG
// (org.opencontainers.image.ref.name), and REPO@sha256:DIGEST by the manifest's
// digest. A pull reads the archive (PATH is read at each pull, so a symlink can be
// re-pointed), checks the digests of what it reads, and unpacks the image's layers
// once per manifest digest into --oci-dir (shared by the nodes of a cluster, under a
// lock); a container of such an image runs its entrypoint on an overlay whose lower
// layer is that unpacked root file system (init.go), with the image's env, user and
// working directory under the container's own, as a runtime that runs images does.

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxJSONBlob caps the index, manifests and configs read from an archive.
const maxJSONBlob = 4 << 20

// ociImage is an image of an archive, resolved and unpacked by a pull.
type ociImage struct {
	name     string // the name asked for (REPO:TAG or REPO@DIGEST)
	repo     string
	archive  string // the archive's path as configured (a symlink, maybe)
	stamp    string // the archive file's identity when it was read (see archiveStamp)
	manifest digest.Digest
	id       digest.Digest // the config's digest: the image ID, as containerd reports it
	config   ocispec.Image
	rootfs   string // the unpacked layers
	size     int64  // of the layers, compressed
}

// splitRef: REPO:TAG or REPO@DIGEST (a tag of "latest" when there is neither).
func splitRef(name string) (repo, tag string, dig digest.Digest) {
	if r, d, ok := strings.Cut(name, "@"); ok {
		return r, "", digest.Digest(d)
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i], name[i+1:], ""
	}
	return name, "latest", ""
}

// archiveFor: the archive that serves name's repository ("" if none does).
func (r *runtime) archiveFor(name string) (repo, archive string) {
	repo, _, _ = splitRef(name)
	return repo, r.cfg.ociArchives[repo]
}

// archiveStamp identifies the archive file behind path (symlinks followed):
// inode, size and modification time. A rebuilt archive has another.
func archiveStamp(p string) string {
	st, err := os.Stat(p)
	if err != nil {
		return ""
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	var ino uint64
	if sys != nil {
		ino = sys.Ino
	}
	return fmt.Sprintf("%d/%d/%d", ino, st.Size(), st.ModTime().UnixNano())
}

// tarBlobs calls fn for every file of the archive (name without "./"); fn may read
// the entry.
func tarBlobs(archive string, fn func(name string, hdr *tar.Header, r io.Reader) error) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := fn(strings.TrimPrefix(path.Clean(hdr.Name), "./"), hdr, tr); err != nil {
			return err
		}
	}
}

func blobName(d digest.Digest) string { return "blobs/" + d.Algorithm().String() + "/" + d.Encoded() }

// readJSONBlobs: index.json and every blob small enough to be a JSON document, by name.
func readJSONBlobs(archive string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := tarBlobs(archive, func(name string, hdr *tar.Header, r io.Reader) error {
		if (name == "index.json" || strings.HasPrefix(name, "blobs/")) && hdr.Size <= maxJSONBlob {
			b, err := io.ReadAll(io.LimitReader(r, maxJSONBlob))
			if err != nil {
				return err
			}
			out[name] = b
		}
		return nil
	})
	return out, err
}

// verified: the blob of descriptor d, its digest checked.
func verified(blobs map[string][]byte, d ocispec.Descriptor) ([]byte, error) {
	if err := d.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("descriptor digest %q: %w", d.Digest, err)
	}
	b, ok := blobs[blobName(d.Digest)]
	if !ok {
		return nil, fmt.Errorf("blob %s missing", d.Digest)
	}
	if got := d.Digest.Algorithm().FromBytes(b); got != d.Digest {
		return nil, fmt.Errorf("blob %s has digest %s", d.Digest, got)
	}
	return b, nil
}

// resolveOCI reads the archive and finds name's manifest and config.
func resolveOCI(name, repo, archive string) (*ociImage, error) {
	_, tag, want := splitRef(name)
	stamp := archiveStamp(archive)
	blobs, err := readJSONBlobs(archive)
	if err != nil {
		return nil, err
	}
	var index ocispec.Index
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil {
		return nil, fmt.Errorf("%s: index.json: %v", archive, err)
	}
	var found *ocispec.Descriptor
	var names []string
	for i := range index.Manifests {
		m := &index.Manifests[i]
		ref := m.Annotations[ocispec.AnnotationRefName]
		names = append(names, repo+":"+ref)
		if (want != "" && m.Digest == want) || (tag != "" && ref == tag) {
			found = m
			break
		}
	}
	if found == nil {
		return nil, fmt.Errorf("image %s is not in %s (it holds %s)", name, archive, strings.Join(names, ", "))
	}
	b, err := verified(blobs, *found)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", archive, err)
	}
	if found.MediaType == ocispec.MediaTypeImageIndex {
		// An image index: the linux/amd64 manifest.
		var sub ocispec.Index
		if err := json.Unmarshal(b, &sub); err != nil {
			return nil, fmt.Errorf("%s: index %s: %v", archive, found.Digest, err)
		}
		found = nil
		for i := range sub.Manifests {
			p := sub.Manifests[i].Platform
			if p == nil || (p.OS == "linux" && p.Architecture == "amd64") {
				found = &sub.Manifests[i]
				break
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%s: image %s has no linux/amd64 manifest", archive, name)
		}
		if b, err = verified(blobs, *found); err != nil {
			return nil, fmt.Errorf("%s: %v", archive, err)
		}
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("%s: manifest %s: %v", archive, found.Digest, err)
	}
	cb, err := verified(blobs, man.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: config: %v", archive, err)
	}
	img := &ociImage{name: name, repo: repo, archive: archive, stamp: stamp, manifest: found.Digest, id: man.Config.Digest}
	if err := json.Unmarshal(cb, &img.config); err != nil {
		return nil, fmt.Errorf("%s: config %s: %v", archive, man.Config.Digest, err)
	}
	if img.config.OS != "" && img.config.OS != "linux" {
		return nil, fmt.Errorf("%s: image %s is for %s", archive, name, img.config.OS)
	}
	for _, l := range man.Layers {
		img.size += l.Size
	}
	return img, nil
}

// unpackOCI makes img.rootfs: dir/sha256-MANIFEST/rootfs, unpacked once (the
// runtimes of all nodes share dir: an exclusive lock, a temporary folder renamed
// when complete).
func unpackOCI(img *ociImage, dir string) error {
	final := filepath.Join(dir, img.manifest.Algorithm().String()+"-"+img.manifest.Encoded())
	img.rootfs = filepath.Join(final, "rootfs")
	if _, err := os.Stat(filepath.Join(final, ".done")); err == nil {
		return nil
	}
	if err := mkdirAll(dir); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := os.Stat(filepath.Join(final, ".done")); err == nil {
		return nil // another node's runtime did it meanwhile
	}
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	root := filepath.Join(tmp, "rootfs")
	if err := mkdirAll(root); err != nil {
		return err
	}
	blobs, err := readJSONBlobs(img.archive)
	if err != nil {
		return err
	}
	mb, err := verified(blobs, ocispec.Descriptor{Digest: img.manifest})
	if err != nil {
		return err
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(mb, &man); err != nil {
		return err
	}
	for i, l := range man.Layers {
		var diffID digest.Digest
		if i < len(img.config.RootFS.DiffIDs) {
			diffID = img.config.RootFS.DiffIDs[i]
		}
		if err := applyLayer(img.archive, l, diffID, root); err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, l.Digest, err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "image.json"), fmt.Appendf(nil, "{\"name\":%q,\"manifest\":%q,\"config\":%q}\n",
		img.name, img.manifest, img.id), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	log.Printf("image %s (%s): unpacked %d layer(s) into %s", img.name, img.manifest, len(man.Layers), img.rootfs)
	return nil
}

// applyLayer finds the layer's blob in the archive and unpacks it over root,
// checking the compressed digest and the uncompressed one (the config's diff_id).
func applyLayer(archive string, l ocispec.Descriptor, diffID digest.Digest, root string) error {
	if err := l.Digest.Validate(); err != nil {
		return err
	}
	want := blobName(l.Digest)
	seen := false
	err := tarBlobs(archive, func(name string, hdr *tar.Header, r io.Reader) error {
		if name != want {
			return nil
		}
		seen = true
		compressed := sha256.New()
		var in io.Reader = io.TeeReader(r, compressed)
		switch l.MediaType {
		case ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerNonDistributableGzip, // nolint:staticcheck
			"application/vnd.docker.image.rootfs.diff.tar.gzip":
			gz, err := gzip.NewReader(in)
			if err != nil {
				return err
			}
			gz.Multistream(true)
			in = gz
		case ocispec.MediaTypeImageLayer, ocispec.MediaTypeImageLayerNonDistributable: // nolint:staticcheck
		default:
			return fmt.Errorf("layer media type %q is not supported (tar, tar+gzip)", l.MediaType)
		}
		uncompressed := sha256.New()
		if err := extractTar(io.TeeReader(in, uncompressed), root); err != nil {
			return err
		}
		// The rest of the stream (tar padding, gzip trailer) counts for the digests.
		if _, err := io.Copy(uncompressed, in); err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, io.TeeReader(r, compressed)); err != nil {
			return err
		}
		if got := "sha256:" + hex.EncodeToString(compressed.Sum(nil)); l.Digest.Algorithm() == digest.SHA256 && got != l.Digest.String() {
			return fmt.Errorf("blob has digest %s", got)
		}
		if got := "sha256:" + hex.EncodeToString(uncompressed.Sum(nil)); diffID != "" && diffID.Algorithm() == digest.SHA256 && got != diffID.String() {
			return fmt.Errorf("uncompressed layer has digest %s, the config's diff_id is %s", got, diffID)
		}
		return nil
	})
	if err == nil && !seen {
		err = fmt.Errorf("blob %s missing from %s", l.Digest, archive)
	}
	return err
}

// extractTar unpacks one layer over root: every path is resolved inside root
// (securejoin: a symlink in the image never leads a write out of it), OCI
// whiteouts remove what lower layers made, owners and modes are the archive's.
func extractTar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + hdr.Name)
		if name == "/" {
			// The root folder's own entry: its owner and mode.
			if hdr.Typeflag == tar.TypeDir {
				if err := os.Lchown(root, hdr.Uid, hdr.Gid); err != nil {
					return err
				}
				if err := os.Chmod(root, os.FileMode(hdr.Mode&0o777)|specialBits(hdr.Mode)); err != nil {
					return err
				}
			}
			continue
		}
		dir, base := path.Split(name)
		parent, err := securejoin.SecureJoin(root, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if err := mkdirAll(parent); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		target := filepath.Join(parent, base)
		switch {
		case base == ".wh..wh..opq": // opaque: the lower layers' entries of dir are gone
			ents, err := os.ReadDir(parent)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := os.RemoveAll(filepath.Join(parent, e.Name())); err != nil {
					return err
				}
			}
			continue
		case strings.HasPrefix(base, ".wh."):
			if err := os.RemoveAll(filepath.Join(parent, strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		// What is at target is replaced, except a folder by a folder.
		if st, err := os.Lstat(target); err == nil && !(st.IsDir() && hdr.Typeflag == tar.TypeDir) {
			if err := os.RemoveAll(target); err != nil {
				return err
			}
		}
		mode := os.FileMode(hdr.Mode & 0o777)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			src, err := securejoin.SecureJoin(root, hdr.Linkname)
			if err != nil {
				return fmt.Errorf("%s: link to %s: %w", hdr.Name, hdr.Linkname, err)
			}
			if err := os.Link(src, target); err != nil {
				return err
			}
			continue // shares the inode's owner and mode
		default:
			// Devices and fifos: a container's /dev is its own (init.go).
			log.Printf("image layer: %s: entry type %q skipped", hdr.Name, hdr.Typeflag)
			continue
		}
		if err := os.Lchown(target, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeSymlink {
			// (after the chown, which clears setuid bits)
			if err := os.Chmod(target, mode|specialBits(hdr.Mode)); err != nil {
				return err
			}
		}
	}
}

// mkdirAll: os.MkdirAll with mode 0755 whatever the umask (a folder the archive
// does not list, or the unpacked image's own folders, must be open to its users).
func mkdirAll(p string) error {
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return nil
	}
	if err := mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(p, 0o755)
}

func specialBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// imageUser: the uid and gid of the image's User ("", "uid", "uid:gid", "name",
// "name:group"), names looked up in the image's /etc/passwd and /etc/group.
func imageUser(rootfs, user string) (uid, gid int64, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	lookup := func(file, name string) (id, gid int64, err error) {
		b, err := os.ReadFile(filepath.Join(rootfs, "etc", file))
		if err != nil {
			return 0, 0, fmt.Errorf("image user %q: %w", user, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) >= 3 && f[0] == name {
				id, err := strconv.ParseInt(f[2], 10, 64)
				if err == nil && file == "passwd" && len(f) >= 4 {
					gid, err = strconv.ParseInt(f[3], 10, 64)
				}
				return id, gid, err
			}
		}
		return 0, 0, fmt.Errorf("image user %q: %s not in /etc/%s", user, name, file)
	}
	if n, perr := strconv.ParseInt(u, 10, 64); perr == nil {
		uid = n
	} else if uid, gid, err = lookup("passwd", u); err != nil {
		return 0, 0, err
	}
	if hasGroup {
		if n, perr := strconv.ParseInt(g, 10, 64); perr == nil {
			gid = n
		} else if gid, _, err = lookup("group", g); err != nil {
			return 0, 0, err
		}
	}
	return uid, gid, nil
}

// criImage: the CRI's view of an OCI image.
func (img *ociImage) criImage() *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id: img.id.String(), RepoTags: []string{img.name}, RepoDigests: []string{img.repo + "@" + img.manifest.String()},
		Spec: &runtimeapi.ImageSpec{Image: img.name, UserSpecifiedImage: img.name},
	}
	setImageSize(out, uint64(img.size))
	u, _, _ := strings.Cut(img.config.Config.User, ":")
	if n, err := strconv.ParseInt(u, 10, 64); err == nil || u == "" {
		out.Uid = &runtimeapi.Int64Value{Value: n}
	} else {
		out.Username = u
	}
	return out
}
