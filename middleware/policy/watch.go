package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"time"
)

// Watch polls the Set's file every interval and reloads it when its
// content changes, until ctx is done; then it returns ctx's error. Run it
// in a goroutine of its own:
//
//	go set.Watch(ctx, 2*time.Second)
//
// A poll stats the file (following symbolic links, as Kubernetes
// ConfigMap volumes use); when the modification time or size changed it
// reads the file, and reloads it when its SHA-256 differs from the bytes
// last applied or tried, so a touched file reloads nothing and a broken
// file is reported once, not at every poll. Write the file atomically
// (write a temporary file, then rename it) so that a poll never sees it
// half-written; a half-written file fails validation and is retried when
// it changes again. A file that cannot be stat'ed is logged once per
// distinct error and does not count as a failed reload.
//
// Watch starts no goroutine and holds no resource once it returns. It
// returns an error at once for an interval below one millisecond or a
// Set built with [New].
func (s *Set) Watch(ctx context.Context, interval time.Duration) error {
	if s.path == "" {
		return errNoFile
	}
	if interval < time.Millisecond {
		return errors.New("ratekeeper: policy: Watch interval must be at least 1ms")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	return s.watch(ctx, t.C)
}

// watch polls at every tick until ctx is done.
func (s *Set) watch(ctx context.Context, tick <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			s.poll()
		}
	}
}

// poll reloads the file if its content changed since it was last read.
func (s *Set) poll() {
	fi, err := os.Stat(s.path)
	s.mu.Lock()
	if err != nil {
		if msg := err.Error(); msg != s.statErr {
			s.statErr = msg
			s.log.Warn("ratekeeper: policy file unreadable; the running policies stay", slog.String("file", s.name), slog.String("error", msg))
		}
		s.mu.Unlock()
		return
	}
	s.statErr = ""
	now := fileStat{mod: fi.ModTime(), size: fi.Size()}
	unchanged := now.mod.Equal(s.stat.mod) && now.size == s.stat.size
	s.mu.Unlock()
	if unchanged {
		return
	}
	data, fs, err := readFile(s.path)
	s.mu.Lock()
	if err != nil {
		s.mu.Unlock()
		return // the next poll sees the same change and tries again
	}
	s.stat = fs
	same := sha256.Sum256(data) == s.tried
	s.mu.Unlock()
	if !same {
		_ = s.apply(data, "watch") // apply logs and counts a failure
	}
}
