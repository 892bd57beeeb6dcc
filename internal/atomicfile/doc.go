// Package atomicfile writes a file so that its name either keeps its old
// content or holds the whole new content, never a torn or partial file,
// even across a crash: the bytes go to a temporary file in the same
// directory (the same file system, so the rename is atomic), which is
// fsynced, closed, renamed over the name, and then the directory is
// fsynced so that the rename itself survives a crash.
//
// WriteFile writes a whole []byte; Create returns a File to stream into
// (an io.Writer) that ends with exactly one of Commit (publish) or Abort
// (discard). Invariant: on every path but a successful Commit the
// temporary file is removed; a process killed mid-write leaves one, named
// TempPrefix(name) followed by random characters, which never passes for
// the real file.
//
// Only a regular file (or a missing one) is replaced so; a character
// device or a FIFO (/dev/stdout, /dev/null) is written into directly,
// opened without blocking, and anything else is refused by name
// (Classify): nothing but a regular file is ever renamed over.
package atomicfile
