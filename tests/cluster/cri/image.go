package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageService "pulls" every image at once: nothing is downloaded, an image is
// a name (a mapped one runs a local binary, any other is pause-like).
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
	return &runtimeapi.ImageStatusResponse{Image: s.find(req.GetImage().GetImage())}, nil
}

func (s *imageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	name := req.GetImage().GetImage()
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if img := s.find(name); img != nil {
		return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
	}
	img := &runtimeapi.Image{
		Id: imageID(name), RepoTags: []string{name}, Size: imageSize,
		Uid: &runtimeapi.Int64Value{Value: 0}, Spec: &runtimeapi.ImageSpec{Image: name, UserSpecifiedImage: name},
	}
	s.rt.images[name] = img
	kind := "pause-like"
	if p := s.rt.cfg.images[name]; p != "" {
		kind = "runs " + p
	}
	log.Printf("image %s pulled (%s)", name, kind)
	return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
}

func (s *imageService) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	if img := s.find(req.GetImage().GetImage()); img != nil {
		delete(s.rt.images, img.Spec.Image)
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
