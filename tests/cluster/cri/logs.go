package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// criLog writes a container's output in the CRI log format the kubelet reads
// (`kubectl logs`): "TIMESTAMP STREAM F|P TEXT" per line, P for the parts of a
// line longer than maxLine.
type criLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

const maxLine = 16 << 10

func openLog(path string) (*criLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return &criLog{path: path, f: f}, nil
}

func (l *criLog) write(stream string, text []byte, partial bool) {
	tag := "F"
	if partial {
		tag = "P"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		fmt.Fprintf(l.f, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, text)
	}
}

// copy reads r until EOF, line by line.
func (l *criLog) copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, maxLine)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			l.write(stream, line[:len(line)-1], false)
		case errors.Is(err, bufio.ErrBufferFull):
			l.write(stream, line, true)
		default:
			if len(line) > 0 {
				l.write(stream, line, false)
			}
			return
		}
	}
}

// reopen: the kubelet rotated the file (renamed it) and wants a new one.
func (l *criLog) reopen() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (l *criLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
