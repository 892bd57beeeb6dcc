//go:build !unix

package rusage

// addressSpaceLeft is 0: no address-space limit is known here.
func addressSpaceLeft() int64 { return 0 }
