//go:build !unix

package rusage

// OpenFilesLimit is not known here.
func OpenFilesLimit() int64 { return 0 }
