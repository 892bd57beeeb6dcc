//go:build unix

package rusage

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Usage is this process's resource counters at one moment: CPU time split
// into user and system, the resident set now, and the bytes read from and
// written to storage (/proc/self/io's read_bytes and write_bytes: what
// reached the disk, not the page cache; 0 where the kernel does not say).
type Usage struct {
	User, System time.Duration
	RSSBytes     int64
	DiskRead     int64
	DiskWritten  int64
}

// Now reads the counters; what cannot be read is 0.
func Now() Usage {
	var u Usage
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		u.User, u.System = time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
	}
	u.RSSBytes = currentRSS()
	if b, err := os.ReadFile("/proc/self/io"); err == nil {
		u.DiskRead, u.DiskWritten = procField(b, "read_bytes:"), procField(b, "write_bytes:")
	}
	return u
}

// currentRSS is the resident set now (/proc/self/statm's second field, in
// pages), 0 if unknown.
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// procField is the number after key in a "key: value" /proc file.
func procField(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}
