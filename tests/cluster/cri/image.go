package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageService "pulls" every image at once: nothing is downloaded. An image of a
// repository served by an OCI archive (--oci-archive, oci.go) is read from it and
// unpacked; any other image is a name (a mapped one runs a local binary, any other
// is pause-like).
type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
	rt *runtime
}

// imageSize is the size reported for every image.
const imageSize = 1 << 20

func imageID(name string) string {
	h := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(h[:])
}

// find by name or ID. rt.mu held.
func (s *imageService) find(ref string) *runtimeapi.Image {
	if img := s.rt.images[ref]; img != nil {
		return img
	}
	for _, img := range s.rt.images {
		if img.Id == ref {
			return img
		}
	}
	return nil
}

func (s *imageService) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	out := []*runtimeapi.Image{}
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		if img := s.find(ref); img != nil {
			out = append(out, img)
		}
		return &runtimeapi.ListImagesResponse{Images: out}, nil
	}
	for _, img := range s.rt.images {
		out = append(out, img)
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

func (s *imageService) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	img := s.find(req.GetImage().GetImage())
	if img != nil {
		// An archive rebuilt since the pull holds another image: gone from the
		// store, so that the kubelet pulls it again (IfNotPresent).
		if o := s.rt.oci[img.Spec.Image]; o != nil && archiveStamp(o.archive) != o.stamp {
			log.Printf("image %s: %s changed since the pull: forgotten", o.name, o.archive)
			delete(s.rt.images, o.name)
			delete(s.rt.oci, o.name)
			img = nil
		}
	}
	return &runtimeapi.ImageStatusResponse{Image: img}, nil
}

func (s *imageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name := req.GetImage().GetImage()
	if repo, archive := s.rt.archiveFor(name); archive != "" {
		return s.pullOCI(name, repo, archive)
	}
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if img := s.find(name); img != nil {
		return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
	}
	img := &runtimeapi.Image{
		Id: imageID(name), RepoTags: []string{name},
		Uid: &runtimeapi.Int64Value{Value: 0}, Spec: &runtimeapi.ImageSpec{Image: name, UserSpecifiedImage: name},
	}
	setImageSize(img, imageSize)
	s.rt.images[name] = img
	kind := "pause-like"
	if p := s.rt.cfg.images[name]; p != "" {
		kind = "runs " + p
	}
	log.Printf("image %s pulled (%s)", name, kind)
	return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
}

// pullOCI reads name from the archive and unpacks it (once per digest).
func (s *imageService) pullOCI(name, repo, archive string) (*runtimeapi.PullImageResponse, error) {
	img, err := resolveOCI(name, repo, archive)
	if err == nil {
		err = unpackOCI(img, s.rt.cfg.ociDir)
	}
	if err != nil {
		log.Printf("image %s: pull failed: %v", name, err)
		if os.IsNotExist(err) {
			return nil, status.Errorf(codes.NotFound, "pull %s: %v", name, err)
		}
		return nil, status.Errorf(codes.Unknown, "pull %s: %v", name, err)
	}
	cri := img.criImage()
	s.rt.mu.Lock()
	s.rt.images[name] = cri
	s.rt.oci[name] = img
	s.rt.mu.Unlock()
	log.Printf("image %s pulled from %s: manifest %s, config %s, user %q, entrypoint %q", name, archive, img.manifest, img.id,
		img.config.Config.User, img.config.Config.Entrypoint)
	return &runtimeapi.PullImageResponse{ImageRef: cri.Id}, nil
}

func (s *imageService) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if img := s.find(req.GetImage().GetImage()); img != nil {
		delete(s.rt.images, img.Spec.Image)
		delete(s.rt.oci, img.Spec.Image)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo: images and containers live in the node's folder.
func (s *imageService) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	s.rt.mu.Lock()
	n := uint64(len(s.rt.images))
	s.rt.mu.Unlock()
	fs := []*runtimeapi.FilesystemUsage{{
		Timestamp:  time.Now().UnixNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.rt.cfg.nodeDir},
		UsedBytes:  &runtimeapi.UInt64Value{Value: n * imageSize},
		InodesUsed: &runtimeapi.UInt64Value{Value: n},
	}}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: fs, ContainerFilesystems: fs}, nil
}
